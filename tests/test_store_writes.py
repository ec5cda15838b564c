"""The writer's fast paths: group writes of prepared Arrow batches, monotonic stamps, rebuilds mapped in
the child process, early rebuilds of rooted traces — each checked against the plain path (the store
mapping in-process)."""

from __future__ import annotations

import json

import duckdb
import pytest

from tracegrade.store import StoreWriter, TraceStore
from tracegrade.store.database import BULK_FREE_FLUSH
from tracegrade.store.prepared import prepare_write
from tracegrade.store.rows import compress_json, decompress_json, decompress_json_many
from tracegrade.store.tenancy import DEFAULT_TENANT

from .support.store_records import FIXTURES, decode_fixture, make_span, trace_hex
from .test_store_writer import _WAIT_SECONDS, wait_for

_TRAJECTORY_COUNTS = (
    "SELECT (SELECT count(*) FROM node_visits), (SELECT count(*) FROM tool_calls), (SELECT count(*) FROM llm_calls)"
)


# ------------------------------------------------------------------------------------ TraceStore


def test_write_batch_is_one_insert_and_credits_the_first_submission_of_a_span(tmp_path):
    with TraceStore(tmp_path / "s.duckdb") as store:
        store.write([make_span(1, 1)])
        first = [make_span(1, 1), make_span(1, 2, parent=1)]  # span 1 already stored
        second = [make_span(1, 2, parent=1), make_span(2, 3)]  # span 2 also in the first submission
        written = store.write_batch([prepare_write(first), prepare_write(second)])
        counts = [(r.spans_inserted, r.spans_duplicate, r.trace_ids) for r in written.results]
        assert counts == [(1, 1, {trace_hex(1)}), (1, 1, {trace_hex(2)})]
        assert written.rooted == {
            (DEFAULT_TENANT, trace_hex(2))
        }  # span 3 of trace 2 has no parent; trace 1's root was stored before
        rows = store.query("SELECT DISTINCT received_at FROM spans WHERE span_id <> ?", [f"{1:016x}"]).rows
        assert rows == [(written.received_at,)]


def test_stamps_order_writes_and_rebuilds_exactly(tmp_path):
    with TraceStore(tmp_path / "s.duckdb") as store:
        stamps = [store.write_batch([prepare_write([make_span(1, n)])]).received_at for n in range(1, 20)]
        between = store.stamp()
        later = store.write_batch([prepare_write([make_span(1, 99)])]).received_at
        assert stamps == sorted(set(stamps)) and stamps[-1] < between < later


def test_read_write_store_runs_duckdb_on_one_thread_and_readers_keep_the_default(tmp_path):
    path = tmp_path / "s.duckdb"
    with TraceStore(path) as store:
        assert store._run("SELECT current_setting('threads')", None, check=False).rows == [(1,)]
    with TraceStore(path, threads=2) as store:
        assert store._run("SELECT current_setting('threads')", None, check=False).rows == [(2,)]


def test_read_write_store_hands_bulk_frees_back_to_the_system(tmp_path):
    setting = "SELECT current_setting('allocator_bulk_deallocation_flush_threshold')"
    reference = duckdb.connect()  # how this DuckDB renders the value the store sets (1MB -> 976.5 KiB)
    reference.execute(f"SET allocator_bulk_deallocation_flush_threshold = '{BULK_FREE_FLUSH}'")
    with TraceStore(tmp_path / "s.duckdb") as store:
        assert store._run(setting, None, check=False).rows == reference.execute(setting).fetchall()


# --------------------------------------------------------------------------------- StoreWriter


def _rows(store_or_writer, trace_id: str) -> tuple:
    execution = store_or_writer.query("SELECT execution, span_count FROM traces WHERE trace_id = ?", [trace_id]).rows
    return json.loads(decompress_json(execution[0][0])), execution[0][1]


@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda p: p.name.split(".otlp")[0])
def test_rows_mapped_in_the_child_process_equal_rows_mapped_in_process(tmp_path, fixture):
    spans, logs = decode_fixture(fixture)
    trace_id = spans[0].trace_id
    writer = StoreWriter(TraceStore(tmp_path / "w.duckdb"), settle_seconds=0.05)
    writer.start()
    try:
        writer.submit(list(reversed(spans)), logs).result(timeout=_WAIT_SECONDS)  # arrival order differs
        wait_for(lambda: writer.query("SELECT count(*) FROM traces").rows == [(1,)], "the rebuild")
        from_child = _rows(writer, trace_id), writer.query(_TRAJECTORY_COUNTS).rows
    finally:
        writer.close()
    with TraceStore(tmp_path / "plain.duckdb") as store:
        store.write(spans, logs)
        store.rebuild_trajectories([trace_id])
        assert from_child == (_rows(store, trace_id), store.query(_TRAJECTORY_COUNTS).rows)


def test_rooted_trace_is_rebuilt_without_waiting_to_settle_and_again_after_a_late_span(tmp_path):
    spans, logs = decode_fixture(FIXTURES[0])
    trace_id = spans[0].trace_id
    root = next(s for s in spans if not s.parent_span_id)
    children = [s for s in spans if s is not root]
    writer = StoreWriter(TraceStore(tmp_path / "w.duckdb"), settle_seconds=3600, root_settle_seconds=0.05)
    writer.start()
    try:
        writer.submit([make_span(77, 1, parent=2)]).result(timeout=_WAIT_SECONDS)  # rootless: waits an hour
        writer.submit([root, *children[:-1]], logs).result(timeout=_WAIT_SECONDS)
        wait_for(lambda: writer.query("SELECT count(*) FROM traces WHERE trace_id = ?", [trace_id]).rows == [(1,)],
                 "the rooted trace's rebuild")  # fmt: skip
        assert writer.query("SELECT count(*) FROM traces WHERE trace_id = ?", [trace_hex(77)]).rows == [(0,)]
        writer.close()  # drains (the rootless trace is rebuilt now); then a late span after a restart
        writer = StoreWriter(TraceStore(tmp_path / "w.duckdb"), settle_seconds=0.05, root_settle_seconds=0.05)
        writer.start()
        writer.submit(children[-1:]).result(timeout=_WAIT_SECONDS)
        wait_for(lambda: _rows(writer, trace_id)[1] == len(spans), "the rebuild after the late span")
        counts = writer.query(_TRAJECTORY_COUNTS).rows
    finally:
        writer.close()
    with TraceStore(tmp_path / "w.duckdb", read_only=True) as store:
        assert store.query("SELECT count(*) FROM traces").rows == [(2,)]
        assert store.query(_TRAJECTORY_COUNTS).rows == counts  # the second rebuild replaced, not added
    with TraceStore(tmp_path / "plain.duckdb") as store:
        store.write(spans, logs)
        store.rebuild_trajectories([trace_id])
        assert store.query(_TRAJECTORY_COUNTS).rows == counts


def test_many_small_traces_are_each_rebuilt_once(tmp_path):
    writer = StoreWriter(TraceStore(tmp_path / "w.duckdb"), settle_seconds=0.01, max_rebuild_traces=5000)
    writer.start()
    try:
        for n in range(1, 41):  # 40 batches, each settling while the next ones are written
            writer.submit([make_span(n * 1000 + t, t, name=f"run {n}") for t in range(50)]).result(
                timeout=_WAIT_SECONDS
            )
        wait_for(lambda: writer.query("SELECT count(*) FROM traces").rows == [(2000,)], "every rebuild")
        # the rebuilder counts a job after committing its rows: wait for the counters to settle too
        wait_for(lambda: writer.stats["pending_rebuilds"] == 0, "the rebuild counters")
        stats = writer.stats
        assert stats["spans_written"] == 2000 and stats["rebuild_errors"] == 0
        assert stats["traces_rebuilt"] == 2000
    finally:
        writer.close()


def test_a_failed_rebuild_is_retried(tmp_path):
    writer = StoreWriter(TraceStore(tmp_path / "w.duckdb"), settle_seconds=0.05)
    writer.start()
    try:
        writer.store.execute_write("ALTER TABLE traces RENAME TO traces_away")  # replacing rows fails
        writer.submit([make_span(3, 1)]).result(timeout=_WAIT_SECONDS)
        wait_for(lambda: writer.stats["rebuild_errors"] >= 1, "a failed rebuild")
        assert writer.query("SELECT count(*) FROM traces_away").rows == [(0,)]
        writer.store.execute_write("ALTER TABLE traces_away RENAME TO traces")
        wait_for(lambda: writer.query("SELECT count(*) FROM traces").rows == [(1,)], "the retried rebuild")
    finally:
        writer.close()


def test_compressed_json_columns_decompress_together_as_one_by_one() -> None:
    texts = ['{"a": 1}', "", '{"b": "' + "x" * 5000 + '"}', '["é", "ü"]']
    blobs = [compress_json(t) for t in texts]
    assert decompress_json_many(blobs) == [decompress_json(b) for b in blobs] == [t.encode() for t in texts]
    assert decompress_json_many(blobs[2:3]) == [texts[2].encode()]
    assert decompress_json_many([]) == []
