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

``same`` is the costly part (tool arguments are compared structurally), so callers whose predicate
implies equal keys (a tool call only satisfies a call of the same name) pass ``key``: ``same`` is then
asked only about pairs whose keys are equal, found through an index of the actual items by key, instead
of about every pair (and not at all when it is ``None``: equal keys match). The outcome is the same as
without ``key`` (a test compares both).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Hashable, Sequence
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
    same: Callable[[A, E], bool] | None,
    key: Callable[[A | E], Hashable] | None = None,
) -> SequenceMatch:
    """Match ``actual`` against ``expected`` under ``match_type`` using the ``same`` predicate.

    With ``key``, ``same(a, e)`` must imply ``key(a) == key(e)``; only such pairs are then tested, and
    ``same=None`` means equal keys match.
    """
    pairs_of = _Pairs(expected, actual, same, key)
    if match_type is MatchType.EXACT:
        pairs = [(i, i) for i in range(min(len(expected), len(actual))) if pairs_of.same(i, i)]
        denominator = max(len(expected), len(actual))
    elif match_type is MatchType.IN_ORDER:
        pairs = _in_order_pairs(pairs_of)
        denominator = len(expected)
    else:
        pairs = _any_order_pairs(pairs_of)
        denominator = len(expected)
    if denominator == 0:
        score = 1.0 if not actual or match_type is not MatchType.EXACT else 0.0
    else:
        score = len(pairs) / denominator
    if len(pairs) == len(expected):
        missing: list[int] = []
    else:
        matched_expected = {e for e, _ in pairs}
        missing = [i for i in range(len(expected)) if i not in matched_expected]
    if len(pairs) == len(actual):
        extra: list[int] = []
    else:
        matched_actual = {a for _, a in pairs}
        extra = [j for j in range(len(actual)) if j not in matched_actual]
    return SequenceMatch(score=score, pairs=pairs, missing=missing, extra=extra)


def why_unmatched(
    expected_index: int,
    expected: Sequence[E],
    actual: Sequence[A],
    match: SequenceMatch,
    same: Callable[[A, E], bool] | None,
    key: Callable[[A | E], Hashable] | None = None,
) -> str | None:
    """Why an expected item went unmatched although an actual item satisfies it, else ``None``.

    ``"out of order"`` when a satisfying actual item is left over (it sits at the wrong position);
    ``"fewer times than expected"`` when every satisfying actual item was used by another expectation.
    """
    satisfying = _Pairs(expected, actual, same, key).satisfying(expected_index)
    if not satisfying:
        return None
    leftover = set(match.extra)
    return "out of order" if any(j in leftover for j in satisfying) else "fewer times than expected"


class _Pairs:
    """Answers "does actual ``j`` satisfy expected ``i``?" for one match, testing only same-key pairs."""

    __slots__ = ("_positions", "_same", "_satisfying", "actual", "expected", "key")

    def __init__(
        self,
        expected: Sequence[E],
        actual: Sequence[A],
        same: Callable[[A, E], bool] | None,
        key: Callable[[A | E], Hashable] | None,
    ) -> None:
        if same is None and key is None:
            raise ValueError("match_sequences needs a predicate (same), a key, or both")
        self.expected, self.actual, self._same, self.key = expected, actual, same, key
        self._positions: dict[Hashable, list[int]] | None = None
        self._satisfying: dict[int, list[int]] = {}

    def same(self, i: int, j: int) -> bool:
        a, e = self.actual[j], self.expected[i]
        key = self.key
        same = self._same
        return (key is None or key(a) == key(e)) and (same is None or same(a, e))

    def positions(self, i: int) -> Sequence[int]:
        """The actual indices (ascending) that could satisfy expected ``i``: same key, or all without one."""
        key = self.key
        if key is None:
            return range(len(self.actual))
        if self._positions is None:
            self._positions = {}
            for j, item in enumerate(self.actual):
                self._positions.setdefault(key(item), []).append(j)
        return self._positions.get(key(self.expected[i]), [])

    def satisfying(self, i: int) -> list[int]:
        """Every actual index that satisfies expected ``i``, ascending (computed once per ``i``)."""
        found = self._satisfying.get(i)
        if found is None:
            item, actual, same = self.expected[i], self.actual, self._same
            positions = self.positions(i)
            found = list(positions) if same is None else [j for j in positions if same(actual[j], item)]
            self._satisfying[i] = found
        return found

    def first_from(self, i: int, start: int) -> int | None:
        """The first actual index ``>= start`` that satisfies expected ``i``."""
        positions = self.positions(i)
        item, actual, same = self.expected[i], self.actual, self._same
        for n in range(bisect_left(positions, start), len(positions)):
            if same is None or same(actual[positions[n]], item):
                return positions[n]
        return None


def _in_order_pairs(pairs_of: _Pairs) -> list[tuple[int, int]]:
    """Pairs of a longest common subsequence, each expected item taking the earliest usable actual item."""
    # Fast path: a greedy leftmost embedding that places every expected item is already optimal.
    pairs: list[tuple[int, int]] = []
    j = 0
    for i in range(len(pairs_of.expected)):
        found = pairs_of.first_from(i, j)
        if found is None:
            break
        pairs.append((i, found))
        j = found + 1
    if len(pairs) == len(pairs_of.expected):
        return pairs
    return _lcs_pairs(pairs_of)


def _lcs_pairs(pairs_of: _Pairs) -> list[tuple[int, int]]:
    n, m = len(pairs_of.expected), len(pairs_of.actual)
    # A common prefix matched position by position is part of the pairs the full table would choose (an
    # item satisfied at the front can always take the front), so the table covers only what follows it.
    start = 0
    while start < min(n, m) and pairs_of.same(start, start):
        start += 1
    pairs = [(k, k) for k in range(start)]
    rows, cols = n - start, m - start
    equal = []
    for i in range(start, n):
        row = [False] * cols
        for j in pairs_of.satisfying(i):
            if j >= start:
                row[j - start] = True
        equal.append(row)
    # suffix[i][j] = LCS length of expected[start + i:] and actual[start + j:]
    suffix = [[0] * (cols + 1) for _ in range(rows + 1)]
    for i in range(rows - 1, -1, -1):
        here, below, eq_row = suffix[i], suffix[i + 1], equal[i]
        for j in range(cols - 1, -1, -1):
            if eq_row[j]:
                here[j] = below[j + 1] + 1
            else:
                here[j] = below[j] if below[j] >= here[j + 1] else here[j + 1]
    i = j = 0
    while i < rows and j < cols:
        if equal[i][j] and suffix[i][j] == suffix[i + 1][j + 1] + 1:
            pairs.append((start + i, start + j))
            i += 1
            j += 1
        elif suffix[i][j + 1] == suffix[i][j]:
            j += 1
        else:
            i += 1
    return pairs


def _any_order_pairs(pairs_of: _Pairs) -> list[tuple[int, int]]:
    """Maximum bipartite matching (augmenting paths); expected items prefer the earliest free actual item."""
    candidates = [pairs_of.satisfying(i) for i in range(len(pairs_of.expected))]
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

    for i in range(len(candidates)):
        # Cheap first try: a free candidate needs no search.
        free = next((j for j in candidates[i] if j not in owner), None)
        if free is not None:
            owner[free] = i
        else:
            augment(i, set())
    return sorted((i, j) for j, i in owner.items())
