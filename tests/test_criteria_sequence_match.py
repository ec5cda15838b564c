"""The shared sequence matcher against brute-force definitions (hypothesis-generated sequences)."""

from __future__ import annotations

from functools import cache

from hypothesis import given, settings
from hypothesis import strategies as st

from tracegrade.criteria.sequence_match import match_sequences
from tracegrade.models import MatchType

ITEMS = st.lists(st.sampled_from("abcd"), max_size=6)
# Expected items may be a wildcard "*" that any actual item satisfies (like a ToolCall with args={}).
PATTERNS = st.lists(st.sampled_from("abc*"), max_size=5)


def same(actual: str, expected: str) -> bool:
    return expected == "*" or actual == expected


def brute_lcs(expected: list[str], actual: list[str]) -> int:
    @cache
    def lcs(i: int, j: int) -> int:
        if i == len(expected) or j == len(actual):
            return 0
        best = max(lcs(i + 1, j), lcs(i, j + 1))
        return max(best, 1 + lcs(i + 1, j + 1)) if same(actual[j], expected[i]) else best

    return lcs(0, 0)


def brute_matching(expected: list[str], actual: list[str]) -> int:
    """Largest number of expected items that can each take a distinct satisfying actual item."""
    if not expected:
        return 0
    first, rest = expected[0], expected[1:]
    best = brute_matching(rest, actual)  # leave the first expected item unmatched
    for j, item in enumerate(actual):
        if same(item, first):
            best = max(best, 1 + brute_matching(rest, actual[:j] + actual[j + 1 :]))
    return best


def check_pairs(match, expected, actual, ordered: bool) -> None:
    assert all(same(actual[j], expected[i]) for i, j in match.pairs)
    assert len({i for i, _ in match.pairs}) == len({j for _, j in match.pairs}) == len(match.pairs)
    if ordered:
        assert [j for _, j in sorted(match.pairs)] == sorted(j for _, j in match.pairs)
    assert sorted(match.missing + [i for i, _ in match.pairs]) == list(range(len(expected)))
    assert sorted(match.extra + [j for _, j in match.pairs]) == list(range(len(actual)))


@settings(max_examples=300, deadline=None)
@given(PATTERNS, ITEMS)
def test_in_order_is_a_longest_common_subsequence(expected, actual):
    match = match_sequences(expected, actual, MatchType.IN_ORDER, same)
    check_pairs(match, expected, actual, ordered=True)
    assert len(match.pairs) == brute_lcs(expected, actual)
    assert match.score == (len(match.pairs) / len(expected) if expected else 1.0)


@settings(max_examples=300, deadline=None)
@given(PATTERNS, ITEMS)
def test_any_order_is_a_maximum_matching(expected, actual):
    match = match_sequences(expected, actual, MatchType.ANY_ORDER, same)
    check_pairs(match, expected, actual, ordered=False)
    assert len(match.pairs) == brute_matching(expected, actual)


@settings(max_examples=300, deadline=None)
@given(PATTERNS, ITEMS)
def test_exact_compares_positions_and_penalises_extras(expected, actual):
    match = match_sequences(expected, actual, MatchType.EXACT, same)
    check_pairs(match, expected, actual, ordered=True)
    positional = sum(same(a, e) for a, e in zip(actual, expected))
    longest = max(len(expected), len(actual))
    assert match.score == (positional / longest if longest else 1.0)
    assert all(i == j for i, j in match.pairs)
