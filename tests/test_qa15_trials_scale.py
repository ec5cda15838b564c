"""Comparing runs of very many cases: the paired bootstrap in time that does not grow with the cases when the
differences take few values, and a gate summary that stays within what GitHub accepts.

The bootstrap drew every resample value by value (``random.choices``): about 40 s per metric for 100,000 cases,
over a minute and a half for ``tracegrade gate`` on two pass/fail criteria. The Markdown summary listed every
flipped case: 49,000 rows (2.9 MB) for 100,000 cases, where GitHub refuses a step summary over 1 MiB.
"""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

from tests.support.grading_cli import run_cli
from tests.support.python_lines import python_lines
from tracegrade.evaluation.compare import MARKDOWN_FLIPS, compare_runs
from tracegrade.evaluation.statistics import paired_permutation_p, percentile_bootstrap
from tracegrade.models.results import CriterionResult, EvalCaseResult, EvalReport


def test_the_bootstrap_of_pass_fail_deltas_does_no_python_work_per_case_and_resample() -> None:
    """Counted, not timed: 20 resamples of 3,000 deltas in {-1, 0, 1} run about as many Python lines as of 30 (the
    binomial draws take a few more steps, as the square root of the cases); value by value was 20 * 2,970 more."""

    def deltas(count: int) -> list[float]:
        return [(-1.0, 0.0, 0.0, 1.0)[i % 4] for i in range(count)]

    small = python_lines(lambda: percentile_bootstrap(deltas(48), resamples=20, seed=1))
    large = python_lines(lambda: percentile_bootstrap(deltas(3000), resamples=20, seed=1))
    assert large - small < 20 * (3000 - 48) // 4, (small, large)


def _exact_mean_quantile(values: list[int], n: int, q: Fraction) -> Fraction:
    """The ``q`` quantile (the smallest mean whose cumulative chance reaches ``q``) of the mean of ``n`` draws with
    replacement from ``values``: the exact distribution of their sum, by convolving one draw's ``n`` times."""
    one = {v: Fraction(values.count(v), len(values)) for v in set(values)}
    sums = {0: Fraction(1)}
    for _ in range(n):
        grown: dict[int, Fraction] = {}
        for total, chance in sums.items():
            for v, p in one.items():
                grown[total + v] = grown.get(total + v, Fraction(0)) + chance * p
        sums = grown
    reached = Fraction(0)
    for total in sorted(sums):
        reached += sums[total]
        if reached >= q:
            return Fraction(total, n)
    raise AssertionError("the chances do not add up to 1")


def test_the_bootstrap_of_few_distinct_values_matches_the_exact_resampling_distribution() -> None:
    # 64 cases: 8 got worse by 1, 40 unchanged, 16 better by 1 (few distinct values: drawn as counts). The exact
    # distribution of a resample's mean comes from convolving the 64 draws; its 2.5% and 97.5% points are what
    # the percentile interval estimates (20,000 resamples: within one step of 1/64 of them).
    values = [-1] * 8 + [0] * 40 + [1] * 16
    ours = percentile_bootstrap([float(v) for v in values], confidence=0.95, resamples=20000, seed=11)
    low = _exact_mean_quantile(values, len(values), Fraction(25, 1000))
    high = _exact_mean_quantile(values, len(values), Fraction(975, 1000))
    step = 1 / len(values)
    assert ours.estimate == 8 / 64
    assert abs(ours.low - float(low)) <= step and abs(ours.high - float(high)) <= step, (ours, low, high)
    # a different method's answer: the normal approximation, mean 1/8 and sd sqrt(var / n), var = 3/8 - 1/64
    sd = ((24 / 64 - (8 / 64) ** 2) / 64) ** 0.5
    assert abs(ours.low - (0.125 - 1.96 * sd)) < 2 * step and abs(ours.high - (0.125 + 1.96 * sd)) < 2 * step


def test_the_permutation_test_of_scores_in_tenths_matches_the_exact_count_of_sign_assignments() -> None:
    # 84 graded deltas on a scale of tenths (four distinct values: signs drawn as counts). The exact p-value counts
    # the 2**84 equally likely sign assignments whose sum is at least as far from 0, by convolution over the sums
    # in tenths (whole numbers, so no rounding).
    tenths = [2] * 30 + [-1] * 30 + [5] * 10 + [-3] * 14
    ways = {0: 1}
    for v in tenths:
        grown: dict[int, int] = {}
        for total, count in ways.items():
            for signed in (v, -v):
                grown[total + signed] = grown.get(total + signed, 0) + count
        ways = grown
    observed = abs(sum(tenths))
    exact = sum(count for total, count in ways.items() if abs(total) >= observed) / 2 ** len(tenths)
    assert 0.05 < exact < 0.3  # neither end of the scale
    ours = paired_permutation_p([v / 10 for v in tenths], resamples=20000, seed=4)
    assert abs(ours - exact) < 0.01, (ours, exact)


def _run(passing: list[bool]) -> EvalReport:
    results = [
        EvalCaseResult.success(f"çase-{i}", [CriterionResult.success("answer", 1.0 if ok else 0.0, 0.5)])
        for i, ok in enumerate(passing)
    ]
    return EvalReport.create("orders", results)


def test_the_gate_summary_lists_regressions_first_and_at_most_50_flips(tmp_path: Path) -> None:
    # 3,000 cases: 1,000 went from pass to fail, 500 from fail to pass, the rest stayed as they were
    baseline = [i % 3 != 2 for i in range(3000)]
    candidate = [(not ok) if i % 2 == 0 else ok for i, ok in enumerate(baseline)]
    worse = sum(a and not b for a, b in zip(baseline, candidate))
    better = sum(b and not a for a, b in zip(baseline, candidate))
    assert (worse, better) == (1000, 500)
    _run(baseline).to_file(tmp_path / "base.json")
    _run(candidate).to_file(tmp_path / "cand.json")

    base, cand = tmp_path / "base.json", tmp_path / "cand.json"
    gate = run_cli("gate", "--baseline", base, "--candidate", cand, "--out", tmp_path / "gate")
    assert gate.exit_code == 1, gate.output
    summary = (tmp_path / "gate" / "summary.md").read_text(encoding="utf-8")
    assert summary == gate.stdout
    rows = [line for line in summary.splitlines() if line.startswith("| çase-")]
    assert len(rows) == MARKDOWN_FLIPS and all("| pass->fail |" in row for row in rows)
    assert "The first 50 of 1500 flipped cases (1000 pass->fail, 500 fail->pass); `--format json` lists them all." in (
        summary
    )
    assert "| answer | 67% → 50% | 1000/500 |" in summary

    listed = run_cli("gate", "--baseline", base, "--candidate", cand, "--out", tmp_path / "json", "--format", "json")
    assert listed.exit_code == 1
    flips = json.loads(listed.stdout)["flips"]
    assert len(flips) == 1500 and sum(f["direction"] == "pass->fail" for f in flips) == 1000


def test_a_short_flip_list_is_shown_whole_in_run_order() -> None:
    baseline, candidate = [True, False, True, True], [False, True, True, False]
    text = compare_runs(_run(baseline), _run(candidate)).to_markdown()
    rows = [line.split(" | ")[:2] for line in text.splitlines() if line.startswith("| çase-")]
    assert rows == [["| çase-0", "pass->fail"], ["| çase-3", "pass->fail"], ["| çase-1", "fail->pass"]]
    assert "flipped cases (" not in text
