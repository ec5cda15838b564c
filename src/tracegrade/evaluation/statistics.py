"""The statistics behind tracegrade's intervals and verdicts, in Python and pyarrow's compute functions (no NumPy).

Everything here is deterministic: the bootstrap and the sampled permutation test draw from ``random.Random(seed)``
and, for the bootstrap's picks by index, from pyarrow's ``random`` function seeded by it, so the same inputs always
give the same answer with the same pyarrow release. pyarrow documents only that an integer seeds that function (Arrow's
source draws from a PCG64 generator, each number a draw's top 53 bits over 2**53): no release promises the same
numbers as the one before. pyarrow is imported on the first draw only: the trial statistics and ``import
tracegrade`` do without it. Intervals are two-sided at ``confidence``; p-values are two-sided.
"""

from __future__ import annotations

import bisect
import math
import random
from collections import Counter
from collections.abc import Hashable, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import accumulate
from statistics import NormalDist
from typing import TYPE_CHECKING

from tracegrade.errors import InvalidValueError

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "BootstrapResult",
    "cohens_kappa",
    "holm_adjust",
    "mcnemar_exact",
    "min_mcnemar_p",
    "paired_permutation_p",
    "pass_at_k",
    "pass_hat_k",
    "percentile_bootstrap",
    "spearman",
    "wilson_interval",
]


def wilson_interval(successes: float, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval of a proportion ``successes / n`` (``(0, 1)`` when ``n`` is 0).

    Preferred over the normal approximation because it stays inside [0, 1] and behaves at 0/n and n/n.
    ``successes`` may be a sum of scores in [0, 1]: a bounded score's variance is at most ``m(1 - m)`` for
    its mean ``m``, so the interval is then a conservative one for the mean score.
    """
    if n <= 0:
        return 0.0, 1.0
    if not 0 <= successes <= n:
        raise ValueError(f"successes must be within 0..{n}, got {successes}")
    z = _z(confidence)
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    # At 0/n and n/n the bound is exactly 0 or 1; rounding must not leave it a hair off.
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return low, high


@dataclass(frozen=True)
class BootstrapResult:
    """A statistic (the mean) and its percentile interval."""

    estimate: float
    low: float
    high: float


def percentile_bootstrap(
    values: Sequence[float], confidence: float = 0.95, resamples: int = 2000, seed: int = 0
) -> BootstrapResult:
    """The mean of ``values`` with a percentile-bootstrap interval.

    Given the per-case differences of two paired runs, this is the paired bootstrap of the mean delta:
    resampling whole cases keeps each case's two scores together. An interval, not a test: with a few cases
    every resample can fall on one side of 0 (see :func:`paired_permutation_p` for the test).
    """
    n = len(values)
    if n == 0:
        raise ValueError("the bootstrap needs at least one value")
    _check_finite(values, "the bootstrap")
    _check_resamples(resamples, "the bootstrap")
    estimate = math.fsum(values) / n
    if all(v == values[0] for v in values):
        return BootstrapResult(estimate, estimate, estimate)
    rng = _seeded(seed)
    counts = Counter(values)
    if len(counts) * _PICKS_PER_BINOMIAL <= n:
        # Few distinct values (pass/fail deltas take three): a resample is how many times it drew each value, a
        # multinomial draw made of one binomial draw per value, in time that grows as sqrt(n), not n.
        groups = [(value, count / n) for value, count in counts.items()]
        sums = [_multinomial_sum(groups, n, rng) for _ in range(resamples)]
    else:
        sums = _sums_of_picks(values, resamples, rng)
    means = sorted(total / n for total in sums)
    alpha = 1 - confidence
    return BootstrapResult(estimate, _quantile(means, alpha / 2), _quantile(means, 1 - alpha / 2))


#: the bootstrap draws a resample as counts of its distinct values when there are at least this many values per
#: distinct one: a binomial draw in Python costs about as much as this many picks by index in pyarrow (2,000
#: resamples of 30,000 scores in tenths, 0.26 s either way; of 3,000 pass/fail differences, 0.018 s as counts
#: and 0.031 s by index; of 1,000 scores in tenths, 0.073 s and 0.017 s)
_PICKS_PER_BINOMIAL = 1000

#: the permutation test draws a resample as counts of its distinct differences when there are at least this many
#: differences per distinct one (one binomial draw per distinct difference, by bisection in a table made once)
_VALUES_PER_GROUP = 16

#: draws (resamples x values drawn in each) made at a time: memory stays bounded whatever the cases (all 2,000
#: resamples of 100,000 cases at once would take 1.6 GB of random numbers), and a chunk stays in the CPU's cache
_DRAWS_PER_CHUNK = 2**16


def _seeded(seed: int) -> random.Random:
    """The generator every resampling here starts from (``random.Random`` takes a negative seed's absolute value:
    refused, so that two seeds never give the same draws)."""
    if seed < 0:
        raise InvalidValueError(f"the resampling seed must be a whole number from 0 up, got {seed}")
    return random.Random(seed)


def _check_resamples(resamples: int, what: str) -> None:
    if resamples < 1:
        raise InvalidValueError(f"{what} needs at least 1 resample, got {resamples}: pass resamples=2000 or so")


def _chunks(resamples: int, width: int) -> Iterator[int]:
    """How many resamples of ``width`` draws each to make at a time: as many as :data:`_DRAWS_PER_CHUNK` allows, at
    least one, ``resamples`` in all."""
    rows = max(1, _DRAWS_PER_CHUNK // width)
    for start in range(0, resamples, rows):
        yield min(rows, resamples - start)


def _sums_of_picks(values: Sequence[float], resamples: int, rng: random.Random) -> list[float]:
    """The sums of ``resamples`` resamples of ``values``, each ``len(values)`` picks by index with replacement, drawn,
    gathered and summed in pyarrow's C (picked one by one in Python, 2,000 resamples of 100,000 cases took 20 s)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = len(values)
    column = _float_column(values)
    index_type = pa.int32() if n < 2**31 else pa.int64()  # 32-bit indices gather faster
    sums: list[float] = []
    for rows in _chunks(resamples, n):
        # u * n truncated is an index below n: u is at most 1 - 2**-53, and u * n, at least half a unit in the last
        # place below n, rounds below it (`take` would refuse an index out of bounds). Each chunk gets a seed of its
        # own from `rng`: pyarrow's seeded draws start afresh at each call.
        uniform = pc.random(rows * n, initializer=rng.getrandbits(63))
        picks = pc.take(column, pc.cast(pc.multiply(uniform, float(n)), index_type, safe=False))
        # a sum per resample (pairwise, so within a few units in the last place): a running sum over the chunk
        # differenced at the resamples' ends would carry the rounding of every sum before
        sums.extend(pc.sum(picks.slice(row * n, n)).as_py() for row in range(rows))
    return sums


def _float_column(values: Sequence[float]) -> pa.DoubleArray:
    """``values`` as an Arrow column of doubles (each through ``float``: pyarrow takes no Fraction or Decimal)."""
    import pyarrow as pa

    return pa.array([float(v) for v in values], pa.float64())


def _multinomial_sum(groups: list[tuple[float, float]], n: int, rng: random.Random) -> float:
    """The sum of ``n`` values drawn with replacement, each ``value`` with probability ``share`` (``groups``): the
    multinomial counts as conditional binomials (a value's count among the draws the earlier values left)."""
    total, left, share_left = 0.0, n, 1.0
    for value, share in groups[:-1]:
        drawn = _binomial(left, min(1.0, share / share_left), rng) if left else 0
        total += value * drawn
        left -= drawn
        share_left -= share
    return total + groups[-1][0] * left


def _binomial(trials: int, p: float, rng: random.Random) -> int:
    """An exact Binomial(trials, p) draw by inversion, the outcomes taken from the mode outwards (mode, mode + 1,
    mode - 1, ...): about as many steps as the standard deviation (``random.binomialvariate`` needs Python 3.12)."""
    if p <= 0.0:
        return 0
    if p >= 1.0:
        return trials
    q = 1.0 - p
    mode = min(trials, int((trials + 1) * p))
    log_mode = (
        math.lgamma(trials + 1)
        - math.lgamma(mode + 1)
        - math.lgamma(trials - mode + 1)
        + mode * math.log(p)
        + (trials - mode) * math.log(q)
    )
    above = below = math.exp(log_mode)
    u = rng.random() - above
    if u < 0:
        return mode
    high = low = mode
    while high < trials or low > 0:
        if high < trials:  # P(high + 1) from P(high)
            above *= (trials - high) / (high + 1) * p / q
            high += 1
            u -= above
            if u < 0:
                return high
        if low > 0:  # P(low - 1) from P(low)
            below *= low / (trials - low + 1) * q / p
            low -= 1
            u -= below
            if u < 0:
                return low
    return mode  # every outcome taken: u was within rounding of 1


#: up to this many non-zero differences the permutation test counts every sign assignment (2**20, by halves)
EXACT_SIGN_FLIPS = 20


def paired_permutation_p(deltas: Sequence[float], resamples: int = 2000, seed: int = 0) -> float:
    """Two-sided p-value of the paired sign-flip (randomisation) test that the mean of ``deltas`` is 0.

    If the two runs do not differ, each case's two scores are exchangeable, so each difference is as likely
    to have either sign. The p-value is the share of the 2**n sign assignments of the n non-zero differences
    whose sum is at least as far from 0 as the observed one: counted exactly up to
    :data:`EXACT_SIGN_FLIPS` differences, else estimated from ``resamples`` random assignments as
    ``(hits + 1) / (resamples + 1)``. It is never below ``2 / 2**n``: four cases that all got worse give
    0.125 and one gives 1.0, where a bootstrap would call either significant.
    """
    _check_finite(deltas, "the permutation test")
    _check_resamples(resamples, "the permutation test")
    nonzero = [d for d in deltas if d != 0]
    n = len(nonzero)
    observed = abs(math.fsum(nonzero))
    # sums of the same magnitudes in another order may differ in the last bits: those count as equal
    tolerance = 1e-9 * max(1.0, math.fsum(abs(d) for d in nonzero))
    if n == 0 or observed <= tolerance:
        return 1.0
    if n <= EXACT_SIGN_FLIPS:
        return _sign_flips_at_least(nonzero, observed - tolerance) / 2**n
    rng = _seeded(seed)
    counts = Counter(nonzero)
    if len(counts) * _VALUES_PER_GROUP <= n:
        # Few distinct differences (scores on a scale of tenths take at most 20): how many copies of a value keep
        # their sign is one Binomial(copies, 1/2) draw, so a resample costs the same for 100 cases or 100,000
        # (drawing a sign per difference took half a minute per graded criterion at 100,000 cases).
        groups = [(value, copies, _half_binomial_cdf(copies)) for value, copies in counts.items()]
        pick = rng.random
        totals = [
            math.fsum(
                value * (2 * (start + bisect.bisect_right(cdf, pick() * cdf[-1])) - copies)
                for value, copies, (start, cdf) in groups
            )
            for _ in range(resamples)
        ]
    else:
        # The signed sum is twice the sum of the differences that keep their sign minus the plain sum.
        everything = math.fsum(nonzero)
        totals = [2 * kept - everything for kept in _sums_of_halves(nonzero, resamples, rng)]
    hits = sum(abs(total) >= observed - tolerance for total in totals)
    return (hits + 1) / (resamples + 1)


def _sums_of_halves(values: list[float], resamples: int, rng: random.Random) -> list[float]:
    """For each of ``resamples`` resamples, the sum of the ``values`` a random bit each keeps, in pyarrow's C.

    The bits of ``rng.getrandbits`` (a chunk's worth at once) are, as little-endian bytes, an Arrow boolean array
    as they stand: bit i of the number is element i. Picked and summed in Python, 2,000 resamples of 100,000
    differences took 3 s.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    n = len(values)
    column = _float_column(values)
    sums: list[float] = []
    for rows in _chunks(resamples, n):
        bits = rng.getrandbits(rows * n).to_bytes((rows * n + 7) // 8, "little")
        keep = pa.Array.from_buffers(pa.bool_(), rows * n, [None, pa.py_buffer(bits)])
        for row in range(rows):
            # min_count=0: the sum of no value kept is 0, not null
            sums.append(pc.sum(pc.filter(column, keep.slice(row * n, n)), min_count=0).as_py())
    return sums


def _half_binomial_cdf(trials: int) -> tuple[int, list[float]]:
    """``(start, cdf)``: the cumulative chances of Binomial(trials, 1/2) from ``start`` on, over the outcomes within
    20 standard deviations of the mean (the rest have chances below 1e-80). The outcome of a uniform draw ``u`` is
    ``start + bisect_right(cdf, u * cdf[-1])``: inversion, its search done in C."""
    mode = trials // 2
    reach = int(10 * math.sqrt(trials)) + 10  # 20 standard deviations of sqrt(trials) / 2
    start, stop = max(0, mode - reach), min(trials, mode + reach)
    log_all = math.lgamma(trials + 1) - trials * math.log(2)
    chances = (math.exp(log_all - math.lgamma(k + 1) - math.lgamma(trials - k + 1)) for k in range(start, stop + 1))
    return start, list(accumulate(chances))


def _sign_flips_at_least(values: list[float], bound: float) -> int:
    """How many of the 2**len(values) signed sums of ``values`` have an absolute value of at least ``bound``
    (> 0): every sum of the first half paired with every sum of the second, counted by bisection."""
    half = len(values) // 2
    first, second = _signed_sums(values[:half]), sorted(_signed_sums(values[half:]))
    count = 0
    for a in first:
        count += len(second) - bisect.bisect_left(second, bound - a)  # a + b >= bound
        count += bisect.bisect_right(second, -bound - a)  # a + b <= -bound
    return count


def _signed_sums(values: list[float]) -> list[float]:
    sums = [0.0]
    for value in values:
        sums = [s + value for s in sums] + [s - value for s in sums]
    return sums


def mcnemar_exact(pass_to_fail: int, fail_to_pass: int) -> float:
    """Exact McNemar test: the two-sided binomial p-value of the discordant pairs under p = 1/2.

    Only the cases whose verdict changed between two paired runs carry information; with none, 1.0.
    """
    n = pass_to_fail + fail_to_pass
    if n == 0:
        return 1.0
    # C(n, i) from C(n, i - 1), exactly (the division leaves no remainder): computing each term afresh made
    # the tail quadratic in the flips (tens of seconds for 30,000 flipped cases)
    term = tail = 1
    for i in range(1, min(pass_to_fail, fail_to_pass) + 1):
        term = term * (n - i + 1) // i
        tail += term
    return min(1.0, 2 * tail / 2**n)


def min_mcnemar_p(pairs: int) -> float:
    """The smallest p-value :func:`mcnemar_exact` can give over ``pairs`` paired cases (every one flipping
    the same way): below ``alpha`` only with enough cases."""
    return mcnemar_exact(pairs, 0) if pairs > 0 else 1.0


def holm_adjust(p_values: Sequence[float]) -> list[float]:
    """Holm–Bonferroni adjusted p-values (same order as given): controls the chance of any false
    verdict across a family of tests, under any dependence between them."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    adjusted = [1.0] * len(p_values)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


def pass_at_k(n: int, c: int, k: int) -> float:
    """The chance that at least one of ``k`` trials drawn from ``n`` (``c`` of them passing) passes
    (the unbiased estimator of Chen et al.; with ``k == n`` it is 1 when any trial passed)."""
    _check_trials(n, c, k)
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """pass^k: the chance that all of ``k`` trials drawn from ``n`` (``c`` passing) pass (with ``k == n``,
    1 only when every trial passed)."""
    _check_trials(n, c, k)
    return math.comb(c, k) / math.comb(n, k)


def cohens_kappa(
    a: Sequence[Hashable], b: Sequence[Hashable], weights: str | None = None, labels: Sequence[Hashable] = ()
) -> float:
    """Cohen's kappa between two raters' labels, item by item.

    ``weights`` None treats labels as categories; ``"linear"`` or ``"quadratic"`` weighs disagreements by
    distance, for ordinal labels (numbers, or labels whose sorted order is their order). ``labels`` fixes
    the ordered scale (as scikit-learn's ``labels``), so a level neither rater used still counts in the
    distances; by default the scale is the labels used. 1.0 when both raters use one and the same label
    throughout (nothing to disagree on).
    """
    if len(a) != len(b):
        raise ValueError(f"both raters must label the same items: {len(a)} labels against {len(b)}")
    if not a:
        raise ValueError("kappa needs at least one labelled item")
    labels = list(labels) or sorted(set(a) | set(b))  # type: ignore[type-var]
    unknown = (set(a) | set(b)) - set(labels)
    if unknown:
        raise ValueError(f"labels {sorted(map(str, unknown))} are not on the given scale {list(labels)}")
    index = {label: i for i, label in enumerate(labels)}
    k, n = len(labels), len(a)
    if k == 1:
        return 1.0
    observed = [[0.0] * k for _ in range(k)]
    for x, y in zip(a, b):
        observed[index[x]][index[y]] += 1 / n
    rows = [sum(r) for r in observed]
    cols = [sum(observed[i][j] for i in range(k)) for j in range(k)]

    def weight(i: int, j: int) -> float:
        if weights is None:
            return 0.0 if i == j else 1.0
        distance = abs(i - j) / (k - 1)
        if weights == "linear":
            return distance
        if weights == "quadratic":
            return distance * distance
        raise ValueError(f"weights must be None, 'linear' or 'quadratic', got {weights!r}")

    disagreement = sum(weight(i, j) * observed[i][j] for i in range(k) for j in range(k))
    chance = sum(weight(i, j) * rows[i] * cols[j] for i in range(k) for j in range(k))
    return 1.0 if chance == 0 else 1.0 - disagreement / chance


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman's rank correlation (ties get their average rank); NaN when either side is constant."""
    if len(x) != len(y):
        raise ValueError(f"spearman needs paired values: {len(x)} against {len(y)}")
    rx, ry = _ranks(x), _ranks(y)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    sxy = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    sxx = sum((a - mx) ** 2 for a in rx)
    syy = sum((b - my) ** 2 for b in ry)
    return sxy / math.sqrt(sxx * syy) if sxx and syy else math.nan


def _ranks(values: Sequence[float]) -> list[float]:
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        for i in order[start : end + 1]:
            ranks[i] = (start + end) / 2 + 1
        start = end + 1
    return ranks


@lru_cache(maxsize=16)
def _z(confidence: float) -> float:
    """The two-sided normal quantile of ``confidence`` (cached: trial statistics ask for it per criterion)."""
    return NormalDist().inv_cdf(0.5 + confidence / 2)


def _check_trials(n: int, c: int, k: int) -> None:
    if not (0 <= c <= n and 1 <= k <= n):
        raise ValueError(f"need 0 <= passing ({c}) <= trials ({n}) and 1 <= k ({k}) <= trials")


def _check_finite(values: Sequence[float], what: str) -> None:
    """NaN or an infinity would make the statistic NaN and every comparison with it false (a NaN difference
    once gave the permutation test a p-value of 2.0): refuse it, saying where it is."""
    if all(map(math.isfinite, values)):  # in C: the check adds no Python step per value
        return
    bad = next(i for i, v in enumerate(values) if not math.isfinite(v))
    raise ValueError(f"{what} needs finite numbers: value {bad} of {len(values)} is {values[bad]}")


def _quantile(ordered: Sequence[float], q: float) -> float:
    """Linear interpolation between order statistics (NumPy's default method)."""
    position = q * (len(ordered) - 1)
    below = math.floor(position)
    above = min(below + 1, len(ordered) - 1)
    return ordered[below] + (ordered[above] - ordered[below]) * (position - below)
