"""The bootstrap and the sampled permutation test drawn in pyarrow: right at 100,000 distinct values, seeded,
bounded, and without NumPy.

The bootstrap of values that are nearly all distinct (a continuous criterion's deltas) drew each resample value by
value with ``random.choices``: 20 CPU s of ``tracegrade gate`` on two runs of 100,000 cases. Each check below is
against a reference computed another way: the normal law of the mean, or every resample enumerated.
"""

from __future__ import annotations

import json
import math
import os
import random
import subprocess
import sys
from collections import Counter
from fractions import Fraction
from itertools import product
from statistics import NormalDist

import pytest

from tests.support.python_lines import python_lines
from tracegrade.errors import InvalidValueError
from tracegrade.evaluation.statistics import paired_permutation_p, percentile_bootstrap


def test_the_interval_of_100000_distinct_values_is_the_normal_interval_of_their_mean() -> None:
    rng = random.Random(5)
    values = [rng.expovariate(1.0) for _ in range(100_000)]  # skewed, and every value distinct: drawn by index
    n = len(values)
    mean = math.fsum(values) / n
    sd_of_mean = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / n) / math.sqrt(n)
    ours = percentile_bootstrap(values, confidence=0.95, resamples=2000, seed=9)
    # A resample's mean has exactly this mean and standard deviation, and at 100,000 values it is normal to within
    # skew / (6 sqrt(n)) * (z^2 - 1) = 0.003 sd. Estimated from 2,000 resamples, a 2.5% point has a standard error of
    # sqrt(q (1 - q) / 2000) / phi(z) = 0.06 sd: 0.3 sd is five of them. Resamples of half the size (an interval
    # sqrt(2) as wide) would miss by 0.8 sd.
    z = NormalDist().inv_cdf(0.975)
    assert ours.estimate == mean
    assert abs(ours.low - (mean - z * sd_of_mean)) < 0.3 * sd_of_mean, (ours, mean, sd_of_mean)
    assert abs(ours.high - (mean + z * sd_of_mean)) < 0.3 * sd_of_mean, (ours, mean, sd_of_mean)


_PEAK = """
import random
import pyarrow as pa
from tracegrade.evaluation.statistics import percentile_bootstrap
rng = random.Random(5)
percentile_bootstrap([rng.expovariate(1.0) for _ in range(100_000)], resamples=200, seed=9)
print(pa.default_memory_pool().max_memory())
"""


def test_the_bootstrap_of_100000_distinct_values_holds_a_few_resamples_at_a_time() -> None:
    # pyarrow's memory is its own pool's, not Python's: its peak read in a process of its own. All 200 resamples
    # drawn at once would hold 160 MB of random numbers, 80 MB of indices and 160 MB of picks.
    peak = subprocess.run([sys.executable, "-c", _PEAK], capture_output=True, text=True, check=True).stdout
    assert int(peak) < 20_000_000, peak


def _exact_resample_mean_quantile(tenths: list[int], q: float) -> float:
    """The ``q`` quantile (the smallest mean whose chance of not being exceeded reaches ``q``) of the mean of a
    resample of ``tenths / 10``, over all n**n equally likely resamples, summed in whole tenths."""
    n = len(tenths)
    sums = Counter(sum(resample) for resample in product(tenths, repeat=n))
    reached = 0
    for total in sorted(sums):
        reached += sums[total]
        if reached >= q * n**n:
            return total / 10 / n
    raise AssertionError("the chances do not add up to 1")


@pytest.mark.parametrize("confidence", [0.5, 0.9, 0.95])
def test_the_interval_of_six_values_matches_every_resample_enumerated(confidence: float) -> None:
    tenths = [1, 4, 5, 9, 17, 30]  # distinct: drawn by index; 6**6 = 46,656 resamples enumerated
    resamples = 20_000
    ours = percentile_bootstrap([t / 10 for t in tenths], confidence=confidence, resamples=resamples, seed=2)
    # By the Dvoretzky-Kiefer-Wolfowitz inequality the resamples' cumulative shares are within 0.02 of the exact
    # ones everywhere but with a chance of 2 exp(-2 * 20,000 * 0.02^2) = 2e-7; each bound interpolates between two
    # neighbouring order statistics, 1/20,000 apart in share: the bound lies between the exact quantiles that far
    # either side of its own.
    slack = 0.02 + 2 / resamples
    for bound, q in ((ours.low, (1 - confidence) / 2), (ours.high, (1 + confidence) / 2)):
        below = _exact_resample_mean_quantile(tenths, q - slack)
        above = _exact_resample_mean_quantile(tenths, q + slack)
        assert below - 1e-12 <= bound <= above + 1e-12, (q, below, bound, above)


def test_100003_distinct_differences_give_the_normal_p_value_of_the_sign_flip_test() -> None:
    rng = random.Random(10)
    deltas = [rng.gauss(0.0, 0.3) for _ in range(100_003)]  # distinct: a random bit each; not a multiple of 8
    # Under sign flips the sum has mean 0 and variance sum(d^2) exactly, and is normal to within the Berry-Esseen
    # bound 0.56 * sum|d|^3 / sum(d^2)^1.5 = 0.003 here. From 2,000 resamples the p-value's standard error is at
    # most sqrt(0.25 / 2000) = 0.011: 0.04 leaves three and a half of them besides.
    spread = math.sqrt(math.fsum(d * d for d in deltas))
    expected = 2 * (1 - NormalDist().cdf(abs(math.fsum(deltas)) / spread))
    assert 0.1 < expected < 0.5  # neither end of the scale
    assert abs(paired_permutation_p(deltas, resamples=2000, seed=6) - expected) < 0.04, expected


def _distinct(count: int) -> list[float]:
    return [((i * 7919) % 10007) / 10007 - 0.45 for i in range(count)]


def test_the_bootstrap_of_distinct_values_does_no_python_work_per_case_and_resample() -> None:
    """Counted, not timed: 20 resamples of 3,000 distinct values run as many Python lines as of 48 (value by value,
    ``random.choices`` ran a line per value drawn: 20 * 2,952 more)."""
    small = python_lines(lambda: percentile_bootstrap(_distinct(48), resamples=20, seed=1))
    large = python_lines(lambda: percentile_bootstrap(_distinct(3000), resamples=20, seed=1))
    assert large - small < 20 * (3000 - 48) // 4, (small, large)


_ANSWERS = """
import json, sys
from tracegrade.evaluation.statistics import paired_permutation_p, percentile_bootstrap
values = json.load(sys.stdin)
answers = percentile_bootstrap(values, resamples=2001, seed=3), paired_permutation_p(values, resamples=2001, seed=3)
print(repr(answers))
"""


def _values(kind: str) -> list[float]:
    rng = random.Random(15)
    if kind == "distinct":
        return [rng.gauss(0, 1) for _ in range(5000)]
    return [rng.randint(-10, 10) / 10 for _ in range(5000)]  # tenths: drawn as counts of each value


@pytest.mark.parametrize("kind", ["distinct", "tenths"])
def test_the_same_seed_gives_the_same_answers_in_any_process(kind: str) -> None:
    values = _values(kind)
    # 2,001 resamples: the last chunk of draws is a short one
    answers = (
        percentile_bootstrap(values, resamples=2001, seed=3),
        paired_permutation_p(values, resamples=2001, seed=3),
    )
    assert 0.1 < answers[1] < 0.9  # mid-scale: another seed's p-value differs
    random.seed(1)  # the module's generator plays no part
    again = (percentile_bootstrap(values, resamples=2001, seed=3), paired_permutation_p(values, resamples=2001, seed=3))
    assert again == answers
    assert percentile_bootstrap(values, resamples=2001, seed=4) != answers[0]
    assert paired_permutation_p(values, resamples=2001, seed=4) != answers[1]
    elsewhere = subprocess.run(
        [sys.executable, "-c", _ANSWERS],
        input=json.dumps(values),  # floats round-trip exactly
        env={**os.environ, "PYTHONHASHSEED": "123"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert elsewhere.stdout.strip() == repr(answers)


def test_a_negative_seed_or_no_resamples_is_refused_saying_so() -> None:
    values = _distinct(100)
    with pytest.raises(InvalidValueError, match=r"seed must be a whole number from 0 up, got -1"):
        percentile_bootstrap(values, seed=-1)
    with pytest.raises(InvalidValueError, match=r"seed must be a whole number from 0 up, got -1"):
        paired_permutation_p(values, seed=-1)
    with pytest.raises(InvalidValueError, match=r"the bootstrap needs at least 1 resample, got 0"):
        percentile_bootstrap(values, resamples=0)
    with pytest.raises(InvalidValueError, match=r"the permutation test needs at least 1 resample, got 0"):
        paired_permutation_p(values, resamples=0)


_WITHOUT_NUMPY = """
import json, sys
from importlib.abc import MetaPathFinder


class NoNumpy(MetaPathFinder):  # as if NumPy were not installed: pyarrow does without it
    def find_spec(self, name, path=None, target=None):
        if name == "numpy" or name.startswith("numpy."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, NoNumpy())
from tracegrade.evaluation.statistics import paired_permutation_p, percentile_bootstrap
values = json.load(sys.stdin)
answers = percentile_bootstrap(values, resamples=2001, seed=3), paired_permutation_p(values, resamples=2001, seed=3)
print(repr(answers))
"""


@pytest.mark.parametrize("kind", ["distinct", "tenths"])
def test_the_resampling_gives_the_same_answers_where_numpy_is_not_installed(kind: str) -> None:
    """NumPy is no dependency: with it installed pyarrow imports it, and every command starts 0.2 CPU s later."""
    values = _values(kind)
    answers = (
        percentile_bootstrap(values, resamples=2001, seed=3),
        paired_permutation_p(values, resamples=2001, seed=3),
    )
    without = subprocess.run(
        [sys.executable, "-c", _WITHOUT_NUMPY], input=json.dumps(values), capture_output=True, text=True, check=True
    )
    assert without.stdout.strip() == repr(answers)


def test_fractions_resample_as_the_floats_they_round_to() -> None:
    """pyarrow converts no Fraction or Decimal to a double by itself; the pure-Python resampling took any number."""
    exact = [Fraction(i * 7919 % 101, 37) - 1 for i in range(300)]  # distinct enough to be picked by index
    rounded = [float(f) for f in exact]
    assert percentile_bootstrap(exact, seed=4) == percentile_bootstrap(rounded, seed=4)
    assert paired_permutation_p(exact, seed=4) == paired_permutation_p(rounded, seed=4)
