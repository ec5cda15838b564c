"""A run whose report holds a lone surrogate (a case name or an agent's reply built in Python) is recorded as its
JSON report holds it: the surrogate as U+FFFD. Through a pytest session's ``--tracegrade-store`` and through the
online worker's case-by-case recording; each read back from the store. An eval set file whose ``"\\ud800"`` escape
makes one is refused when it loads, so ``tracegrade grade`` records nothing from it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.grading_cli import write_config
from tests.support.grading_traces import AgentRun, fill_store
from tracegrade.evaluation.run_records import list_runs, load_run, record_cases
from tracegrade.models import EvalCase, EvalSet, Invocation, ToolCall
from tracegrade.models.config import CriteriaConfig, CriterionConfig, EvalConfig
from tracegrade.models.results import CriterionResult, EvalCaseResult, EvalReport
from tracegrade.store import TraceStore

pytest_plugins = ["pytester"]

LONE = "half \ud800 pair"
SHOWN = "half \ufffd pair"  # what the JSON report writes for it, and the store now records


def _cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "tracegrade.cli.main", *args]
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=300, check=False)


def _recorded_names(store_path: Path) -> list[tuple[str, str]]:
    with TraceStore(store_path, read_only=True) as store:
        return [tuple(row) for row in store.query("SELECT eval_id, name FROM eval_case_results ORDER BY 1").rows]


def test_tracegrade_grade_refuses_an_eval_set_whose_case_name_holds_a_lone_surrogate(tmp_path: Path) -> None:
    fill_store(tmp_path / "store.duckdb", [AgentRun(1, "cancel order 5", "cancelled", [("cancel", {})])]).close()
    config = EvalConfig(criteria=CriteriaConfig(tool_name_match=CriterionConfig.tool_name_match()))
    write_config(tmp_path / "config.json", config)
    case = EvalCase(
        eval_id="cancel",
        name=LONE,
        conversation=[Invocation.simple("cancel order 5", None, [ToolCall(name="cancel")], None)],
    )
    # json.dumps writes the surrogate as the escape "\ud800", which json.loads reads back as the surrogate itself
    eval_set = json.dumps(EvalSet(eval_set_id="orders", eval_cases=[case]).model_dump(mode="json"))
    assert "\\ud800" in eval_set
    (tmp_path / "evalset.json").write_text(eval_set, encoding="utf-8")

    graded = _cli(
        tmp_path, "grade", "--store", "store.duckdb", "--config", "config.json", "--evalset", "evalset.json",
        "--out", "out", "--format", "json",
    )  # fmt: skip
    assert graded.returncode == 2, graded.stderr
    assert "Traceback" not in graded.stderr
    assert "$.eval_cases[0].name" in graded.stderr and "half of a UTF-16 surrogate pair" in graded.stderr
    assert not list(tmp_path.glob("out/*.json"))
    listed = _cli(tmp_path, "runs", "--store", "store.duckdb", "--format", "json")
    assert json.loads(listed.stdout) == []


AGENT = """
from tracegrade import trace_node

@trace_node("agent")
def agent(text: str) -> str:
    return "answer " + text
"""

# the case's name and the agent's reply hold a lone surrogate: both are in the session's report
TEST_FILE = """
from agent import agent
from tracegrade import CriteriaConfig, CriterionConfig, EvalConfig
from tracegrade.models import EvalCase, Invocation
from tracegrade.testing import run_eval_sync

CONFIG = EvalConfig(criteria=CriteriaConfig(contains_keywords=CriterionConfig.contains_keywords(["answer"])))

def test_odd_text(tracegrade_app):
    app, collector = tracegrade_app(agent)
    case = EvalCase(eval_id="odd", name="half \\ud800 pair", conversation=[Invocation.simple("q \\udfff", None)])
    assert run_eval_sync(app, collector, case, CONFIG).passed
"""


def test_a_pytest_session_with_a_lone_surrogate_is_recorded_in_its_store(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(agent=AGENT, test_odd=TEST_FILE)
    session = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--tracegrade-store", "runs.duckdb")
    session.assert_outcomes(passed=1)
    output = session.stdout.str()
    assert "could not be recorded" not in output and "INTERNALERROR" not in output
    with TraceStore(pytester.path / "runs.duckdb", read_only=True) as store:
        (run,) = list_runs(store)
        (result,) = load_run(store, run.run_id).results
    assert (run.total_cases, run.passed_cases) == (1, 1)
    assert result.name == SHOWN and result.actual_response == "answer q \ufffd"
    assert _recorded_names(pytester.path / "runs.duckdb") == [("odd", SHOWN)]


def test_cases_recorded_one_by_one_hold_a_lone_surrogate_as_u_fffd(tmp_path: Path) -> None:
    # the online worker's way: each window of cases added to its run
    criterion = CriterionResult(criterion="quality", score=0.0, passed=False, threshold=0.5, details={"reason": LONE})
    result = EvalCaseResult(eval_id="odd", name=LONE, passed=False, actual_response=LONE, criterion_results=[criterion])
    report = EvalReport.create(f"set {LONE}", [result])
    with TraceStore(tmp_path / "store.duckdb") as store:
        record_cases(store, report, "online", "worker:rule:1", {"window": LONE})
        loaded = load_run(store, "worker:rule:1")
        reasons = store.query("SELECT reason, details FROM eval_results").rows
    (back,) = loaded.results
    assert (back.name, back.actual_response, loaded.eval_set_id) == (SHOWN, SHOWN, f"set {SHOWN}")
    assert back.criterion_results[0].reason == SHOWN
    assert reasons[0][0] == SHOWN and json.loads(reasons[0][1]) == {"reason": SHOWN}
