"""``traces.error_spans`` (schema version 11) and the trace lists' ``span_error`` status: a tool that failed
inside a run that recovered leaves the trace OK, and is still found."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from click.testing import CliRunner

from tests.support import pg_cluster
from tests.support.grading_traces import AgentRun, run_spans
from tests.support.pg_cluster import PgServer
from tracegrade.cli.main import cli
from tracegrade.store import TraceStore
from tracegrade.store.lake import LakeStore
from tracegrade.ui import api, pages

RUNS = [
    AgentRun(1, "Refund?", "Sent.", tools=[("lookup_order", {"id": 1}), ("refund", {"id": 1})]),
    AgentRun(2, "Weather?", "Sunny.", tools=[("forecast", {"city": "Oslo"})], start_offset_s=1),
    AgentRun(3, "Hello", "Hi.", start_offset_s=2),
]
RECOVERED, CLEAN, FAILED = (f"{n:032x}" for n in (1, 2, 3))
pg_server = pg_cluster.pg_server  # the session's PostgreSQL (a fixture)


def _spans() -> list:
    """Trace 1: both tools failed, the run recovered (root OK); trace 3: the run itself failed."""
    spans = []
    for run in RUNS:
        for span in run_spans(run):
            tool = span.attributes.get("tracegrade.span.kind") == "tool"
            if run.trace_no == 1 and tool:
                span = dataclasses.replace(span, status_code="ERROR", status_message="order service timed out")
            elif run.trace_no == 3 and span.parent_span_id is None:
                span = dataclasses.replace(span, status_code="ERROR", status_message="the model refused")
            spans.append(span)
    return spans


def _filled(path: Path | TraceStore) -> TraceStore:
    store = path if isinstance(path, TraceStore) else TraceStore(path)
    store.rebuild_trajectories(sorted(store.write(_spans()).trace_ids))
    return store


def _listed(store: TraceStore, status: str) -> list[str]:
    return sorted(t["trace_id"] for t in api.list_traces(store, api.TraceFilters(status=status))["traces"])


def test_builds_count_failed_spans_and_the_filters_tell_the_run_from_its_spans(tmp_path: Path) -> None:
    with _filled(tmp_path / "store.duckdb") as store:
        counted = dict(store.query("SELECT trace_id, error_spans FROM traces").rows)
        statuses = dict(store.query("SELECT trace_id, status FROM traces").rows)
        assert counted == {RECOVERED: 2, CLEAN: 0, FAILED: 1}
        assert statuses[RECOVERED] != "ERROR" and statuses[FAILED] == "ERROR"
        assert _listed(store, "error") == [FAILED]
        assert _listed(store, "ok") == [RECOVERED, CLEAN]
        assert _listed(store, "span_error") == [RECOVERED, FAILED]
        rows = pages.trace_rows(api.list_traces(store, api.TraceFilters())["traces"], filtered=False)
    recovered_row = next(r for r in rows.split("</tr>") if RECOVERED in r)
    assert "2 spans failed" in recovered_row
    failed_row = next(r for r in rows.split("</tr>") if FAILED in r)
    assert "failed</div>" not in failed_row  # the run's own ERROR badge says it already


def test_migrating_counts_the_failed_spans_of_traces_built_before(tmp_path: Path) -> None:
    path = tmp_path / "old.duckdb"
    with _filled(path) as store:
        built = sorted(store.query("SELECT trace_id, error_spans FROM traces").rows)
        # the store as version 10 left it: the same trajectories, no error_spans column
        store.execute_write("ALTER TABLE traces DROP COLUMN error_spans")
        store.execute_write("DELETE FROM schema_version WHERE version >= 11")
    with TraceStore(path) as store:
        assert sorted(store.query("SELECT trace_id, error_spans FROM traces").rows) == built
        assert _listed(store, "span_error") == [RECOVERED, FAILED]


def test_traces_command_filters_by_span_error(tmp_path: Path) -> None:
    path = tmp_path / "store.duckdb"
    _filled(path).close()
    runner = CliRunner()
    result = runner.invoke(cli, ["traces", "--store", str(path), "--status", "span_error", "--format", "json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert sorted((r["trace_id"], r["error_spans"]) for r in rows) == [(RECOVERED, 2), (FAILED, 1)]
    refused = runner.invoke(cli, ["traces", "--store", str(path), "--status", "broken"])
    assert refused.exit_code == 2 and "'span_error'" in refused.stderr


def test_a_lake_made_before_version_11_gains_the_count_and_new_builds_fill_it(
    pg_server: PgServer, tmp_path: Path
) -> None:
    location = f"ducklake:postgres:{pg_server.new_database()}"
    with LakeStore(location, data_path=tmp_path / "data") as old:  # the lake as version 10 made it
        old._con.execute("ALTER TABLE lake.raw.traces DROP COLUMN error_spans")
        old._con.execute("DELETE FROM lake.main.schema_version WHERE version >= 11")
    with _filled(LakeStore(location, data_path=tmp_path / "data")) as lake:
        assert dict(lake.query("SELECT trace_id, error_spans FROM traces").rows) == {RECOVERED: 2, CLEAN: 0, FAILED: 1}
        assert _listed(lake, "span_error") == [RECOVERED, FAILED]
