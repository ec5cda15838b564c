"""The DuckLake store against a real PostgreSQL catalog: schema, writes, dedupe, trajectories, read-only opens."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.support import pg_cluster
from tests.support.pg_cluster import PgServer
from tests.support.store_records import make_span, trace_hex
from tracegrade.errors import QueryRefused, StoreError
from tracegrade.models.span import LogRecordData
from tracegrade.store import StoreWriter, TraceStore
from tracegrade.store.lake import LakeStore
from tracegrade.store.lake_location import redacted
from tracegrade.store.lake_schema import file_schema_columns
from tracegrade.store.prepared import prepare_write
from tracegrade.store.schema import SCHEMA_VERSION, TABLES
from tracegrade.store.tenancy import DEFAULT_TENANT

pg_server = pg_cluster.pg_server  # the session's PostgreSQL (a fixture)


@pytest.fixture
def lake(pg_server: PgServer, tmp_path: Path) -> tuple[str, Path]:
    """A new lake: its location and data path."""
    return f"ducklake:postgres:{pg_server.new_database()}", tmp_path / "lake-data"


def _agent_trace(trace: int) -> list:
    return [
        make_span(trace, trace * 10, name="agent", attributes={"gen_ai.operation.name": "invoke_agent"}),
        make_span(trace, trace * 10 + 1, parent=trace * 10, name="chat", attributes={"gen_ai.operation.name": "chat"}),
        make_span(trace, trace * 10 + 2, parent=trace * 10, name="search", attributes={"gen_ai.tool.name": "search"}),
    ]


def _log(trace: int, body: str) -> LogRecordData:
    return LogRecordData(
        trace_id=trace_hex(trace), span_id=f"{trace * 10:016x}", time_ns=1_760_000_000_000_000_000, body=body
    )


def test_schema_matches_file_store_columns(lake: tuple[str, Path]) -> None:
    location, data = lake
    with LakeStore(location, data_path=data) as store:
        for table, columns in file_schema_columns().items():
            result = store.query(f"SELECT * FROM {table} LIMIT 0")
            assert result.columns == [c.name for c in columns], table
        assert store.query("SELECT max(version) FROM schema_version").rows == [(SCHEMA_VERSION,)]
    assert set(file_schema_columns()) == set(TABLES)


def test_write_read_and_duplicates_across_two_writers(lake: tuple[str, Path]) -> None:
    from tests.support.lake_serve import store_copies_again

    location, data = lake
    first = LakeStore(location, data_path=data)
    second = LakeStore(location, data_path=data)  # another receiver on the same lake
    try:
        written = first.write(_agent_trace(1) + _agent_trace(2), [_log(1, "hello")])
        assert (written.spans_inserted, written.logs_inserted) == (6, 1)
        again = first.write(_agent_trace(1), [_log(1, "hello")])  # the same writer finds its stored copies
        assert (again.spans_inserted, again.spans_duplicate, again.logs_inserted) == (0, 3, 0)
        # another receiver finds what the first committed
        later = second.write(_agent_trace(2) + _agent_trace(3), [_log(1, "hello"), _log(3, "bye")])
        assert (later.spans_inserted, later.logs_inserted) == (3, 1)
        assert first.query("SELECT count(*) FROM raw.spans").rows == [(9,)]
        # two receivers racing on the same spans both store them: stored twice, visible once
        assert store_copies_again(location, "spans", f"trace_id = '{trace_hex(2)}'") == 3
        assert store_copies_again(location, "logs", "true") == 2
        assert first.query("SELECT count(*) FROM raw.spans").rows == [(12,)]
        for store in (first, second):
            assert store.query("SELECT count(*), count(DISTINCT (trace_id, span_id)) FROM spans").rows == [(9, 9)]
            assert store.query("SELECT count(*) FROM logs").rows == [(2,)]
        loaded = second.load_spans([trace_hex(2)])
        assert [s.name for s in loaded[trace_hex(2)]] == ["agent", "chat", "search"]
        spans, logs = second.load_arrow([trace_hex(1), trace_hex(3)])
        assert (spans.num_rows, logs.num_rows) == (6, 2)
    finally:
        first.close()
        second.close()


def test_spans_fresh_from_an_exporter_are_not_looked_up_yet_show_once(lake: tuple[str, Path]) -> None:
    location, data = lake
    sent = _agent_trace(1)
    with LakeStore(location, data_path=data) as store:
        store.write_batch([prepare_write(sent, fresh=True)])
        # an exporter re-sent a request whose acknowledgement it lost: a second copy, not looked up ...
        again = store.write_batch([prepare_write(sent, fresh=True)]).results[0]
        assert (again.spans_inserted, again.spans_duplicate) == (3, 0)
        # ... while a journal replay (or an import) of the same spans is looked up, even beside fresh spans
        replayed = store.write_batch([prepare_write(sent), prepare_write(_agent_trace(2), fresh=True)]).results
        assert [(r.spans_inserted, r.spans_duplicate) for r in replayed] == [(0, 3), (3, 0)]
        assert store.query("SELECT count(*) FROM raw.spans").rows == [(9,)]
        assert store.query("SELECT count(*), count(DISTINCT (trace_id, span_id)) FROM spans").rows == [(6, 6)]
        assert store.rebuild_trajectories([trace_hex(1)]) == 1
        assert store.query("SELECT span_count FROM traces WHERE trace_id = ?", [trace_hex(1)]).rows == [(3,)]


def test_trajectories_rebuilt_by_two_builders_show_once(lake: tuple[str, Path], tmp_path: Path) -> None:
    location, data = lake
    spans = _agent_trace(1) + _agent_trace(2)
    first = LakeStore(location, data_path=data)
    second = LakeStore(location, data_path=data)
    try:
        first.write(spans)
        assert sorted(first.stale_trajectories()) == [(DEFAULT_TENANT, trace_hex(1)), (DEFAULT_TENANT, trace_hex(2))]
        assert first.rebuild_trajectories([trace_hex(1), trace_hex(2)]) == 2
        assert second.rebuild_trajectories([trace_hex(1)]) == 1  # a second builder of the same trace
        assert first.stale_trajectories() == []
        with TraceStore(tmp_path / "file.duckdb") as file_store:  # the same spans in a file store
            file_store.write(spans)
            file_store.rebuild_trajectories([trace_hex(1), trace_hex(2)])
            for table in ("traces", "node_visits", "tool_calls", "llm_calls"):
                columns = "trace_id, seq, name" if table in ("node_visits", "tool_calls") else "*"
                if table == "traces":
                    columns = "trace_id, root_name, status, span_count, llm_calls, tool_calls, node_visits, tool_names"
                elif table == "llm_calls":
                    columns = "trace_id, seq, span_id"
                sql = f"SELECT {columns} FROM {table} ORDER BY ALL"
                assert second.query(sql).rows == file_store.query(sql).rows, table
        assert first.query("SELECT count(*) FROM raw.traces").rows == [(2,)]  # the replaced build is gone
    finally:
        first.close()
        second.close()


def test_evaluation_events_reach_the_lakes_evaluations_once(lake: tuple[str, Path]) -> None:
    from tests.support.lake_serve import store_copies_again

    location, data = lake
    event = LogRecordData(
        trace_id=trace_hex(1),
        span_id=f"{10:016x}",
        time_ns=1_760_000_000_000_000_000,
        event_name="gen_ai.evaluation.result",
        attributes={"gen_ai.evaluation.name": "relevance", "gen_ai.evaluation.score.value": 0.5, "test.case.id": "c"},
    )
    first = LakeStore(location, data_path=data)
    second = LakeStore(location, data_path=data)
    try:
        first.write(_agent_trace(1), [event, _log(1, "not an evaluation")])
        assert second.write([], [event]).logs_inserted == 0  # the other receiver finds it stored: no second row
        assert store_copies_again(location, "evaluations", "true") == 1  # two receivers racing both store it
        first.rebuild_trajectories([trace_hex(1)])
        for store in (first, second):
            rows = store.query(
                "SELECT e.trace_id, e.evaluation_name, e.score_value, e.case_id, e.tenant, t.root_name "
                "FROM evaluations e JOIN traces t USING (tenant, trace_id)"
            ).rows
            assert rows == [(trace_hex(1), "relevance", 0.5, "c", DEFAULT_TENANT, "agent")]
    finally:
        first.close()
        second.close()


def test_store_writer_drives_a_lake(lake: tuple[str, Path]) -> None:
    location, data = lake
    writer = StoreWriter(LakeStore(location, data_path=data), settle_seconds=0.05, root_settle_seconds=0.05)
    writer.start()
    futures = [writer.submit(_agent_trace(n)) for n in range(1, 6)]
    assert sum(f.result(timeout=60).spans_inserted for f in futures) == 15
    writer.close()  # drains: every trajectory is rebuilt
    with LakeStore(location, read_only=True) as reader:
        assert reader.query("SELECT count(*) FROM traces").rows == [(5,)]
        assert reader.query("SELECT count(*) FROM spans").rows == [(15,)]


def test_read_only_open_is_locked_down(lake: tuple[str, Path], tmp_path: Path) -> None:
    location, data = lake
    with LakeStore(location, data_path=data) as store:
        store.write(_agent_trace(1))
    with LakeStore(location, read_only=True) as reader:
        assert reader.data_path == str(data.absolute()) + "/"
        assert reader.query("SELECT count(*) FROM spans").rows == [(3,)]
        with pytest.raises(QueryRefused):
            reader.query("DELETE FROM spans")
        with pytest.raises(QueryRefused):
            reader.query(f"SELECT * FROM read_parquet('{data}/**/*.parquet')")
        with pytest.raises(StoreError, match="read-only"):
            reader.write(_agent_trace(2))


def test_read_only_open_of_an_empty_catalog_says_what_to_do(pg_server: PgServer) -> None:
    location = f"ducklake:postgres:{pg_server.new_database()} password=hunter2"
    with pytest.raises(StoreError) as raised:
        LakeStore(location, read_only=True)
    assert "hunter2" not in str(raised.value)


def test_writing_needs_a_data_path(lake: tuple[str, Path]) -> None:
    with pytest.raises(StoreError, match="--lake-data"):
        LakeStore(lake[0])


def test_redacted_hides_passwords() -> None:
    assert (
        redacted("ducklake:postgres:host=h password=s3cret dbname=d")
        == "ducklake:postgres:host=h password=*** dbname=d"
    )
    assert redacted("ducklake:postgres:postgresql://u:s3cret@h/d") == "ducklake:postgres:postgresql://u:***@h/d"


def test_serve_on_a_lake_survives_sigkill_with_every_acknowledged_span_visible_once(
    lake: tuple[str, Path], tmp_path: Path
) -> None:
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter

    from tests.support.export_load import ExportLoad, make_batches
    from tests.support.lake_serve import LakeServerProcess, lake_span_counts

    location, data = lake
    journal = tmp_path / "receiver-1.journal"
    batches = make_batches(60, 10)
    first = LakeServerProcess(location, data, journal).start(timeout=90)
    loads = [
        ExportLoad(HttpSpanExporter(endpoint=f"{first.http_url}/v1/traces", timeout=30), batches[0::2]),
        ExportLoad(GrpcSpanExporter(endpoint=first.grpc_target, insecure=True, timeout=30), batches[1::2]),
    ]
    for load in loads:
        load.start()
    second = None
    try:
        while sum(load.acked_batches for load in loads) < 12:
            assert any(load.is_alive() for load in loads), "the load finished before the kill"
            time.sleep(0.01)
        first.kill()
        acked_before_kill = {ids for load in loads for ids in load.acked}
        second = LakeServerProcess(location, data, journal, grpc_port=first.grpc_port, http_port=first.http_port)
        second.start(timeout=90)  # replays the journal into the lake, then takes the exporters' retries
        for load in loads:
            load.join(120)
            assert not load.is_alive()
        assert second.terminate() == 0, second.log()
    finally:
        first.kill()
        if second is not None:
            second.kill()

    every_acked = {ids for load in loads for ids in load.acked}
    assert acked_before_kill < every_acked
    visible = lake_span_counts(location)
    assert every_acked <= set(visible), f"{len(every_acked - set(visible))} acknowledged spans lost"
    assert set(visible.values()) == {1}
    with LakeStore(location, read_only=True) as reader:  # the receiver mapped every trace before it stopped
        traces = {trace_id for trace_id, _ in every_acked}
        assert reader.query("SELECT count(*) FROM traces").rows == [(len(traces),)]
        assert reader.stale_trajectories() == []


def test_read_commands_open_a_lake_and_writing_ones_need_its_data_path(lake: tuple[str, Path], tmp_path: Path) -> None:
    from click.testing import CliRunner

    from tracegrade.cli.main import cli

    location, data = lake
    with LakeStore(location, data_path=data) as store:
        store.write(_agent_trace(1) + _agent_trace(2))
    from tests.support.lake_serve import store_copies_again

    assert store_copies_again(location, "spans", f"trace_id = '{trace_hex(1)}'") == 3  # two receivers raced
    runner = CliRunner()
    result = runner.invoke(cli, ["sql", "--store", location, "--format", "csv", "SELECT count(*) AS n FROM spans"])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == ["n", "6"]
    raw = runner.invoke(cli, ["sql", "--store", location, "--format", "csv", "SELECT count(*) AS n FROM raw.spans"])
    assert raw.output.splitlines() == ["n", "9"]
    export = runner.invoke(cli, ["export", "--store", location, "--table", "spans", "-o", str(tmp_path / "out")])
    assert export.exit_code == 0, export.output
    import pyarrow.parquet as pq

    assert pq.read_table(tmp_path / "out" / "spans.parquet").num_rows == 6
    otlp = Path(__file__).parent / "data" / "otlp" / "langgraph_openinference_langchain.otlp.json"
    refused = runner.invoke(cli, ["import", "--store", location, str(otlp)])
    assert refused.exit_code == 2
    assert "importing in a lake needs its data path: add --lake-data PATH" in refused.output
    assert not list(Path.cwd().glob("ducklake:*"))


def test_a_catalog_failing_after_the_attach_is_a_store_error_that_a_reopen_retries(
    lake: tuple[str, Path], pg_server: PgServer
) -> None:
    """The catalog can fail between DuckLake's attach and the open's first reads (PostgreSQL going away, seen as
    a raw DuckDB error that ended a worker's process while it reopened its lake). Reproduced for real with a
    catalog table gone: the open says so as a StoreError, which the worker and receiver retry."""
    location, data = lake
    LakeStore(location, data_path=data).close()
    database = location.rsplit("dbname=", 1)[1]
    pg_server.psql("ALTER TABLE ducklake_table_stats RENAME TO ducklake_table_stats_gone", database)
    with pytest.raises(StoreError, match=f"cannot open lake {location}: .*is PostgreSQL reachable"):
        LakeStore(location, data_path=data)
    pg_server.psql("ALTER TABLE ducklake_table_stats_gone RENAME TO ducklake_table_stats", database)
    LakeStore(location, data_path=data).close()  # back: the next open works
