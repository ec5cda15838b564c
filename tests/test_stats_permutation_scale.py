"""The sampled sign-flip permutation test at scale: right p-values and per-resample work done in C.

The test used to pick each difference's sign with ``signs >> i & 1`` on one n-bit random number: a shift of
an n-bit number per difference, so each resample cost time quadratic in n (half a second per resample at
100,000 cases: over fifteen minutes for one graded criterion of ``tracegrade gate``).
"""

from __future__ import annotations

import pytest

from tests.support.python_lines import python_lines
from tracegrade.evaluation.statistics import EXACT_SIGN_FLIPS, paired_permutation_p


def test_25_unit_differences_match_the_exact_binomial_p_value() -> None:
    # 15 cases +1 and 10 cases -1: the signed sums are 2B - 25 with B ~ Binomial(25, 1/2), so the exact
    # two-sided p is P(B >= 15) + P(B <= 10) = 0.42435622... (scipy.stats.binom)
    deltas = [1.0] * 15 + [-1.0] * 10
    assert len(deltas) > EXACT_SIGN_FLIPS  # the sampled path
    assert paired_permutation_p(deltas, resamples=20000, seed=3) == pytest.approx(0.42435622, abs=0.015)


def test_100000_differences_give_the_binomial_p_value() -> None:
    # 50,300 cases +1, 49,700 cases -1: exact p = 2 * P(B >= 50300), B ~ Binomial(100000, 1/2), = 0.0581974
    deltas = [1.0, -1.0] * 49_700 + [1.0] * 600
    assert paired_permutation_p(deltas, resamples=400, seed=0) == pytest.approx(0.0581974, abs=0.04)


def test_python_level_work_per_resample_does_not_grow_with_the_cases() -> None:
    """Counted, not timed: the Python lines run while sampling 20 sign assignments of 30 and of 3,000
    differences are the same in number (the old generator ran a line per difference and resample)."""

    def lines_run(count: int) -> int:
        deltas = [0.5 if i % 3 else -0.25 for i in range(count)]
        return python_lines(lambda: paired_permutation_p(deltas, resamples=20, seed=1))

    small, large = lines_run(30), lines_run(3000)
    # a few comprehensions over the differences run once (two lines each per difference); the old code ran one
    # more per difference and resample: 20 * 2,970 = 59,400
    assert large - small <= 4 * (3000 - 30), (small, large)
