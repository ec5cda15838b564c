"""The writer's fast paths: trace cache and Bloom filter, group writes, monotonic stamps, early
rebuilds of rooted traces — each checked against the plain path (reading the store back)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tracegrade.store import StoreWriter, TraceStore
from tracegrade.store.trace_cache import RecentTraces, SeenTraceIds

from .support.store_records import FIXTURES, decode_fixture, make_span, trace_hex
from .test_store_writer import _WAIT_SECONDS, wait_for

_TRAJECTORY_COUNTS = (
    "SELECT (SELECT count(*) FROM node_visits), (SELECT count(*) FROM tool_calls), (SELECT count(*) FROM llm_calls)"
)


# ------------------------------------------------------------------------------- filter and cache


def test_seen_trace_ids_never_forget_an_id_and_rarely_claim_others():
    seen = SeenTraceIds(expected=10_000)
    added = [trace_hex(n) for n in range(0, 20_000, 2)]
    seen.update(added)
    assert all(trace_id in seen for trace_id in added)
    others = [trace_hex(n) for n in range(1, 20_000, 2)]
    false_positives = sum(trace_id in seen for trace_id in others)
    assert false_positives < len(others) // 50


def test_cache_keeps_new_traces_only_and_evicts_the_oldest_over_its_bound():
    seen = SeenTraceIds()
    seen.add(trace_hex(1))  # trace 1 was stored before: the cache cannot know all of it
    cache = RecentTraces(seen, max_bytes=10_000)
    cache.add([make_span(1, 1), make_span(2, 2), make_span(2, 3, parent=2)], [], bytes_per_record=100)
    assert cache.take_for_mapping(trace_hex(1)) is None
    entry = cache.take_for_mapping(trace_hex(2))
    assert entry is not None and [s.span_id for s in entry.spans] == [f"{2:016x}", f"{3:016x}"]
    assert entry.rooted and not entry.has_rows
    again = cache.take_for_mapping(trace_hex(2))
    assert again is not None and again.has_rows  # mapped once: its rows must be replaced next time

    cache.add([make_span(n, n) for n in range(3, 30)], [], bytes_per_record=100)
    assert cache.size_bytes <= cache.max_bytes and cache.evicted > 0
    assert cache.take_for_mapping(trace_hex(2)) is None  # the oldest went first
    assert cache.take_for_mapping(trace_hex(29)) is not None
    cache.add([make_span(2, 4, parent=2)], [], bytes_per_record=100)  # evicted trace: not cached again
    assert cache.take_for_mapping(trace_hex(2)) is None


def test_cached_spans_come_in_store_order():
    cache = RecentTraces(SeenTraceIds(), max_bytes=1_000_000)
    cache.add([make_span(7, 9), make_span(7, 3), make_span(7, 5)], [], bytes_per_record=10)
    entry = cache.take_for_mapping(trace_hex(7))
    assert entry is not None and [s.span_id for s in entry.spans] == [f"{n:016x}" for n in (3, 5, 9)]


# ------------------------------------------------------------------------------------ TraceStore


def test_write_batch_is_one_insert_and_credits_the_first_submission_of_a_span(tmp_path):
    with TraceStore(tmp_path / "s.duckdb") as store:
        store.write([make_span(1, 1)])
        first = [make_span(1, 1), make_span(1, 2)]  # span 1 already stored
        second = [make_span(1, 2), make_span(2, 3)]  # span 2 also in the first submission
        written = store.write_batch([(first, ()), (second, ())])
        counts = [(r.spans_inserted, r.spans_duplicate, r.trace_ids) for r in written.results]
        assert counts == [(1, 1, {trace_hex(1)}), (1, 1, {trace_hex(2)})]
        assert sorted(s.span_id for s in written.spans) == [f"{2:016x}", f"{3:016x}"]
        assert written.bytes_per_record > 0
        rows = store.query("SELECT DISTINCT received_at FROM spans WHERE span_id <> ?", [f"{1:016x}"]).rows
        assert rows == [(written.received_at,)]


def test_stamps_order_writes_and_rebuilds_exactly(tmp_path):
    with TraceStore(tmp_path / "s.duckdb") as store:
        stamps = [store.write_batch([([make_span(1, n)], ())]).received_at for n in range(1, 20)]
        between = store.stamp()
        later = store.write_batch([([make_span(1, 99)], ())]).received_at
        assert stamps == sorted(set(stamps)) and stamps[-1] < between < later


def test_read_write_store_runs_duckdb_on_one_thread_and_readers_keep_the_default(tmp_path):
    path = tmp_path / "s.duckdb"
    with TraceStore(path) as store:
        assert store.query("SELECT current_setting('threads')").rows == [(1,)]
    with TraceStore(path, threads=2) as store:
        assert store.query("SELECT current_setting('threads')").rows == [(2,)]


# --------------------------------------------------------------------------------- StoreWriter


def _rows(store_or_writer, trace_id: str) -> tuple:
    execution = store_or_writer.query("SELECT execution, span_count FROM traces WHERE trace_id = ?", [trace_id]).rows
    return json.loads(execution[0][0]), execution[0][1]


@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda p: p.name.split(".otlp")[0])
def test_rows_mapped_from_the_cache_equal_rows_mapped_from_the_store(tmp_path, fixture):
    spans, logs = decode_fixture(fixture)
    trace_id = spans[0].trace_id
    writer = StoreWriter(TraceStore(tmp_path / "w.duckdb"), settle_seconds=0.05)
    writer.start()
    try:
        writer.submit(list(reversed(spans)), logs).result(timeout=_WAIT_SECONDS)  # arrival order differs
        wait_for(lambda: writer.query("SELECT count(*) FROM traces").rows == [(1,)], "the rebuild")
        from_cache = _rows(writer, trace_id), writer.query(_TRAJECTORY_COUNTS).rows
        assert writer.stats["traces_loaded_for_rebuild"] == 0
    finally:
        writer.close()
    with TraceStore(tmp_path / "plain.duckdb") as store:
        store.write(spans, logs)
        store.rebuild_trajectories([trace_id])
        assert from_cache == (_rows(store, trace_id), store.query(_TRAJECTORY_COUNTS).rows)


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
        writer.submit(children[-1:]).result(timeout=_WAIT_SECONDS)  # its root is cached: soon again
        wait_for(lambda: _rows(writer, trace_id)[1] == len(spans), "the rebuild after the late span")
        assert writer.query("SELECT count(*) FROM traces WHERE trace_id = ?", [trace_hex(77)]).rows == [(0,)]
        counts = writer.query(_TRAJECTORY_COUNTS).rows
    finally:
        writer.close()  # drains: the rootless trace is rebuilt now
    with TraceStore(tmp_path / "w.duckdb", read_only=True) as store:
        assert store.query("SELECT count(*) FROM traces").rows == [(2,)]
        assert store.query(_TRAJECTORY_COUNTS).rows == counts  # the second rebuild replaced, not added
    with TraceStore(tmp_path / "plain.duckdb") as store:
        store.write(spans, logs)
        store.rebuild_trajectories([trace_id])
        assert store.query(_TRAJECTORY_COUNTS).rows == counts


def _late_span_after(tmp_path: Path, *, restart: bool, cache_bytes: int) -> dict:
    """Write a trace, then a late span (after a restart, or past an evicting cache); the stats."""
    path = tmp_path / "late.duckdb"
    early = [make_span(5, n, parent=1) for n in range(2, 6)] + [make_span(5, 1)]
    writer = StoreWriter(TraceStore(path), settle_seconds=0.05, cache_bytes=cache_bytes)
    writer.start()
    writer.submit(early).result(timeout=_WAIT_SECONDS)
    wait_for(lambda: writer.query("SELECT span_count FROM traces").rows == [(5,)], "the first rebuild")
    if restart:
        writer.close()
        writer = StoreWriter(TraceStore(path), settle_seconds=0.05, cache_bytes=cache_bytes)
        writer.start()
    writer.submit([make_span(5, 6, parent=1)]).result(timeout=_WAIT_SECONDS)
    wait_for(lambda: writer.query("SELECT span_count FROM traces").rows == [(6,)], "the rebuild with every span")
    stats = writer.stats
    writer.close()
    return stats


def test_late_span_after_a_restart_maps_the_spans_stored_before(tmp_path):
    stats = _late_span_after(tmp_path, restart=True, cache_bytes=64 * 2**20)
    assert stats["traces_loaded_for_rebuild"] >= 1


def test_late_span_of_an_evicted_trace_maps_every_span(tmp_path):
    stats = _late_span_after(tmp_path, restart=False, cache_bytes=1)
    assert stats["cache_evictions"] >= 1 and stats["traces_loaded_for_rebuild"] >= 1


def test_many_small_traces_are_each_rebuilt_once_from_the_cache(tmp_path):
    writer = StoreWriter(TraceStore(tmp_path / "w.duckdb"), settle_seconds=0.01, max_rebuild_traces=5000)
    writer.start()
    try:
        for n in range(1, 41):  # 40 batches, each settling while the next ones are written
            writer.submit([make_span(n * 1000 + t, t, name=f"run {n}") for t in range(50)]).result(
                timeout=_WAIT_SECONDS
            )
        wait_for(lambda: writer.query("SELECT count(*) FROM traces").rows == [(2000,)], "every rebuild")
        stats = writer.stats
        assert stats["spans_written"] == 2000 and stats["rebuild_errors"] == 0
        assert stats["traces_rebuilt"] == 2000 and stats["traces_loaded_for_rebuild"] == 0
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
