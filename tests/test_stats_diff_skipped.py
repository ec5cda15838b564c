"""``tracegrade diff``: a criterion that was skipped (did not apply) in one run is no regression or improvement.

A skipped result carries a placeholder score of 0; the diff compared it as a score, so a criterion graded 0.9
in A and skipped in B read "regressed" and ``--fail-on-regression`` exited 1 (the paired statistics of
``compare_runs`` already left such cases out).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.grading_cli import run_cli
from tracegrade.evaluation.run_diff import diff_reports
from tracegrade.models.results import CriterionResult, EvalCaseResult, EvalReport

SKIPPED = CriterionResult(
    criterion="rouge", score=0.0, passed=True, threshold=0.5, skipped=True, details={"reason": "no expected response"}
)
GRADED = CriterionResult.success("rouge", 0.9, 0.5)


def _run(result: CriterionResult) -> EvalReport:
    return EvalReport.create("run", [EvalCaseResult.success("case-1", [result], name="case 1")])


def test_graded_then_skipped_is_removed_and_the_other_way_added() -> None:
    assert [c.kind for c in diff_reports(_run(GRADED), _run(SKIPPED)).cases[0].criteria] == ["removed"]
    assert [c.kind for c in diff_reports(_run(SKIPPED), _run(GRADED)).cases[0].criteria] == ["added"]
    assert [c.kind for c in diff_reports(_run(SKIPPED), _run(SKIPPED)).cases[0].criteria] == ["unchanged"]
    diff = diff_reports(_run(GRADED), _run(SKIPPED))
    assert diff.cases[0].kind == "unchanged" and diff.count("regressed") == 0


def test_the_diff_cli_does_not_fail_on_a_criterion_that_became_skipped(tmp_path: Path) -> None:
    _run(GRADED).to_file(tmp_path / "a.json")
    _run(SKIPPED).to_file(tmp_path / "b.json")
    result = run_cli("diff", tmp_path / "a.json", tmp_path / "b.json", "--fail-on-regression", "--format", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["summary"]["regressed"] == 0
    (criterion,) = data["cases"][0]["criteria"]
    assert criterion["kind"] == "removed" and criterion["skipped_b"] is True and criterion["skipped_a"] is False


def test_the_diff_table_says_skipped_rather_than_a_score_of_0(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # one table row on one line
    _run(GRADED).to_file(tmp_path / "a.json")
    _run(SKIPPED).to_file(tmp_path / "b.json")
    result = run_cli("diff", tmp_path / "a.json", tmp_path / "b.json", "--all")
    assert result.exit_code == 0, result.output
    assert "rouge: 0.90 -> skipped (removed)" in result.stdout
