"""A store whose key did not hold (rows sharing a trace id in ``traces``, the table without its primary key:
what a damaged index persisted by a failed write leaves) is detected when the store opens and rebuilt, so
rebuilds stop failing with "Duplicate key" forever; a receiver started on such a file serves and maps."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import duckdb

from tests.support.server_otlp import post
from tests.support.server_process import ServerProcess
from tests.support.server_requests import query, span_json, traces_json
from tests.support.store_records import make_span, trace_hex
from tracegrade.store import TraceStore


def _damage_traces_key(path: Path, duplicated: list[str]) -> None:
    """Recreate ``traces`` without its primary key and give each of ``duplicated`` a second, older row."""
    con = duckdb.connect(str(path))
    try:
        con.execute("CREATE TABLE traces_copy AS SELECT * FROM traces")
        con.execute("DROP TABLE traces")
        con.execute("CREATE TABLE traces AS SELECT * FROM traces_copy")
        con.execute("DROP TABLE traces_copy")
        for trace_id in duplicated:
            con.execute(
                "INSERT INTO traces SELECT * REPLACE (updated_at - INTERVAL 1 HOUR AS updated_at, 999 AS span_count) "
                "FROM traces WHERE trace_id = ?",
                [trace_id],
            )
    finally:
        con.close()


def _keys_hold(path: Path) -> tuple[int, int, int]:
    """(rows, distinct trace ids, primary-key constraints) of ``traces``."""
    con = duckdb.connect(str(path), read_only=True)
    try:
        rows, keys = con.execute("SELECT count(*), count(DISTINCT trace_id) FROM traces").fetchone()
        (constraints,) = con.execute(
            "SELECT count(*) FROM duckdb_constraints() WHERE table_name = 'traces' AND constraint_type = 'PRIMARY KEY'"
        ).fetchone()
    finally:
        con.close()
    return rows, keys, constraints


def _store_with_traces(path: Path, count: int) -> list[str]:
    with TraceStore(path) as store:
        for trace in range(count):
            store.write([make_span(trace, 1), make_span(trace, 2, parent=1)])
        store.rebuild_trajectories([trace_hex(trace) for trace in range(count)])
    return [trace_hex(trace) for trace in range(count)]


def test_a_store_whose_traces_key_broke_is_rebuilt_when_it_opens(tmp_path: Path, caplog) -> None:
    path = tmp_path / "s.duckdb"
    trace_ids = _store_with_traces(path, 5)
    _damage_traces_key(path, trace_ids[:3])
    assert _keys_hold(path) == (8, 5, 0)
    with caplog.at_level(logging.WARNING), TraceStore(path) as store:
        assert "store table traces was damaged (3 rows share a key with another row)" in caplog.text
        # the newest row of each trace was kept, and the table has its key again
        assert store.query("SELECT DISTINCT span_count FROM traces").rows == [(2,)]
        store.write([make_span(0, 3, parent=1)])
        assert store.rebuild_trajectories(trace_ids) == 5  # no "Duplicate key"
        assert store.query("SELECT span_count FROM traces WHERE trace_id = ?", [trace_ids[0]]).rows == [(3,)]
    assert _keys_hold(path) == (5, 5, 1)


def test_a_store_missing_its_key_is_rebuilt_even_without_duplicates(tmp_path: Path) -> None:
    path = tmp_path / "s.duckdb"
    _store_with_traces(path, 2)
    _damage_traces_key(path, [])
    assert _keys_hold(path) == (2, 2, 0)
    TraceStore(path).close()
    assert _keys_hold(path) == (2, 2, 1)


def test_a_receiver_on_a_damaged_store_serves_and_maps_again(tmp_path: Path) -> None:
    path = tmp_path / "store.duckdb"
    trace_ids = _store_with_traces(path, 4)
    _damage_traces_key(path, trace_ids)
    with ServerProcess(path) as server:
        late = span_json(trace_ids[1], 7, parentSpanId=f"{1:016x}")
        reply = post(f"{server.http_url}/v1/traces", json.dumps(traces_json([late])).encode(), "application/json")
        assert reply.status == 200, reply.body
        deadline = time.monotonic() + 30
        sql = "SELECT span_count FROM traces WHERE trace_id = ?"
        while query(server.http_url, sql, [trace_ids[1]]) != [[3]]:
            assert time.monotonic() < deadline, "the late span's trace was never mapped again"
            time.sleep(0.1)
        assert query(server.http_url, "SELECT count(*), count(DISTINCT trace_id) FROM traces") == [[4, 4]]
        assert "store table traces was damaged" in server.log()
