"""Grading runs recorded in the store: idempotent writes, listing, loading, and SQL joins with traces."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.grading_traces import AgentRun, fill_store
from tracegrade.errors import InvalidValueError
from tracegrade.evaluation.case_export import cases_from_traces
from tracegrade.evaluation.offline import TraceGrader
from tracegrade.evaluation.run_records import list_runs, load_run, record_report
from tracegrade.evaluation.selection import TraceSelection
from tracegrade.models.config import CriteriaConfig, CriterionConfig, EvalConfig
from tracegrade.models.dataset import ToolCall

CONFIG = EvalConfig(
    criteria=CriteriaConfig(
        trajectory=CriterionConfig.trajectory(), contains_keywords=CriterionConfig.contains_keywords(["ok"])
    )
)


@pytest.fixture
def store(tmp_path: Path):
    runs = [AgentRun(n, f"q{n}", "ok" if n != 2 else "no", [("lookup", {"n": n})], start_offset_s=n) for n in (1, 2, 3)]
    with fill_store(tmp_path / "store.duckdb", runs) as opened:
        yield opened


def _counts(store) -> tuple[int, int, int]:
    return tuple(
        store.query(f"SELECT count(*) FROM {table}").rows[0][0]
        for table in ("eval_runs", "eval_case_results", "eval_results")
    )


def test_recording_the_same_run_twice_never_duplicates(store) -> None:
    report = TraceGrader(store, CONFIG).grade_traces_sync(TraceSelection())
    assert record_report(store, report, "reference_free", "run-a") == "run-a"
    first = _counts(store)
    assert first == (1, 3, 6)  # 3 cases x (contains_keywords + skipped trajectory)
    record_report(store, report, "reference_free", "run-a")
    assert _counts(store) == first
    assert load_run(store, "run-a").model_dump(exclude={"timestamp"}) == report.model_dump(exclude={"timestamp"})


def test_a_run_id_must_be_one_plain_path_segment(store) -> None:
    report = TraceGrader(store, CONFIG).grade_traces_sync(TraceSelection())
    for run_id in ("worker:nightly:20261203T100000Z", "run-20261203-101500-abc123", "me@team+1.v2"):
        assert record_report(store, report, "reference_free", run_id) == run_id
    for run_id in ("..", ".hidden", "a/b", "a b", "x%2F", ""):
        with pytest.raises(InvalidValueError, match="cannot name a run"):
            record_report(store, report, "reference_free", run_id)
    assert sorted(r.run_id for r in list_runs(store)) == [
        "me@team+1.v2",
        "run-20261203-101500-abc123",
        "worker:nightly:20261203T100000Z",
    ]


def test_results_join_traces_and_tool_calls_in_sql(store) -> None:
    record_report(store, TraceGrader(store, CONFIG).grade_traces_sync(TraceSelection()), "reference_free", "run-a")
    rows = store.query(
        "SELECT t.user_query, c.name AS tool, r.score FROM eval_results r JOIN traces t USING (trace_id) "
        "JOIN tool_calls c USING (trace_id) WHERE r.criterion = 'contains_keywords' ORDER BY t.user_query"
    ).rows
    assert rows == [("q1", "lookup", 1.0), ("q2", "lookup", 0.0), ("q3", "lookup", 1.0)]


def test_list_and_load_runs(store) -> None:
    assert list_runs(store) == []
    report = TraceGrader(store, CONFIG).grade_traces_sync(TraceSelection(limit=1))
    for run_id, kind in (("run-1", "eval_set"), ("run-2", "worker"), ("other", "worker")):
        record_report(store, report, kind, run_id)
    assert {r.run_id for r in list_runs(store)} == {"run-1", "run-2", "other"}
    assert {r.run_id for r in list_runs(store, kind="worker")} == {"run-2", "other"}
    assert load_run(store, "oth").eval_set_id == "production"  # a unique prefix
    with pytest.raises(InvalidValueError, match="ambiguous"):  # a bad reference, not a missing run
        load_run(store, "run-")
    with pytest.raises(KeyError, match="no grading run 'nope'"):
        load_run(store, "nope")


def test_trajectory_details_are_stored_as_the_calls_fields(store) -> None:
    # the trajectory criterion's details hold the ToolCall records; the stored run holds their fields as JSON
    eval_set = cases_from_traces(store, TraceSelection(), name="exported")
    config = EvalConfig(criteria=CriteriaConfig(trajectory=CriterionConfig.trajectory(check_args=True)))
    report = TraceGrader(store, config).grade_eval_set_sync(eval_set)
    live = [c for r in report.results for c in r.criterion_results if c.criterion == "tool_trajectory_avg_score"]
    assert len(live) == 3 and all(c.passed for c in live)
    assert all(isinstance(call, ToolCall) for c in live for call in c.details["actual_trajectory"])
    record_report(store, report, "eval_set", "run-t")
    rows = store.query(
        "SELECT details FROM eval_results WHERE run_id = 'run-t' AND criterion = 'tool_trajectory_avg_score'"
    ).rows
    calls = [json.loads(row[0])["actual_trajectory"] for row in rows]
    assert sorted((c[0]["name"], c[0]["args"]["n"]) for c in calls) == [("lookup", 1), ("lookup", 2), ("lookup", 3)]
    loaded = load_run(store, "run-t")
    for case, again in zip(report.results, loaded.results, strict=True):
        for result, reloaded in zip(case.criterion_results, again.criterion_results, strict=True):
            assert reloaded.model_dump(mode="json") == result.model_dump(mode="json")
