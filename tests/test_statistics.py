"""tracegrade's pure-Python statistics against SciPy (a test-only reference) and hand calculations."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from scipy import stats

from tracegrade.evaluation.statistics import (
    cohens_kappa,
    holm_adjust,
    mcnemar_exact,
    min_mcnemar_p,
    paired_permutation_p,
    pass_at_k,
    pass_hat_k,
    percentile_bootstrap,
    spearman,
    wilson_interval,
)

SCORES = [0.2, 0.9, 0.4, 0.75, 1.0, 0.0, 0.55, 0.6, 0.3, 0.85, 0.95, 0.1, 0.5, 0.7, 0.65, 0.45, 0.8, 0.35, 0.9, 0.25]


@pytest.mark.parametrize(("k", "n"), [(0, 10), (3, 10), (10, 10), (47, 60), (1, 2)])
@pytest.mark.parametrize("confidence", [0.9, 0.95, 0.99])
def test_wilson_matches_scipy(k: int, n: int, confidence: float) -> None:
    ci = stats.binomtest(k, n).proportion_ci(confidence_level=confidence, method="wilson")
    low, high = wilson_interval(k, n, confidence)
    assert low == pytest.approx(ci.low, abs=1e-12)
    assert high == pytest.approx(ci.high, abs=1e-12)


def test_wilson_of_nothing_is_everything() -> None:
    assert wilson_interval(0, 0) == (0.0, 1.0)
    with pytest.raises(ValueError, match=r"within 0\.\.3"):
        wilson_interval(4, 3)


@pytest.mark.parametrize(("b", "c"), [(0, 0), (1, 0), (5, 0), (3, 7), (12, 4), (20, 20), (0, 9), (30, 11)])
def test_mcnemar_is_scipys_two_sided_binomial_test(b: int, c: int) -> None:
    expected = 1.0 if b + c == 0 else stats.binomtest(b, b + c, 0.5).pvalue
    assert mcnemar_exact(b, c) == pytest.approx(expected, rel=1e-12)
    assert mcnemar_exact(b, c) == mcnemar_exact(c, b)


def test_min_mcnemar_p_says_how_many_cases_a_verdict_needs() -> None:
    assert min_mcnemar_p(5) == pytest.approx(2 / 32)  # cannot reach 0.05
    assert min_mcnemar_p(6) == pytest.approx(2 / 64)  # can
    assert min_mcnemar_p(0) == 1.0


def test_bootstrap_interval_matches_scipys_percentile_bootstrap() -> None:
    ours = percentile_bootstrap(SCORES, confidence=0.95, resamples=20000, seed=3)
    ref = stats.bootstrap(
        (np.array(SCORES),), np.mean, method="percentile", n_resamples=20000, rng=np.random.default_rng(3)
    )
    assert ours.estimate == pytest.approx(float(np.mean(SCORES)))
    # Different generators: the bounds agree to Monte Carlo error, far tighter than the interval's width (~0.25).
    assert ours.low == pytest.approx(ref.confidence_interval.low, abs=0.01)
    assert ours.high == pytest.approx(ref.confidence_interval.high, abs=0.01)


def test_paired_bootstrap_of_the_mean_delta_matches_scipys_paired_bootstrap() -> None:
    rng = random.Random(11)
    a = [rng.random() for _ in range(30)]
    b = [min(1.0, max(0.0, x - 0.1 + rng.gauss(0, 0.15))) for x in a]
    ours = percentile_bootstrap([y - x for x, y in zip(a, b)], resamples=20000, seed=1)
    ref = stats.bootstrap(
        (np.array(a), np.array(b)),
        lambda x, y: np.mean(y - x),
        paired=True,
        method="percentile",
        n_resamples=20000,
        rng=np.random.default_rng(1),
    )
    assert ours.low == pytest.approx(ref.confidence_interval.low, abs=0.01)
    assert ours.high == pytest.approx(ref.confidence_interval.high, abs=0.01)
    assert ours.high < 0


def test_bootstrap_is_seeded_and_handles_constant_data() -> None:
    assert percentile_bootstrap(SCORES, seed=5) == percentile_bootstrap(SCORES, seed=5)
    assert percentile_bootstrap(SCORES, seed=5) != percentile_bootstrap(SCORES, seed=6)
    flat = percentile_bootstrap([0.0] * 8)
    assert (flat.low, flat.high) == (0.0, 0.0)
    with pytest.raises(ValueError, match="at least one"):
        percentile_bootstrap([])


def test_the_permutation_test_by_hand() -> None:
    assert paired_permutation_p([-0.1]) == 1.0  # one case can never be significant
    assert paired_permutation_p([-0.1, -0.2, -0.3, -0.4]) == pytest.approx(2 / 16)  # all four got worse
    assert paired_permutation_p([-0.5, 0.5]) == 1.0  # no change on balance
    assert paired_permutation_p([0.0, 0.0]) == paired_permutation_p([]) == 1.0
    # zero differences carry no sign: the same p-value as without them
    assert paired_permutation_p([-0.1] * 6 + [0.0] * 10) == pytest.approx(2 / 64)
    # 0.1 + 0.2 and 0.3 must count as the same sum though floats disagree in the last bit
    assert paired_permutation_p([0.1, 0.2, -0.3]) == pytest.approx(paired_permutation_p([1.0, 2.0, -3.0]))


@pytest.mark.parametrize("seed", range(6))
def test_the_exact_permutation_test_matches_scipys(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.randint(3, 14)
    shift = rng.choice([0.0, -0.05, -0.2])
    deltas = [round(rng.gauss(shift, 0.2), 2) for _ in range(n)]  # rounded: ties and equal magnitudes
    ref = stats.permutation_test(
        (np.array(deltas),), np.sum, permutation_type="samples", n_resamples=np.inf, alternative="two-sided"
    )
    assert paired_permutation_p(deltas) == pytest.approx(min(1.0, ref.pvalue), abs=1e-12)


def _exact_sign_flip_p(deltas: list[float]) -> float:
    """The two-sided p-value over every one of the 2**n sign assignments, counted in numpy (SciPy's exact test, which
    agrees on fewer values above, takes some 20 s at 21)."""
    sums = np.zeros(1)
    for delta in deltas:
        sums = np.concatenate([sums + delta, sums - delta])
    observed = abs(sum(deltas))
    return float(np.mean(np.abs(sums) >= observed * (1 - 1e-9)))


def test_the_sampled_permutation_test_past_the_exact_limit_is_close_and_seeded() -> None:
    rng = random.Random(4)
    deltas = [rng.gauss(-0.05, 0.2) for _ in range(21)]  # 21 > EXACT_SIGN_FLIPS: sampled
    exact = _exact_sign_flip_p(deltas)
    few = np.array(deltas[:12])  # the reference counts as SciPy's exact test does
    scipys = stats.permutation_test((few,), np.sum, permutation_type="samples", n_resamples=np.inf).pvalue
    assert _exact_sign_flip_p(deltas[:12]) == pytest.approx(scipys, abs=1e-12)
    sampled = paired_permutation_p(deltas, resamples=20000, seed=2)
    assert sampled == pytest.approx(exact, abs=0.01)
    assert paired_permutation_p(deltas, seed=2) == paired_permutation_p(deltas, seed=2)


def test_holm_by_hand() -> None:
    # sorted: 0.01*4=0.04, 0.02*3=0.06, 0.03*2=0.06 (monotone), 0.5*1=0.5
    assert holm_adjust([0.03, 0.5, 0.01, 0.02]) == pytest.approx([0.06, 0.5, 0.04, 0.06])
    assert holm_adjust([]) == []


def test_pass_at_k_and_pass_hat_k() -> None:
    assert pass_at_k(5, 0, 5) == 0.0 and pass_at_k(5, 1, 5) == 1.0
    assert pass_hat_k(5, 4, 5) == 0.0 and pass_hat_k(5, 5, 5) == 1.0
    assert pass_at_k(10, 3, 2) == pytest.approx(1 - math.comb(7, 2) / math.comb(10, 2))
    assert pass_hat_k(10, 3, 2) == pytest.approx(3 / 45)
    with pytest.raises(ValueError):
        pass_at_k(3, 4, 1)


def test_cohens_kappa_by_hand() -> None:
    # 10 items, raters agree on 8: p_o = 0.8; each rater says yes 6 times: p_e = .6*.6 + .4*.4 = 0.52
    a = ["y", "y", "y", "y", "y", "y", "n", "n", "n", "n"]
    b = ["y", "y", "y", "y", "y", "n", "n", "n", "n", "y"]
    assert cohens_kappa(a, b) == pytest.approx((0.8 - 0.52) / (1 - 0.52))
    assert cohens_kappa(a, a) == 1.0
    assert cohens_kappa(["x"] * 3, ["x"] * 3) == 1.0


def test_weighted_kappa_by_hand() -> None:
    # Ordinal 0/1/2. Linear weights |i-j|/2. Observed: (0,0) (1,1) (2,1) (2,2) -> disagreement .25 * .5
    a, b = [0, 1, 2, 2], [0, 1, 1, 2]
    rows, cols = [0.25, 0.25, 0.5], [0.25, 0.5, 0.25]
    w = [[abs(i - j) / 2 for j in range(3)] for i in range(3)]
    chance = sum(w[i][j] * rows[i] * cols[j] for i in range(3) for j in range(3))
    assert cohens_kappa(a, b, "linear") == pytest.approx(1 - 0.125 / chance)
    wq = [[(abs(i - j) / 2) ** 2 for j in range(3)] for i in range(3)]
    chance_q = sum(wq[i][j] * rows[i] * cols[j] for i in range(3) for j in range(3))
    assert cohens_kappa(a, b, "quadratic") == pytest.approx(1 - 0.0625 / chance_q)
    with pytest.raises(ValueError, match="same items"):
        cohens_kappa([1], [1, 2])


def test_spearman_matches_scipy_with_ties() -> None:
    x = [1, 2, 2, 3, 5, 5, 5, 8, 9, 10]
    y = [0.1, 0.4, 0.3, 0.3, 0.9, 0.6, 0.7, 0.8, 0.8, 1.0]
    assert spearman(x, y) == pytest.approx(stats.spearmanr(x, y).statistic, rel=1e-12)
    assert math.isnan(spearman([1, 1, 1], [1, 2, 3]))
