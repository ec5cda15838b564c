"""Repeated trials (``num_runs``): a criterion's explanation (reason, details) comes from a trial that agrees with
its combined verdict (the worst trial when it fails, the first passing one when it passes), in every report."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.support.grading_cli import run_cli, write_config
from tests.support.grading_traces import AgentRun, fill_store
from tracegrade.evaluation.trials import combine_trials
from tracegrade.models import EvalCase, EvalSet, Invocation, ToolCall
from tracegrade.models.config import CriteriaConfig, CriterionConfig, EvalConfig
from tracegrade.models.results import CriterionResult, EvalCaseResult

TRAJECTORY = "tool_trajectory_avg_score"


def _grade(tmp_path: Path, cities: list[str], threshold: float) -> tuple[str, Path]:
    """``grade`` of one case (expects ``get_weather(city=Paris)``) whose recorded traces, one per trial, called
    ``get_weather`` with ``cities`` in turn; the console output and the report directory."""
    runs = [
        AgentRun(n, "weather in Paris?", f"{city}: sunny", [("get_weather", {"city": city})], start_offset_s=n)
        for n, city in enumerate(cities, 1)
    ]
    fill_store(tmp_path / "store.duckdb", runs).close()
    expected = Invocation.simple("weather in Paris?", None, [ToolCall(name="get_weather", args={"city": "Paris"})])
    EvalSet(eval_set_id="weather", eval_cases=[EvalCase(eval_id="w", conversation=[expected])]).to_file(
        tmp_path / "set.json"
    )
    criteria = CriteriaConfig(trajectory=CriterionConfig.trajectory(threshold=threshold, check_args=True))
    write_config(tmp_path / "config.json", EvalConfig(criteria=criteria, num_runs=len(cities)))
    result = run_cli(
        "grade",
        "--store",
        tmp_path / "store.duckdb",
        "--evalset",
        tmp_path / "set.json",
        "--config",
        tmp_path / "config.json",
        "--out",
        tmp_path / "out",
        "--format",
        "console,json,html,junit",
        "--verbose",  # the console lists passing cases too
    )
    assert result.exit_code in (0, 1), result.output
    return result.stdout, tmp_path / "out"


def test_a_failing_criterion_is_explained_by_its_worst_trial_in_every_report(tmp_path: Path) -> None:
    console, out = _grade(tmp_path, ["Paris", "London", "Paris"], threshold=1.0)  # mean 0.67: fails

    (report_file,) = out.glob("*.json")
    (case,) = json.loads(report_file.read_text(encoding="utf-8"))["results"]
    (criterion,) = case["criterion_results"]
    assert (criterion["criterion"], criterion["passed"]) == (TRAJECTORY, False)
    assert criterion["details"]["trial"] == 2 and criterion["details"]["reason"].startswith("trial 2 of 3: ")
    assert "London" in json.dumps(criterion["details"]["extra"])  # the failing trial's call, not the passing one's

    (junit_file,) = out.glob("*junit*.xml")
    (failure,) = ET.parse(junit_file).getroot().iter("failure")
    assert "score 0.67 below threshold 1.0 | trial 2 of 3: " in failure.get("message", "")
    assert "Extra (1):" in (failure.text or "") and "London" in (failure.text or "")

    (html_file,) = out.glob("*.html")
    for shown in (console, html_file.read_text(encoding="utf-8")):
        assert "trial 2 of 3: " in shown and "Matched 100%" not in shown


def test_a_passing_criterion_is_explained_by_a_passing_trial(tmp_path: Path) -> None:
    console, out = _grade(tmp_path, ["London", "Paris", "Paris"], threshold=0.5)  # mean 0.67: passes

    (report_file,) = out.glob("*.json")
    (criterion,) = json.loads(report_file.read_text(encoding="utf-8"))["results"][0]["criterion_results"]
    assert criterion["passed"] and criterion["details"]["trial"] == 2
    assert criterion["details"]["reason"].startswith("trial 2 of 3: ") and not criterion["details"]["extra"]
    assert "trial 2 of 3: " in console


@pytest.mark.parametrize(
    ("scores", "expected"),
    [([1.0, 0.2, 0.0, 0.0], 3), ([0.0, 1.0, 1.0], 2), ([0.1, 0.1], 1)],  # the worst, the first of equals
)
def test_the_explaining_trial(scores: list[float], expected: int) -> None:
    def trial(n: int, score: float) -> EvalCaseResult:
        return EvalCaseResult.success("c", [CriterionResult.success("m", score, 0.5, {"reason": f"trial's own {n}"})])

    (m,) = combine_trials([trial(n, s) for n, s in enumerate(scores, 1)]).criterion_results
    assert m.details == {"reason": f"trial {expected} of {len(scores)}: trial's own {expected}", "trial": expected}


def test_a_trial_that_failed_before_grading_explains_with_its_error() -> None:
    ok = EvalCaseResult.success("c", [CriterionResult.success("m", 1.0, 1.0, {"reason": "all matched"})])
    broken = EvalCaseResult.failure("c", "timed out after 5s")
    (m,) = combine_trials([ok, broken, ok]).criterion_results
    assert not m.passed and m.reason == "trial 2 of 3 failed before grading: timed out after 5s"
