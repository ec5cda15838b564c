"""Reading reports and runs: a report file without a ``summary`` gets its results' summary however it is read
(``EvalReport.from_file``, ``tracegrade report``), and the UI refuses to diff a run holding an eval id twice with a
4xx naming the ids (its JSON API and its diff page, on a real aiohttp server over loopback), not a 500."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient

from tests.support.grading_traces import AgentRun, fill_store
from tests.support.ui_client import ui_client
from tracegrade.evaluation.run_records import record_report
from tracegrade.models.results import CriterionResult, EvalCaseResult, EvalReport


def _case(eval_id: str, passed: bool) -> dict:
    score = 1.0 if passed else 0.0
    criterion = {"criterion": "quality", "score": score, "passed": passed, "threshold": 0.5}
    return {"eval_id": eval_id, "passed": passed, "criterion_results": [criterion]}


def _summaryless(path: Path) -> Path:
    """A report as another tool (or a hand) writes one: results, no summary."""
    report = {"eval_set_id": "hand", "results": [_case("a", True), _case("b", False), _case("c", True)]}
    path.write_text(json.dumps(report), encoding="utf-8")
    return path


def test_eval_report_from_file_rebuilds_a_missing_summary(tmp_path: Path) -> None:
    report = EvalReport.from_file(_summaryless(tmp_path / "report.json"))
    s = report.summary
    assert (s.total_cases, s.passed_cases, s.failed_cases) == (3, 2, 1)
    assert s.criterion_stats["quality"].total == 3
    assert not report.passed and report.failed_cases[0].eval_id == "b"


def test_a_summary_the_file_has_is_kept_as_its_record(tmp_path: Path) -> None:
    recorded = EvalReport.create("kept", [EvalCaseResult(eval_id="a", passed=True)])
    recorded.summary.total_cases = 7  # what the file says, even when its results say otherwise
    recorded.to_file(tmp_path / "report.json")
    assert EvalReport.from_file(tmp_path / "report.json").summary.total_cases == 7


def test_tracegrade_report_reads_a_summaryless_report_as_from_file_does(tmp_path: Path) -> None:
    path = _summaryless(tmp_path / "report.json")
    command = [sys.executable, "-m", "tracegrade.cli.main", "report", str(path), "--format", "json"]
    shown = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert shown.returncode == 0, shown.stderr
    summary = json.loads(shown.stdout)["summary"]
    assert (summary["total_cases"], summary["passed_cases"]) == (3, 2)
    assert summary == EvalReport.from_file(path).summary.model_dump(mode="json")


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[TestClient]:
    store = fill_store(tmp_path / "store.duckdb", [AgentRun(1, "question", "answer")])
    passed = CriterionResult(criterion="quality", score=1.0, passed=True, threshold=0.5)
    case = EvalCaseResult(eval_id="c1", passed=True, criterion_results=[passed])
    # two reports merged by hand: c1 twice
    record_report(store, EvalReport.create("set", [case, case.model_copy()]), "live", "twice")
    record_report(store, EvalReport.create("set", [case]), "live", "once")
    async with ui_client(store) as opened:
        yield opened


async def test_the_diff_api_refuses_a_run_holding_an_eval_id_twice_with_400(client: TestClient) -> None:
    response = await client.get("/ui/api/diff?a=twice&b=once")
    assert response.status == 400, await response.text()
    message = (await response.json())["error"]
    assert message.startswith("runs twice and once cannot be diffed: twice has more than one result for 1 eval id(s)")
    assert "'c1' (2 results)" in message and "keep one result per case" in message
    assert (await client.get("/ui/api/diff?a=once&b=once")).status == 200


async def test_the_diff_page_shows_why_beside_its_run_pickers(client: TestClient) -> None:
    response = await client.get("/ui/diff?a=once&b=twice")
    assert response.status == 400
    page = await response.text()
    assert "runs once and twice cannot be diffed: twice has more than one result" in page
    assert 'name="a"' in page and 'name="b"' in page  # the pickers, to choose other runs
