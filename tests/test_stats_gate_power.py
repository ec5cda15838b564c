"""The gate's "too few cases" check counts every test of the Holm-adjusted family, not just one.

Holm multiplies the smallest p-value by the number of tests: with six cases and three tests, even all six
going from pass to fail give an adjusted p of 3 * 2/2**6 = 0.094 > 0.05. The gate used to call that
``pass`` (exit 0, no doubt raised) because it checked the power of a single McNemar test (2/2**6 < 0.05).
"""

from __future__ import annotations

from pathlib import Path

from tests.support.grading_cli import run_cli
from tracegrade.evaluation.compare import compare_runs
from tracegrade.models.results import CriterionResult, EvalCaseResult, EvalReport

CRITERIA = ("tool_name_match", "response_match")


def _run(passing: bool, cases: int) -> EvalReport:
    """Every case passes (or fails) both pass/fail criteria: three McNemar tests, no permutation test."""
    score = 1.0 if passing else 0.0
    results = [
        EvalCaseResult.success(f"case-{i}", [CriterionResult.success(c, score, 1.0) for c in CRITERIA])
        for i in range(cases)
    ]
    return EvalReport.create("power", results)


def test_six_cases_all_regressing_under_three_tests_are_inconclusive_not_pass() -> None:
    result = compare_runs(_run(True, 6), _run(False, 6))
    # 2/2**6 = 0.03125 per test, Holm-adjusted over three tests: 0.09375 for each, none below 0.05
    assert [m.mcnemar_p_adjusted for m in result.metrics] == [0.09375] * 3
    assert result.verdict == "inconclusive"
    (reason,) = result.reasons
    assert "Holm-adjusted over 3 tests" in reason and "needs at least 7 paired cases" in reason


def test_seven_cases_are_enough_for_three_tests() -> None:
    result = compare_runs(_run(True, 7), _run(False, 7))
    # 3 * 2/2**7 = 0.046875 < 0.05
    assert result.cases.mcnemar_p_adjusted == 0.046875
    assert result.verdict == "fail"


def test_a_graded_criterion_adds_its_permutation_test_to_the_count() -> None:
    def run(score: float) -> EvalReport:
        return EvalReport.create(
            "graded",
            [EvalCaseResult.success(f"c{i}", [CriterionResult.success("quality", score, 0.5)]) for i in range(7)],
        )

    result = compare_runs(run(0.9), run(0.3))
    # cases + quality (McNemar) + quality (permutation): 3 * 2/2**7 < 0.05 > 3 * 2/2**6
    assert result.verdict == "fail"
    six = EvalReport.create("graded", run(0.9).results[:6])
    result = compare_runs(six, run(0.3))
    assert result.verdict == "inconclusive" and "Holm-adjusted over 3 tests" in result.reasons[0]


def test_one_test_keeps_the_single_test_wording() -> None:
    # cases without criteria: the case pass rate is the only test
    base = EvalReport.create("bare", [EvalCaseResult.success(f"c{i}", []) for i in range(5)])
    cand = EvalReport.create("bare", [EvalCaseResult.failure(f"c{i}", "boom") for i in range(5)])
    result = compare_runs(base, cand)
    assert result.verdict == "inconclusive"
    assert "Holm" not in result.reasons[0] and "needs at least 6 paired cases" in result.reasons[0]


def test_the_gate_cli_exits_0_and_says_inconclusive_for_six_regressed_cases(tmp_path: Path) -> None:
    _run(True, 6).to_file(tmp_path / "base.json")
    _run(False, 6).to_file(tmp_path / "cand.json")
    result = run_cli(
        "gate", "--baseline", tmp_path / "base.json", "--candidate", tmp_path / "cand.json", "--out", tmp_path / "g"
    )
    assert result.exit_code == 0, result.output
    assert "tracegrade gate: inconclusive" in result.stdout
    assert "needs at least 7 paired cases" in result.stdout
