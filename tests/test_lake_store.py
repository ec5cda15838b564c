"""The DuckLake store against a real PostgreSQL catalog: schema, writes, dedupe, trajectories, read-only opens."""

from __future__ import annotations

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
from tracegrade.store.schema import SCHEMA_VERSION, TABLES

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
    location, data = lake
    first = LakeStore(location, data_path=data)
    second = LakeStore(location, data_path=data)  # another receiver on the same lake
    try:
        written = first.write(_agent_trace(1) + _agent_trace(2), [_log(1, "hello")])
        assert (written.spans_inserted, written.logs_inserted) == (6, 1)
        again = first.write(_agent_trace(1), [_log(1, "hello")])  # the same writer finds its stored copies
        assert (again.spans_inserted, again.spans_duplicate, again.logs_inserted) == (0, 3, 0)
        # a second receiver racing the first: both copies are stored, one is visible
        second.write(_agent_trace(2) + _agent_trace(3), [_log(1, "hello"), _log(3, "bye")])
        raw = first.query("SELECT count(*) FROM raw.spans").rows[0][0]
        assert raw == 9
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


def test_trajectories_rebuilt_by_two_builders_show_once(lake: tuple[str, Path], tmp_path: Path) -> None:
    location, data = lake
    spans = _agent_trace(1) + _agent_trace(2)
    first = LakeStore(location, data_path=data)
    second = LakeStore(location, data_path=data)
    try:
        first.write(spans)
        assert sorted(first.stale_trajectories()) == [trace_hex(1), trace_hex(2)]
        assert first.rebuild_trajectories([trace_hex(1), trace_hex(2)]) == 2
        assert second.rebuild_trajectories([trace_hex(1)]) == 1  # a second builder of the same trace
        assert first.stale_trajectories() == []
        with TraceStore(tmp_path / "file.duckdb") as file_store:  # the same spans in a file store
            file_store.write(spans)
            file_store.rebuild_trajectories([trace_hex(1), trace_hex(2)])
            for table in ("traces", "node_visits", "tool_calls", "llm_calls"):
                columns = "trace_id, seq, name" if table in ("node_visits", "tool_calls") else "*"
                if table == "traces":
                    columns = "trace_id, root_name, status, span_count, llm_calls, tool_calls, node_visits"
                elif table == "llm_calls":
                    columns = "trace_id, seq, span_id"
                sql = f"SELECT {columns} FROM {table} ORDER BY ALL"
                assert second.query(sql).rows == file_store.query(sql).rows, table
        assert first.query("SELECT count(*) FROM raw.traces").rows == [(2,)]  # the replaced build is gone
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
