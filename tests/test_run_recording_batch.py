"""Recording a run writes each table's rows as one Arrow table (``TraceStore.write_rows``): the rows stored
are value for value the report's, for a run larger than any chunk, and ``write_rows`` keeps the store's
transaction rules (replace or refuse duplicates whole, durable on return without a WAL, refused read-only)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from tests.support.large_reports import large_report
from tracegrade.errors import StoreError
from tracegrade.evaluation.run_records import _ROW_SCHEMAS, ensure_eval_tables, load_run, record_report
from tracegrade.models.results import CriterionResult, EvalCaseResult, EvalReport, TokenUsage
from tracegrade.store import TraceStore

KV_DDL = "CREATE TABLE IF NOT EXISTS kv (k VARCHAR PRIMARY KEY, v BIGINT)"


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
    ensure_eval_tables(store)
    for table, schema in _ROW_SCHEMAS.items():
        columns = store.query(
            "SELECT column_name FROM information_schema.columns WHERE table_name = ? ORDER BY ordinal_position",
            [table],
        ).rows
        assert [c for (c,) in columns] == schema.names, table


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


def test_write_rows_replaces_by_key_or_refuses_the_whole_table(store: TraceStore) -> None:
    store.execute_write(KV_DDL)
    store.write_rows("kv", pa.table({"k": ["a", "b"], "v": [1, 2]}))
    store.write_rows("kv", pa.table({"v": [20, 3], "k": ["b", "c"]}))  # columns by name, not position
    assert store.query("SELECT k, v FROM kv ORDER BY k").rows == [("a", 1), ("b", 20), ("c", 3)]
    with pytest.raises(StoreError, match="writing kv rows"):
        store.write_rows("kv", pa.table({"k": ["d", "a"], "v": [4, 5]}), replace=False)
    assert store.query("SELECT k, v FROM kv ORDER BY k").rows == [("a", 1), ("b", 20), ("c", 3)]
    store.write_rows("kv", pa.table({"k": pa.array([], pa.string()), "v": pa.array([], pa.int64())}))
    assert store.query("SELECT count(*) FROM kv").rows == [(3,)]


def test_write_rows_is_durable_on_return_without_a_wal(tmp_path: Path) -> None:
    path = tmp_path / "nowal.duckdb"
    script = (
        "import os, pyarrow as pa\n"
        "from tracegrade.store import TraceStore\n"
        f"store = TraceStore({str(path)!r}, wal=False)\n"
        f"store.execute_write({KV_DDL!r})\n"
        "store.write_rows('kv', pa.table({'k': ['a', 'b'], 'v': [1, 2]}))\n"
        "os._exit(0)  # no close: only what write_rows made durable survives\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120)
    with TraceStore(path, wal=False) as reopened:
        assert reopened.query("SELECT k, v FROM kv ORDER BY k").rows == [("a", 1), ("b", 2)]


def test_write_rows_is_refused_on_a_read_only_store(tmp_path: Path) -> None:
    path = tmp_path / "store.duckdb"
    with TraceStore(path) as store:
        store.execute_write(KV_DDL)
    with TraceStore(path, read_only=True) as reader, pytest.raises(StoreError, match="read-only"):
        reader.write_rows("kv", pa.table({"k": ["a"], "v": [1]}))
