"""Recording a run writes each table's rows as one Arrow table (``TraceStore.write_records``): the rows stored
are value for value the report's, for a run larger than any chunk, and ``write_records`` keeps the store's
transaction rules (rows replaced by key, a case's results as a whole, all or nothing, durable on return
without a WAL, refused read-only)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from tests.support.large_reports import large_report
from tracegrade.errors import StoreError
from tracegrade.evaluation.run_records import _ROW_SCHEMAS, _columns, load_run, record_report
from tracegrade.models.results import CriterionResult, EvalCaseResult, EvalReport, TokenUsage
from tracegrade.store import TraceStore
from tracegrade.store.tenancy import with_tenant


@pytest.fixture
def store(tmp_path: Path):
    with TraceStore(tmp_path / "store.duckdb") as opened:
        yield opened


def _report(cases: int) -> EvalReport:
    """``cases`` graded cases, plus an errored one with no trace and one with unicode, NULLs and judge cost."""
    odd = EvalCaseResult.success(
        "case-ünïcode",
        [
            CriterionResult.success(
                "judge",
                0.25,
                0.5,
                {"reason": "naïve — “quoted”", "n": [1, 2]},
                TokenUsage(input_tokens=7, cost_usd=0.5),
            ),
            CriterionResult.failure("rouge_match", "no reference text", 0.6),
        ],
        actual_response="Ça va ✓",
        trace_ids=["a" * 32, "b" * 32],
    )
    errored = EvalCaseResult.failure("case-error", "the agent raised TimeoutError", name="slow", duration_seconds=30.0)
    base = large_report(cases)
    return EvalReport.create("orders", [*base.results, odd, errored], "Order support")


def _expected_rows(run_id: str, report: EvalReport) -> tuple[list[tuple], list[tuple]]:
    cases, results = [], []
    for r in sorted(report.results, key=lambda r: r.eval_id):
        trace_id = r.trace_ids[0] if r.trace_ids else None
        tools = [t.name for t in r.actual_tool_calls]
        cases.append(
            (
                r.eval_id,
                r.name,
                trace_id,
                r.trace_ids,
                r.passed,
                r.error,
                r.mean_score,
                r.duration_seconds,
                r.actual_response,
                tools,
                r.node_visits,
            )
        )
        for c in sorted(r.criterion_results, key=lambda c: c.criterion):
            usage = c.token_usage
            results.append(
                (
                    r.eval_id,
                    trace_id,
                    c.criterion,
                    c.score,
                    c.passed,
                    c.threshold,
                    c.skipped,
                    c.error,
                    c.reason,
                    c.details,
                    usage.input_tokens,
                    usage.output_tokens,
                    usage.cost_usd,
                )
            )
    return cases, results


def _stored_rows(store: TraceStore, run_id: str) -> tuple[list[tuple], list[tuple]]:
    cases = store.query(
        "SELECT eval_id, name, trace_id, trace_ids, passed, error, mean_score, duration_s, actual_response, "
        "tool_names, node_visits FROM eval_case_results WHERE run_id = ? ORDER BY eval_id",
        [run_id],
    ).rows
    results = store.query(
        "SELECT eval_id, trace_id, criterion, score, passed, threshold, skipped, error, reason, details, "
        "input_tokens, output_tokens, cost_usd FROM eval_results WHERE run_id = ? ORDER BY eval_id, criterion",
        [run_id],
    ).rows
    cases = [(*row[:3], json.loads(row[3]), *row[4:9], json.loads(row[9]), json.loads(row[10])) for row in cases]
    results = [(*row[:9], json.loads(row[9]), *row[10:]) for row in results]
    return cases, results


def test_each_row_schema_has_the_columns_of_its_table(store: TraceStore) -> None:
    for table, schema in _ROW_SCHEMAS.items():
        columns = store.query(
            "SELECT column_name FROM information_schema.columns WHERE table_name = ? ORDER BY ordinal_position",
            [table],
        ).rows
        assert [c for (c,) in columns] == [*schema.names, "tenant"], table


def test_a_run_larger_than_any_chunk_is_stored_value_for_value(store: TraceStore) -> None:
    report = _report(1_200)  # 1,202 cases, 3,602 result rows: more than one statement's worth before
    assert record_report(store, report, "eval_set", "run-big") == "run-big"
    assert _stored_rows(store, "run-big") == _expected_rows("run-big", report)
    run = store.query(
        "SELECT kind, eval_set_id, eval_set_name, total_cases, passed_cases, failed_cases, error_cases, pass_rate, "
        "config, metadata FROM eval_runs WHERE run_id = 'run-big'"
    ).rows
    s = report.summary
    assert run == [
        (
            "eval_set",
            "orders",
            "Order support",
            s.total_cases,
            s.passed_cases,
            s.failed_cases,
            s.error_cases,
            s.pass_rate,
            json.dumps(report.config_used),
            json.dumps(report.metadata),
        )
    ]
    assert load_run(store, "run-big").model_dump(exclude={"timestamp"}) == report.model_dump(exclude={"timestamp"})


def test_recording_again_replaces_every_row(store: TraceStore) -> None:
    record_report(store, _report(600), "eval_set", "run-a")
    regraded = _report(600)
    for case in regraded.results:
        for c in case.criterion_results:
            c.score, c.passed = 0.0, False
    record_report(store, regraded, "eval_set", "run-a")
    assert _stored_rows(store, "run-a") == _expected_rows("run-a", regraded)
    assert store.query("SELECT count(*) FROM eval_runs").rows == [(1,)]


def _case(run_id: str, eval_id: str, criteria: dict[str, float]) -> dict[str, pa.Table]:
    """The rows of one case with a result per criterion (a score each), as ``write_records`` takes them."""
    results = [
        [run_id, eval_id, None, name, score, True, 0.5, False, None, None, "{}", 0, 0, 0.0]
        for name, score in criteria.items()
    ]
    case = [run_id, eval_id, eval_id, None, "[]", True, None, 1.0, 0.1, "ok", "[]", "[]"]
    return {
        "eval_results": with_tenant(_columns("eval_results", [list(column) for column in zip(*results)]), "t"),
        "eval_case_results": with_tenant(_columns("eval_case_results", [[value] for value in case]), "t"),
    }


def _scores(store: TraceStore) -> list[tuple]:
    return store.query("SELECT run_id, eval_id, criterion, score FROM eval_results ORDER BY ALL").rows


def test_write_records_replaces_rows_by_key_and_a_case_results_whole(store: TraceStore) -> None:
    store.write_records(_case("r", "a", {"x": 0.1, "y": 0.2}))
    store.write_records(_case("r", "b", {"x": 0.3}))
    store.write_records(_case("r", "a", {"y": 0.9}))  # graded again, with one criterion fewer
    assert _scores(store) == [("r", "a", "y", 0.9), ("r", "b", "x", 0.3)]
    assert store.query("SELECT count(*) FROM eval_case_results").rows == [(2,)]
    store.write_records({name: rows.slice(0, 0) for name, rows in _case("r", "c", {"x": 1.0}).items()})
    assert _scores(store) == [("r", "a", "y", 0.9), ("r", "b", "x", 0.3)]


def test_write_records_is_all_or_nothing(store: TraceStore) -> None:
    store.write_records(_case("r", "a", {"x": 0.1}))
    broken = _case("r", "a", {"x": 0.7})
    broken["eval_case_results"] = broken["eval_case_results"].set_column(
        1, "eval_id", pa.array([None], pa.string())
    )  # a NULL in the key: refused, and the results written before it in the same call with it
    with pytest.raises(StoreError, match="recording grading results"):
        store.write_records(broken)
    assert _scores(store) == [("r", "a", "x", 0.1)]


def test_write_records_is_durable_on_return_without_a_wal(tmp_path: Path) -> None:
    path = tmp_path / "nowal.duckdb"
    script = (
        "import os\n"
        "from tests.test_run_recording_batch import _case\n"
        "from tracegrade.store import TraceStore\n"
        f"store = TraceStore({str(path)!r}, wal=False)\n"
        "store.write_records(_case('r', 'a', {'x': 0.5}))\n"
        "os._exit(0)  # no close: only what write_records made durable survives\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120, cwd=Path(__file__).parents[1])
    with TraceStore(path, wal=False) as reopened:
        assert _scores(reopened) == [("r", "a", "x", 0.5)]


def test_write_records_is_refused_on_a_read_only_store(tmp_path: Path) -> None:
    path = tmp_path / "store.duckdb"
    TraceStore(path).close()
    with TraceStore(path, read_only=True) as reader, pytest.raises(StoreError, match="read-only"):
        reader.write_records(_case("r", "a", {"x": 0.5}))
