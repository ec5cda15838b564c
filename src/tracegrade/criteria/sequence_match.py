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

``same`` is the costly part (tool arguments are compared structurally), so callers whose items carry a
key that a satisfying item must share (a tool call only satisfies a call of the same name) pass ``keys``,
each item's key: ``same`` is then asked only about pairs whose keys are equal (so it need not compare
them itself), found through an index of the actual items by key, instead of about every pair (and not
at all when it is ``None``: equal keys match). Every match type first walks the prefix where both
sequences match position by position, since each of them pairs that prefix the same way; a run that did
what was expected is then one pass. The outcome is the same as without ``keys`` and without the prefix
walk (tests compare them). A caller that has already found, for every expected item, the actual items that
satisfy it (the trajectory criterion does so in one compiled pass) passes that table as ``satisfying``, and
``same`` is then not asked at all.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tracegrade.models.config import MatchType

__all__ = ["SequenceMatch", "aligned_pair_details", "match_sequences", "pair_details", "why_unmatched"]

# ``(expected_keys, actual_keys)``: one hashable key per item of each sequence
Keys = tuple[Sequence[Hashable], Sequence[Hashable]]
# ``same(actual_item, expected_item)``
Same = Callable[[Any, Any], bool]


@dataclass(slots=True)
class SequenceMatch:
    """The outcome of one match: the score and the ``(expected_index, actual_index)`` pairs."""

    score: float
    pairs: list[tuple[int, int]]
    missing: list[int]  # expected indices left unmatched
    extra: list[int]  # actual indices left unmatched
    # what the match learnt about which pairs satisfy (``why_unmatched`` asks the same questions again)
    tester: _Pairs | None = field(default=None, repr=False, compare=False)


def match_sequences(
    expected: Sequence[Any],
    actual: Sequence[Any],
    match_type: MatchType,
    same: Same | None,
    keys: Keys | None = None,
    satisfying: Sequence[Sequence[int]] | None = None,
) -> SequenceMatch:
    """Match ``actual`` against ``expected`` under ``match_type`` using the ``same`` predicate.

    With ``keys``, ``same(a, e)`` is asked only about pairs with equal keys (an item can only satisfy an
    expectation that has its key), and ``same=None`` means equal keys match. ``satisfying[i]``, when given,
    lists the actual indices (ascending) that satisfy expected ``i``, as ``same`` and ``keys`` would say.
    """
    if keys is not None and keys[0] == keys[1] and _in_place(expected, actual, same, satisfying):
        # the usual graded run: the same keys throughout and every item satisfied at its own position, which
        # one C-level pass decides; every match type pairs the sequences position by position then
        everywhere = range(len(expected))
        return SequenceMatch(score=1.0, pairs=list(zip(everywhere, everywhere)), missing=[], extra=[])
    pairs_of = _Pairs(expected, actual, same, keys, satisfying)
    aligned = pairs_of.aligned_prefix()
    if aligned == len(expected) == len(actual):  # every match type pairs each item with its namesake position
        pairs = [(i, i) for i in range(aligned)]
    elif match_type is MatchType.EXACT:
        pairs = [(i, i) for i in range(aligned)]
        pairs += [(i, i) for i in range(aligned + 1, min(len(expected), len(actual))) if pairs_of.same(i, i)]
    elif match_type is MatchType.IN_ORDER:
        pairs = _in_order_pairs(pairs_of, aligned)
    else:
        pairs = _any_order_pairs(pairs_of, aligned)
    denominator = max(len(expected), len(actual)) if match_type is MatchType.EXACT else len(expected)
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
    return SequenceMatch(score=score, pairs=pairs, missing=missing, extra=extra, tester=pairs_of)


def _in_place(
    expected: Sequence[Any], actual: Sequence[Any], same: Same | None, satisfying: Sequence[Sequence[int]] | None
) -> bool:
    """Does every actual item satisfy the expected item at its position (the sequences' keys being equal)?"""
    if satisfying is not None:
        return all(_holds(row, i) for i, row in enumerate(satisfying))
    return same is None or all(map(same, actual, expected))


def pair_details(match: SequenceMatch, expected_names: Sequence[str]) -> list[dict[str, Any]]:
    """The match's pairs as result details: each expected index, the actual index it matched and its name."""
    return [{"expected_index": i, "actual_index": j, "name": expected_names[i]} for i, j in match.pairs]


def aligned_pair_details(names: Sequence[str]) -> list[dict[str, Any]]:
    """:func:`pair_details` of a match that paired every item with the item at its own position."""
    return [{"expected_index": i, "actual_index": i, "name": name} for i, name in enumerate(names)]


def why_unmatched(
    expected_index: int,
    expected: Sequence[Any],
    actual: Sequence[Any],
    match: SequenceMatch,
    same: Same | None,
    keys: Keys | None = None,
) -> str | None:
    """Why an expected item went unmatched although an actual item satisfies it, else ``None``.

    ``"out of order"`` when a satisfying actual item is left over (it sits at the wrong position);
    ``"fewer times than expected"`` when every satisfying actual item was used by another expectation.
    """
    tester = match.tester
    if tester is None or not tester.answers_for(expected, actual, same, keys):
        tester = _Pairs(expected, actual, same, keys)
    satisfying = tester.satisfying(expected_index)
    if not satisfying:
        return None
    leftover = set(match.extra)
    for j in satisfying:
        if j in leftover:
            return "out of order"
    return "fewer times than expected"


class _Pairs:
    """Answers "does actual ``j`` satisfy expected ``i``?" for one match, testing only same-key pairs."""

    def __init__(
        self,
        expected: Sequence[Any],
        actual: Sequence[Any],
        same: Same | None,
        keys: Keys | None,
        satisfying: Sequence[Sequence[int]] | None = None,
    ) -> None:
        if same is None and keys is None:
            raise ValueError("match_sequences needs a predicate (same), keys, or both")
        if keys is not None and (len(keys[0]) != len(expected) or len(keys[1]) != len(actual)):
            raise ValueError("match_sequences needs one key per item of each sequence")
        if satisfying is not None and len(satisfying) != len(expected):
            raise ValueError("match_sequences needs one list of satisfying positions per expected item")
        self.expected = expected
        self.actual = actual
        self.predicate = same
        self.keys = keys
        self.by_key: dict[Hashable, list[int]] | None = None  # actual indices by key, built when first needed
        # expected index -> the actual indices that satisfy it
        self.found: dict[int, Sequence[int]] = {} if satisfying is None else dict(enumerate(satisfying))

    def answers_for(self, expected: Sequence[Any], actual: Sequence[Any], same: Same | None, keys: Keys | None) -> bool:
        """Was this built for exactly these sequences, predicate and keys (the same objects)?"""
        own_keys = self.keys
        same_keys = own_keys is keys or (
            own_keys is not None and keys is not None and own_keys[0] is keys[0] and own_keys[1] is keys[1]
        )
        return self.expected is expected and self.actual is actual and self.predicate is same and same_keys

    def same(self, i: int, j: int) -> bool:
        found = self.found.get(i)
        if found is not None:  # answered already, or given
            return _holds(found, j)
        keys = self.keys
        if keys is not None and keys[0][i] != keys[1][j]:
            return False
        predicate = self.predicate
        return predicate is None or predicate(self.actual[j], self.expected[i])

    def aligned_prefix(self) -> int:
        """How many leading items match position by position."""
        expected, actual, predicate, keys = self.expected, self.actual, self.predicate, self.keys
        end = min(len(expected), len(actual))
        i = 0
        if len(self.found) == len(expected):  # the caller's table: no item is compared again
            found = self.found
            while i < end and _holds(found[i], i):
                i += 1
            return i
        if keys is None:
            while i < end and predicate(actual[i], expected[i]):  # type: ignore[misc]
                i += 1
            return i
        expected_keys, actual_keys = keys
        while i < end and expected_keys[i] == actual_keys[i]:
            if predicate is not None and not predicate(actual[i], expected[i]):
                break
            i += 1
        return i

    def positions(self, i: int) -> Sequence[int]:
        """The actual indices (ascending) that could satisfy expected ``i``: same key, or all without one."""
        keys = self.keys
        if keys is None:
            return range(len(self.actual))
        by_key = self.by_key
        if by_key is None:
            by_key = self.by_key = {}
            for j, key in enumerate(keys[1]):
                found = by_key.get(key)
                if found is None:
                    by_key[key] = [j]
                else:
                    found.append(j)
        return by_key.get(keys[0][i], [])

    def satisfying(self, i: int) -> Sequence[int]:
        """Every actual index that satisfies expected ``i``, ascending (computed once per ``i``; read only)."""
        found = self.found.get(i)
        if found is None:
            positions = self.positions(i)
            predicate = self.predicate
            if predicate is None:  # every position of the key satisfies it: the index's own list
                found = positions
            else:
                item, actual = self.expected[i], self.actual
                found = [j for j in positions if predicate(actual[j], item)]
            self.found[i] = found
        return found

    def first_from(self, i: int, start: int) -> int:
        """The first actual index ``>= start`` that satisfies expected ``i``, or -1."""
        satisfying = self.satisfying(i)  # every pair asked about once, also when the table runs after this
        n = bisect_left(satisfying, start)
        return satisfying[n] if n < len(satisfying) else -1


def _holds(positions: Sequence[int], j: int) -> bool:
    """Is ``j`` among ``positions`` (ascending)? A tool called hundreds of times has hundreds of them."""
    n = bisect_left(positions, j)
    return n < len(positions) and positions[n] == j


def _in_order_pairs(pairs_of: _Pairs, aligned: int) -> list[tuple[int, int]]:
    """Pairs of a longest common subsequence, as the table of ``_lcs_pairs`` walks it."""
    # Fast path: a greedy leftmost embedding (each expected item takes the earliest usable actual item, and one
    # with none left is skipped) that pairs min(len(expected), len(actual)) items cannot be beaten, and then it
    # picks the same pairs as the table (tests compare the two). It places the aligned prefix position by
    # position; a run that skipped or lost one item is still one pass.
    pairs = [(i, i) for i in range(aligned)]
    j = aligned
    for i in range(aligned, len(pairs_of.expected)):
        found = pairs_of.first_from(i, j)
        if found >= 0:
            pairs.append((i, found))
            j = found + 1
    if len(pairs) == min(len(pairs_of.expected), len(pairs_of.actual)):
        return pairs
    return _lcs_pairs(pairs_of, aligned)


def _lcs_pairs(pairs_of: _Pairs, start: int) -> list[tuple[int, int]]:
    """The pairs of a longest common subsequence of what follows the aligned prefix ``start``.

    The prefix matched position by position is part of the pairs the full table would choose (an item
    satisfied at the front can always take the front), so only what follows it is matched here. The table
    ``length(i, j)`` (the LCS length of expected[i:] and actual[j:]) is kept one bit-vector row per expected
    item (the bit-parallel LCS recurrence of Allison and Dix, as Hyyrö writes it, over the reversed
    sequences), and walked from the front: an expected item takes an actual item when that keeps the length,
    else an actual item is skipped when that keeps it, else the expected item is. Tests compare the pairs
    with those of a plain full table.
    """
    n, m = len(pairs_of.expected), len(pairs_of.actual)
    cols = m - start
    everything = (1 << cols) - 1
    # masks[i]: the actual items expected ``start + i`` is satisfied by, actual ``start + c`` at bit cols-1-c
    masks = []
    for i in range(start, n):
        mask = 0
        for j in pairs_of.satisfying(i):
            if j >= start:
                mask |= 1 << (m - 1 - j)
        masks.append(mask)
    rows = n - start
    vectors = [everything] * (rows + 1)  # vectors[i] after the expected items from start + i on
    vector = everything
    for i in range(rows - 1, -1, -1):
        matched = vector & masks[i]
        vector = ((vector + matched) | (vector - matched)) & everything
        vectors[i] = vector

    # length(i, c), the LCS length of expected[start + i:] and actual[start + c:], is the number of zero bits
    # among the lowest cols - c of vectors[i]; the walk reads it for (i, c), (i + 1, c + 1) and (i, c + 1)
    pairs = [(k, k) for k in range(start)]
    i = c = 0
    while i < rows and c < cols:
        tail = cols - c
        low = (1 << tail) - 1
        row = vectors[i]
        here = tail - (row & low).bit_count()
        rest = low >> 1
        if masks[i] >> (tail - 1) & 1 and here == tail - (vectors[i + 1] & rest).bit_count():
            pairs.append((start + i, start + c))
            i += 1
            c += 1
        elif tail - 1 - (row & rest).bit_count() == here:
            c += 1
        else:
            i += 1
    return pairs


def _any_order_pairs(pairs_of: _Pairs, aligned: int) -> list[tuple[int, int]]:
    """Maximum bipartite matching (augmenting paths); expected items prefer the earliest free actual item.

    Taken in order, each item of the aligned prefix takes its own position (every earlier position is
    owned by an earlier item), so the prefix starts out matched.
    """
    owner: dict[int, int] = {j: j for j in range(aligned)}  # actual index -> expected index
    for i in range(aligned, len(pairs_of.expected)):
        # Cheap first try: a free candidate needs no search.
        free = -1
        for j in pairs_of.satisfying(i):
            if j not in owner:
                free = j
                break
        if free >= 0:
            owner[free] = i
        else:
            _augment(pairs_of, owner, i, set())
    return sorted((i, j) for j, i in owner.items())


def _augment(pairs_of: _Pairs, owner: dict[int, int], i: int, seen: set[int]) -> bool:
    """Find expected ``i`` an actual item, moving the items that own candidates along (an augmenting path)."""
    for j in pairs_of.satisfying(i):
        if j in seen:
            continue
        seen.add(j)
        holder = owner.get(j)
        if holder is None or _augment(pairs_of, owner, holder, seen):
            owner[j] = i
            return True
    return False
