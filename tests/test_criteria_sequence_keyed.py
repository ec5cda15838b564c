"""The matcher's shortcuts give the plain path's answer: the key index, ``same=None``, the aligned prefix and
the LCS prefix trim."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tracegrade.criteria.sequence_match import match_sequences, why_unmatched
from tracegrade.models import MatchType

# Items are (name, value); an expected value "*" accepts any value (a call expected with args={}).
ACTUAL = st.lists(st.tuples(st.sampled_from("abc"), st.sampled_from("xy")), max_size=7)
EXPECTED = st.lists(st.tuples(st.sampled_from("abc"), st.sampled_from("xy*")), max_size=6)


def same(actual: tuple[str, str], expected: tuple[str, str]) -> bool:
    return actual[0] == expected[0] and expected[1] in ("*", actual[1])


def name(item: tuple[str, str]) -> str:
    return item[0]


def full_table_lcs_pairs(expected, actual) -> list[tuple[int, int]]:
    """The pairs the LCS table chooses without trimming a matched prefix (the matcher's former code)."""
    n, m = len(expected), len(actual)
    equal = [[same(actual[j], expected[i]) for j in range(m)] for i in range(n)]
    suffix = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        for j in range(m - 1, -1, -1):
            suffix[i][j] = suffix[i + 1][j + 1] + 1 if equal[i][j] else max(suffix[i + 1][j], suffix[i][j + 1])
    pairs, i, j = [], 0, 0
    while i < n and j < m:
        if equal[i][j] and suffix[i][j] == suffix[i + 1][j + 1] + 1:
            pairs.append((i, j))
            i, j = i + 1, j + 1
        elif suffix[i][j + 1] == suffix[i][j]:
            j += 1
        else:
            i += 1
    return pairs


@settings(max_examples=400, deadline=None)
@given(EXPECTED, ACTUAL, st.sampled_from(list(MatchType)))
def test_the_key_index_changes_nothing(expected, actual, match_type):
    plain = match_sequences(expected, actual, match_type, same)
    names = ([name(e) for e in expected], [name(a) for a in actual])
    keyed = match_sequences(expected, actual, match_type, same, names)
    assert keyed == plain
    for i in plain.missing:
        assert why_unmatched(i, expected, actual, keyed, same, names) == why_unmatched(i, expected, actual, plain, same)


@settings(max_examples=400, deadline=None)
@given(EXPECTED, ACTUAL, st.sampled_from(list(MatchType)))
def test_a_given_table_of_satisfying_positions_changes_nothing(expected, actual, match_type):
    def never(actual_item, expected_item):  # with the table given, the predicate is not asked
        raise AssertionError("asked the predicate")

    plain = match_sequences(expected, actual, match_type, same)
    names = ([name(e) for e in expected], [name(a) for a in actual])
    table = [[j for j, a in enumerate(actual) if same(a, e)] for e in expected]
    tabled = match_sequences(expected, actual, match_type, never, names, table)
    assert (tabled.score, tabled.pairs, tabled.missing, tabled.extra) == (
        plain.score,
        plain.pairs,
        plain.missing,
        plain.extra,
    )
    for i in plain.missing:
        assert why_unmatched(i, expected, actual, tabled, never, names) == why_unmatched(
            i, expected, actual, plain, same
        )


@settings(max_examples=1000, deadline=None)
@given(EXPECTED, ACTUAL)
def test_in_order_pairs_are_the_full_tables_pairs(expected, actual):
    # whether the greedy pass decided (it paired min(len) items) or the trimmed table ran
    assert match_sequences(expected, actual, MatchType.IN_ORDER, same).pairs == full_table_lcs_pairs(expected, actual)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from("abc"), max_size=6), st.lists(st.sampled_from("abc"), max_size=7))
def test_equal_keys_without_a_predicate_are_plain_equality(expected, actual):
    for match_type in MatchType:
        assert match_sequences(expected, actual, match_type, None, (expected, actual)) == match_sequences(
            expected, actual, match_type, str.__eq__
        )


def plain_pairs(expected, actual, match_type) -> list[tuple[int, int]]:
    """The pairs each match type chooses, item by item from the start (no aligned-prefix shortcut)."""
    if match_type is MatchType.EXACT:
        return [(i, i) for i in range(min(len(expected), len(actual))) if same(actual[i], expected[i])]
    if match_type is MatchType.IN_ORDER:
        pairs, j = [], 0
        for i, item in enumerate(expected):
            found = next((k for k in range(j, len(actual)) if same(actual[k], item)), None)
            if found is None:
                return full_table_lcs_pairs(expected, actual)
            pairs.append((i, found))
            j = found + 1
        return pairs
    owner: dict[int, int] = {}

    def augment(i: int, seen: set[int]) -> bool:
        for j in (k for k in range(len(actual)) if same(actual[k], expected[i])):
            if j not in seen:
                seen.add(j)
                if j not in owner or augment(owner[j], seen):
                    owner[j] = i
                    return True
        return False

    for i, item in enumerate(expected):
        free = next((k for k in range(len(actual)) if same(actual[k], item) and k not in owner), None)
        if free is not None:
            owner[free] = i
        else:
            augment(i, set())
    return sorted((i, j) for j, i in owner.items())


# Mostly-equal sequences, so that long aligned prefixes (and whole aligned runs) come up often.
SHARED = st.lists(st.tuples(st.sampled_from("abc"), st.sampled_from("xy")), max_size=6)


@settings(max_examples=500, deadline=None)
@given(SHARED, st.lists(st.tuples(st.sampled_from("abc"), st.sampled_from("xy*")), max_size=3), ACTUAL)
def test_the_aligned_prefix_pairs_as_the_plain_path_does(common, expected_tail, actual_tail):
    expected, actual = common + expected_tail, common + actual_tail
    for match_type in MatchType:
        names = ([name(e) for e in expected], [name(a) for a in actual])
        for keys in (None, names):
            assert match_sequences(expected, actual, match_type, same, keys).pairs == plain_pairs(
                expected, actual, match_type
            ), (match_type, keys)
