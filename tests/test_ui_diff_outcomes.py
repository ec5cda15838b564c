"""The UI's run diff reads each stored run as the outcomes it compares, never as a full report, and answers what
it answered when it read full reports: runs recorded whole or case by case, a summary kept as recorded, id
prefixes, criteria that errored, skipped or are not numbers, trajectories that part."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from tracegrade.evaluation.run_diff import diff_reports
from tracegrade.evaluation.run_records import load_run, record_cases, record_report
from tracegrade.models.dataset import ToolCall
from tracegrade.models.results import CriterionResult, EvalCaseResult, EvalReport, EvalSummary
from tracegrade.store import TraceStore
from tracegrade.ui import api


def _case(eval_id: str, passed: bool, score: float, tools: list[str], **extra: Any) -> EvalCaseResult:
    judge = CriterionResult(criterion="judge", score=score, passed=passed, threshold=0.5, reason="because")
    return EvalCaseResult(
        eval_id=eval_id,
        name=f"name of {eval_id}",
        passed=passed,
        criterion_results=[judge],
        actual_tool_calls=[ToolCall(name=t, args={"q": eval_id}, result={"big": "x" * 100}) for t in tools],
        node_visits=["agent", *tools],
        actual_response=f"answer {eval_id}",
        **extra,
    )


def _reports() -> dict[str, EvalReport]:
    base = [_case(f"c{i}", i % 3 != 0, i / 10, ["lookup"] * (i % 2 + 1)) for i in range(8)]
    changed = [
        _case("c0", True, 0.9, ["lookup", "refund"]),
        _case("c1", False, math.nan, ["lookup"], error="agent crashed"),
        _case("c9", True, 1e-05, []),
        *base[2:6],
    ]
    skipped = CriterionResult(criterion="judge", score=0.0, passed=True, skipped=True)
    changed.append(EvalCaseResult(eval_id="c7", passed=True, criterion_results=[skipped]))
    errored = CriterionResult(criterion="judge", score=0.0, passed=False, error="judge <down>: 500")
    changed.append(EvalCaseResult(eval_id="c6", passed=False, criterion_results=[errored]))
    kept = EvalReport.create("support", base[:5])
    kept.summary = EvalSummary(total_cases=5, passed_cases=1, failed_cases=4, pass_rate=0.2)  # as recorded
    return {
        "run-base": EvalReport.create("support", base),
        "run-changed": EvalReport.create("support", changed),
        "run-kept-summary": kept,
        "run-empty": EvalReport.create("support", []),
    }


@pytest.fixture
def store(tmp_path: Path) -> Any:
    opened = TraceStore(tmp_path / "store.duckdb")
    for run_id, report in _reports().items():
        record_report(opened, report, "eval_set", run_id)
    casewise = _reports()["run-changed"]
    for part in (casewise.results[:3], casewise.results[3:], casewise.results[:1]):  # c0 recorded again
        record_cases(opened, EvalReport.create("support", part), "live", "live-casewise", {})
    yield opened
    opened.close()


def _as_before(store: TraceStore, run_a: str, run_b: str) -> dict[str, Any]:
    """``api.diff_runs`` as it was: both runs read whole with ``load_run``, the pass rate their summaries'."""
    a, b = load_run(store, run_a), load_run(store, run_b)
    diff = diff_reports(a, b, run_a, run_b).to_dict()
    by_a, by_b = {r.eval_id: r for r in a.results}, {r.eval_id: r for r in b.results}
    for case in diff["cases"]:
        case["diverges_at"] = api._divergence(by_a.get(case["eval_id"]), by_b.get(case["eval_id"]))
    diff["pass_rate"] = {"a": a.summary.pass_rate, "b": b.summary.pass_rate}
    return diff


PAIRS = [
    ("run-base", "run-changed"),
    ("run-changed", "run-base"),
    ("run-base", "live-casewise"),
    ("live-casewise", "run-kept-summary"),
    ("run-empty", "run-base"),
    ("run-base", "run-empty"),
    ("run-ch", "live-c"),  # unique prefixes
]


@pytest.mark.parametrize(("run_a", "run_b"), PAIRS)
def test_the_diff_is_what_full_reports_gave(store: TraceStore, run_a: str, run_b: str) -> None:
    got, expected = api.diff_runs(store, run_a, run_b), _as_before(store, run_a, run_b)
    assert repr(got) == repr(expected)  # repr: NaN scores compare equal to themselves


def test_the_diff_builds_no_full_report(store: TraceStore, monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(*args: Any) -> Any:
        raise AssertionError("diff_runs read a full report")

    monkeypatch.setattr(api, "load_run", refused)
    diff = api.diff_runs(store, "run-base", "live-casewise")
    assert diff["pass_rate"] == {"a": 5 / 8, "b": 6 / 9}
    assert {c["eval_id"]: c["kind"] for c in diff["cases"]}["c6"] == "errored"


def test_missing_and_ambiguous_runs_are_refused_as_before(store: TraceStore) -> None:
    with pytest.raises(api.NotFound, match="no grading run 'nope'"):
        api.diff_runs(store, "nope", "run-base")
    with pytest.raises(api.BadRequest, match="ambiguous"):
        api.diff_runs(store, "run-base", "run-")
