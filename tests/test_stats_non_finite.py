"""Scores that are not numbers in [0, 1] (NaN from a hand-edited report or a custom criterion that builds its
results itself) are refused where statistics are computed, naming where they are.

Before: a NaN difference gave the sign-flip permutation test a p-value of 2.0 and the comparison a NaN delta
(with a ``pass`` verdict); a NaN or 1.5 in one trial made ``combine_trials`` raise "successes must be within
0..2, got nan", which named neither the case nor the criterion, and ended the whole run.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from tests.support.grading_cli import run_cli
from tracegrade.errors import InvalidValueError
from tracegrade.evaluation.compare import compare_runs
from tracegrade.evaluation.statistics import paired_permutation_p, percentile_bootstrap
from tracegrade.evaluation.trials import combine_trials
from tracegrade.models.results import CriterionResult, EvalCaseResult, EvalReport


def _case(eval_id: str, score: float) -> EvalCaseResult:
    """A case graded by a criterion that built its result itself (no clamping of the score)."""
    result = CriterionResult(criterion="quality", score=score, passed=score >= 0.5, threshold=0.5)
    return EvalCaseResult.success(eval_id, [result])


def _report(scores: list[float]) -> EvalReport:
    return EvalReport.create("run", [_case(f"c{i}", s) for i, s in enumerate(scores)])


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_the_permutation_test_and_the_bootstrap_refuse_non_finite_values(bad: float) -> None:
    with pytest.raises(ValueError, match=r"permutation test needs finite numbers: value 1 of 3 is (nan|-?inf)"):
        paired_permutation_p([0.5, bad, -0.25])
    with pytest.raises(ValueError, match=r"bootstrap needs finite numbers: value 2 of 3 is (nan|-?inf)"):
        percentile_bootstrap([0.5, -0.25, bad])


def test_compare_runs_names_the_run_case_and_criterion_with_a_nan_score() -> None:
    baseline = _report([0.8] * 30)
    candidate = _report([0.8] * 29 + [math.nan])
    with pytest.raises(InvalidValueError, match=r"cand: case 'c29', criterion 'quality' has score nan"):
        compare_runs(baseline, candidate, baseline_name="base", candidate_name="cand")


def test_the_gate_exits_2_on_a_nan_score(tmp_path: Path) -> None:
    _report([0.8] * 30).to_file(tmp_path / "base.json")
    _report([math.nan] + [0.8] * 29).to_file(tmp_path / "cand.json")
    result = run_cli(
        "gate", "--baseline", tmp_path / "base.json", "--candidate", tmp_path / "cand.json", "--out", tmp_path / "g"
    )
    assert result.exit_code == 2, result.output
    assert "case 'c0', criterion 'quality' has score nan" in result.output


@pytest.mark.parametrize("bad", [math.nan, 1.5, -0.5])
def test_a_trial_scored_outside_0_to_1_fails_its_criterion_with_the_reason(bad: float) -> None:
    combined = combine_trials([_case("c", 0.9), _case("c", bad), _case("c", 0.9)])
    (quality,) = combined.criterion_results
    assert not combined.passed and not quality.passed and quality.score == 0.0
    assert quality.error is not None and quality.error.startswith(f"trial 2 of 3 scored {bad}: ")
    assert quality.details["trial"] == 2
