"""How ``record_report`` stores a run: the report without its cases as JSON (its summary queryable in SQL), the
case results as one zstd-compressed JSON array; and runs recorded before that layout still load."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

from tests.support.large_reports import large_report
from tracegrade.evaluation.run_records import list_runs, load_run, record_report
from tracegrade.models.results import EvalReport, NodeDetail
from tracegrade.store import TraceStore
from tracegrade.store.schema import GRADING_TABLES

# eval_runs as tracegrade created it before case_results existed: the whole report in `report`
OLD_EVAL_RUNS_DDL = """
CREATE TABLE eval_runs (
    run_id VARCHAR PRIMARY KEY, created_at TIMESTAMP, kind VARCHAR, eval_set_id VARCHAR, eval_set_name VARCHAR,
    total_cases INTEGER, passed_cases INTEGER, failed_cases INTEGER, error_cases INTEGER, pass_rate DOUBLE,
    config JSON, metadata JSON, report JSON
)
"""


@pytest.fixture
def store(tmp_path: Path):
    with TraceStore(tmp_path / "store.duckdb") as opened:
        yield opened


def _report(cases: int) -> EvalReport:
    """Cases whose results carry what an agent's LLM calls bring: the conversation, and each call's inputs."""
    report = large_report(cases)
    for i, case in enumerate(report.results):
        conversation = [
            {"role": "system", "content": "You answer questions about orders. Be brief and precise."},
            {"role": "user", "content": case.name},
            {"role": "assistant", "content": case.actual_response},
        ]
        case.messages = conversation
        case.node_details = [NodeDetail(node_name="responder", input_messages=conversation[:2], response_text=f"#{i}")]
        case.node_responses = [{"node_name": "responder", "input_messages": conversation[:2], "response_text": f"#{i}"}]
    return report


def _cases_json(blob: bytes) -> list:
    return json.loads(pa.input_stream(pa.py_buffer(blob), compression="zstd").read())


def test_the_summary_is_json_and_the_cases_one_compressed_array(store: TraceStore) -> None:
    report = _report(400)
    record_report(store, report, "eval_set", "run-a")
    summary, results, packed = store.query(
        "SELECT report->'summary'->>'total_cases', report->'results', case_results FROM eval_runs"
    ).rows[0]
    assert (summary, results) == ("400", None)
    assert _cases_json(packed) == [json.loads(case.model_dump_json()) for case in report.results]
    assert len(packed) * 5 < len(report.model_dump_json())
    assert load_run(store, "run-a").model_dump() == report.model_dump()


def test_an_empty_run_is_stored_and_loads(store: TraceStore) -> None:
    empty = EvalReport.create("nothing", [], "Nothing matched")
    record_report(store, empty, "reference_free", "run-empty")
    assert _cases_json(store.query("SELECT case_results FROM eval_runs").rows[0][0]) == []
    assert load_run(store, "run-empty").model_dump() == empty.model_dump()


def test_runs_recorded_before_case_results_existed_still_load(tmp_path: Path) -> None:
    old, new = _report(30), _report(20)
    path = tmp_path / "store.duckdb"
    with TraceStore(path) as before:  # a store from before the grading tables joined the schema (version 7)
        for table in GRADING_TABLES:
            before.execute_write(f"DROP TABLE {table}")
        before.execute_write(OLD_EVAL_RUNS_DDL)
        s = old.summary
        counts = [s.total_cases, s.passed_cases, s.failed_cases, s.error_cases, s.pass_rate]
        before.execute_write(
            "INSERT INTO eval_runs VALUES ('run-old', TIMESTAMP '2026-11-01 10:00:00', 'eval_set', ?, ?, ?, ?, ?, ?, "
            "?, '{}', '{}', ?)",
            [old.eval_set_id, old.eval_set_name, *counts, old.model_dump_json()],
        )
        before.execute_write("DELETE FROM schema_version WHERE version >= 7")
    # migrating adds the case_results column to the old table (7), then the tenant leading its key (8)
    with TraceStore(path) as store:
        record_report(store, new, "eval_set", "run-new")
        assert {r.run_id for r in list_runs(store)} == {"run-old", "run-new"}
        assert load_run(store, "run-old").model_dump() == old.model_dump()
        assert load_run(store, "run-new").model_dump() == new.model_dump()
