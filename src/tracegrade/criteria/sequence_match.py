"""Matching an expected sequence against an actual one (EXACT / IN_ORDER / ANY_ORDER).

One implementation serves tool calls and node visits: it is parameterised by ``same(actual, expected)``,
the predicate that says whether an actual item satisfies an expected one. It returns which expected
item matched which actual item, so criteria can give partial-credit details, not only a score.

* EXACT — position ``i`` of both sequences must match; an extra actual item counts against the score:
  ``score = matched / max(len(expected), len(actual))``.
* IN_ORDER — the expected items must appear as a subsequence (extras allowed); the longest common
  subsequence decides (not a prefix-sensitive greedy scan): ``score = matched / len(expected)``.
* ANY_ORDER — multiset matching (a maximum bipartite matching, so a wildcard expectation never steals
  the only call a specific expectation could use): ``score = matched / len(expected)``.

Empty expectations are the callers' business (tools and nodes treat them differently); here both
sequences empty score 1.0, and only EXACT penalises actual items when nothing is expected.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from tracegrade.models.config import MatchType

__all__ = ["SequenceMatch", "match_sequences", "why_unmatched"]

A = TypeVar("A")
E = TypeVar("E")


@dataclass(slots=True)
class SequenceMatch:
    """The outcome of one match: the score and the ``(expected_index, actual_index)`` pairs."""

    score: float
    pairs: list[tuple[int, int]]
    missing: list[int]  # expected indices left unmatched
    extra: list[int]  # actual indices left unmatched


def match_sequences(
    expected: Sequence[E],
    actual: Sequence[A],
    match_type: MatchType,
    same: Callable[[A, E], bool],
) -> SequenceMatch:
    """Match ``actual`` against ``expected`` under ``match_type`` using the ``same`` predicate."""
    if match_type is MatchType.EXACT:
        pairs = [(i, i) for i in range(min(len(expected), len(actual))) if same(actual[i], expected[i])]
        denominator = max(len(expected), len(actual))
    elif match_type is MatchType.IN_ORDER:
        pairs = _in_order_pairs(expected, actual, same)
        denominator = len(expected)
    else:
        pairs = _any_order_pairs(expected, actual, same)
        denominator = len(expected)
    if denominator == 0:
        score = 1.0 if not actual or match_type is not MatchType.EXACT else 0.0
    else:
        score = len(pairs) / denominator
    matched_expected = {e for e, _ in pairs}
    matched_actual = {a for _, a in pairs}
    return SequenceMatch(
        score=score,
        pairs=pairs,
        missing=[i for i in range(len(expected)) if i not in matched_expected],
        extra=[j for j in range(len(actual)) if j not in matched_actual],
    )


def why_unmatched(
    expected_index: int,
    expected: Sequence[E],
    actual: Sequence[A],
    match: SequenceMatch,
    same: Callable[[A, E], bool],
) -> str | None:
    """Why an expected item went unmatched although an actual item satisfies it, else ``None``.

    ``"out of order"`` when a satisfying actual item is left over (it sits at the wrong position);
    ``"fewer times than expected"`` when every satisfying actual item was used by another expectation.
    """
    item = expected[expected_index]
    satisfying = [j for j, candidate in enumerate(actual) if same(candidate, item)]
    if not satisfying:
        return None
    leftover = set(match.extra)
    return "out of order" if any(j in leftover for j in satisfying) else "fewer times than expected"


def _in_order_pairs(expected: Sequence[E], actual: Sequence[A], same: Callable[[A, E], bool]) -> list[tuple[int, int]]:
    """Pairs of a longest common subsequence, each expected item taking the earliest usable actual item."""
    # Fast path: a greedy leftmost embedding that places every expected item is already optimal.
    pairs: list[tuple[int, int]] = []
    j = 0
    for i, item in enumerate(expected):
        while j < len(actual) and not same(actual[j], item):
            j += 1
        if j == len(actual):
            break
        pairs.append((i, j))
        j += 1
    if len(pairs) == len(expected):
        return pairs
    return _lcs_pairs(expected, actual, same)


def _lcs_pairs(expected: Sequence[E], actual: Sequence[A], same: Callable[[A, E], bool]) -> list[tuple[int, int]]:
    n, m = len(expected), len(actual)
    equal = [[same(actual[j], expected[i]) for j in range(m)] for i in range(n)]
    # suffix[i][j] = LCS length of expected[i:] and actual[j:]
    suffix = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        row, below, eq_row = suffix[i], suffix[i + 1], equal[i]
        for j in range(m - 1, -1, -1):
            if eq_row[j]:
                row[j] = below[j + 1] + 1
            else:
                row[j] = below[j] if below[j] >= row[j + 1] else row[j + 1]
    pairs = []
    i = j = 0
    while i < n and j < m:
        if equal[i][j] and suffix[i][j] == suffix[i + 1][j + 1] + 1:
            pairs.append((i, j))
            i += 1
            j += 1
        elif suffix[i][j + 1] == suffix[i][j]:
            j += 1
        else:
            i += 1
    return pairs


def _any_order_pairs(expected: Sequence[E], actual: Sequence[A], same: Callable[[A, E], bool]) -> list[tuple[int, int]]:
    """Maximum bipartite matching (augmenting paths); expected items prefer the earliest free actual item."""
    candidates = [[j for j in range(len(actual)) if same(actual[j], item)] for item in expected]
    owner: dict[int, int] = {}  # actual index -> expected index

    def augment(i: int, seen: set[int]) -> bool:
        for j in candidates[i]:
            if j in seen:
                continue
            seen.add(j)
            if j not in owner or augment(owner[j], seen):
                owner[j] = i
                return True
        return False

    for i in range(len(expected)):
        # Cheap first try: a free candidate needs no search.
        free = next((j for j in candidates[i] if j not in owner), None)
        if free is not None:
            owner[free] = i
        else:
            augment(i, set())
    return sorted((i, j) for j, i in owner.items())
