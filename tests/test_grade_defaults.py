"""``tracegrade grade`` without --config: an eval set is graded with criteria that need no LLM judge, the
output says which and how to add a judge; reference-free grading is refused up front, naming the fix. The
Python API's default (``EvalConfig.default()``) stays the seed's, judged response_match included."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.grading_cli import eval_runs, read_report, run_cli
from tests.support.grading_traces import AgentRun, fill_store
from tracegrade.models import EvalCase, EvalSet, Invocation, ToolCall
from tracegrade.models.config import EvalConfig, MatchType

JUDGE_KEYS = ("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI", "OPENAI_API_KEY", "OPENAI_API_BASE")


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in JUDGE_KEYS:  # a first-time user: no judge set up
        monkeypatch.delenv(name, raising=False)
    runs = [AgentRun(1, "cancel order 5", "order 5 cancelled", [("cancel", {"order": 5})], case_id="cancel")]
    fill_store(tmp_path / "store.duckdb", runs).close()
    expected = Invocation.simple("cancel order 5", "order 5 is cancelled", [ToolCall(name="cancel")], None)
    EvalSet(eval_set_id="orders", eval_cases=[EvalCase(eval_id="cancel", conversation=[expected])]).to_file(
        tmp_path / "evalset.json"
    )
    return tmp_path


def test_grade_without_config_grades_with_no_judge_and_says_how_to_add_one(workspace: Path) -> None:
    result = run_cli(
        "grade", "--store", workspace / "store.duckdb", "--evalset", workspace / "evalset.json",
        "--out", workspace / "out", "--format", "json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    report = read_report(workspace / "out")
    (case,) = report.results
    assert case.passed and not case.error
    assert [c.criterion for c in case.criterion_results] == ["tool_trajectory_avg_score", "rouge_match"]
    assert all("No LLM provider" not in (c.reason or "") for c in case.criterion_results)
    criteria = report.config_used["criteria"]
    assert criteria["response_match"] is None and criteria["rouge_match"]["threshold"] == 0.5
    assert criteria["trajectory"]["match_type"] == "EXACT"
    assert "no --config: graded with trajectory" in result.stderr and "rouge_match" in result.stderr
    assert "response_match" in result.stderr and "GEMINI_API_KEY" in result.stderr  # how to add a judge
    assert [run[1:] for run in eval_runs(workspace / "store.duckdb")] == [("eval_set", 1, 1)]


def test_reference_free_grade_without_config_names_the_fix_and_writes_nothing(workspace: Path) -> None:
    result = run_cli("grade", "--store", workspace / "store.duckdb", "--out", workspace / "out", "--since", "7d")
    assert result.exit_code == 2
    assert "reference-free grading (no --evalset) needs --config" in result.stderr
    assert "contains_keywords" in result.stderr and "--evalset" in result.stderr
    assert not (workspace / "out").exists() and eval_runs(workspace / "store.duckdb") == []


def test_the_python_api_default_keeps_the_judged_response_match() -> None:
    criteria = EvalConfig.default().criteria
    assert criteria.response_match is not None and criteria.response_match.threshold == 0.8
    assert criteria.trajectory is not None and criteria.trajectory.match_type == MatchType.EXACT
    assert criteria.rouge_match is None


def test_a_config_whose_judge_has_no_key_is_refused_before_any_grading(workspace: Path) -> None:
    config = workspace / "judged.json"
    config.write_text(EvalConfig.default().model_dump_json())  # trajectory and the judged response_match
    result = run_cli(
        "grade", "--store", workspace / "store.duckdb", "--evalset", workspace / "evalset.json",
        "--config", config, "--out", workspace / "out",
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    assert "no judge can be reached (criteria.response_match: missing credentials for" in result.stderr
    assert "GEMINI_API_KEY" in result.stderr and "disable those criteria" in result.stderr
    assert not (workspace / "out").exists() and eval_runs(workspace / "store.duckdb") == []


def test_tracegrade_run_refuses_an_unreachable_judge_before_it_loads_the_agent(workspace: Path) -> None:
    config = workspace / "judged.json"
    config.write_text(EvalConfig.default().model_dump_json())
    agent = workspace / "agent.py"
    marker = workspace / "imported"
    agent.write_text(f"open({str(marker)!r}, 'w').close()\n\ndef agent(message):\n    return 'ok'\n")
    result = run_cli("run", agent, "--evalset", workspace / "evalset.json", "--config", config)
    assert result.exit_code == 2, result.output
    assert "criteria.response_match: missing credentials" in result.stderr
    assert not marker.exists()  # nothing ran: the agent was not even imported
