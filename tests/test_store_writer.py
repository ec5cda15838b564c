"""StoreWriter: queueing, back-pressure, coalescing, late-span rebuilds, threads, and SIGKILL safety."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tracegrade.errors import StoreError
from tracegrade.store import QueueFull, StoreWriter, TraceStore, open_store_for_read
from tracegrade.store.prepared import prepare_write
from tracegrade.store.tenancy import DEFAULT_TENANT

from .support.small_fs import fill, small_filesystem
from .support.store_crash_writer import SPANS_PER_BATCH
from .support.store_records import FIXTURES, decode_fixture, make_span, trace_hex

_WAIT_SECONDS = 30.0  # generous upper bound for background work on a busy machine (not a timing assertion)


def wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + _WAIT_SECONDS
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


@pytest.fixture
def writer(tmp_path):
    started = StoreWriter(TraceStore(tmp_path / "w.duckdb"), settle_seconds=0.1)
    started.start()
    yield started
    started.close()


def test_submit_resolves_after_commit_and_stats_count(writer):
    first = writer.submit([make_span(1, 1), make_span(1, 2)]).result(timeout=_WAIT_SECONDS)
    second = writer.submit([make_span(1, 2)]).result(timeout=_WAIT_SECONDS)
    assert (first.spans_inserted, second.spans_inserted, second.spans_duplicate) == (2, 0, 1)
    assert writer.query("SELECT count(*) FROM spans").rows == [(2,)]
    stats = writer.stats
    assert (stats["spans_written"], stats["spans_duplicate"], stats["submissions"]) == (2, 1, 2)
    assert stats["transactions"] >= 1 and stats["avg_write_seconds"] > 0
    assert stats["queue_depth"] == 0 == writer.queue_depth


def test_late_span_triggers_a_rebuild(writer):
    spans, logs = decode_fixture(FIXTURES[-1])
    trace_id = spans[0].trace_id
    early, late = spans[:-1], spans[-1:]
    writer.submit(early, logs).result(timeout=_WAIT_SECONDS)

    def span_count() -> int | None:
        rows = writer.query("SELECT span_count FROM traces WHERE trace_id = ?", [trace_id]).rows
        return rows[0][0] if rows else None

    wait_for(lambda: span_count() == len(early), "the first rebuild")
    writer.submit(late).result(timeout=_WAIT_SECONDS)
    wait_for(lambda: span_count() == len(spans), "the rebuild after the late span")
    wait_for(lambda: writer.stats["traces_rebuilt"] >= 2, "the rebuild count")


def test_close_drains_queue_and_rebuilds_pending_trajectories(tmp_path):
    path = tmp_path / "drain.duckdb"
    writer = StoreWriter(TraceStore(path), settle_seconds=3600)  # rebuilds never due on their own
    writer.start()
    futures = [writer.submit([make_span(t, t * 10 + i) for i in range(5)]) for t in range(1, 21)]
    writer.close(drain=True)
    assert all(f.result(timeout=0).spans_inserted == 5 for f in futures)
    with TraceStore(path, read_only=True) as store:
        assert store.query("SELECT count(*) FROM spans").rows == [(100,)]
        assert store.query("SELECT count(*) FROM traces").rows == [(20,)]
    with pytest.raises(StoreError, match="not running"):
        writer.submit([make_span(1, 1)])


def test_close_with_no_time_for_rebuilds_stores_every_span_and_leaves_rebuilds_to_the_next_start(tmp_path):
    path = tmp_path / "hurried.duckdb"
    writer = StoreWriter(TraceStore(path), settle_seconds=3600, max_rebuild_traces=1)  # one job per trace
    writer.start()
    futures = [writer.submit([make_span(t, t * 10 + i) for i in range(5)]) for t in range(1, 21)]
    writer.close(drain=True, rebuild_seconds=0)  # a job may be under way; none starts after the deadline
    assert all(f.result(timeout=0).spans_inserted == 5 for f in futures)
    with TraceStore(path) as store:
        assert store.query("SELECT count(*) FROM spans").rows == [(100,)]
        assert store.query("SELECT count(*) FROM traces").rows[0][0] <= 1
        assert len(store.stale_trajectories()) >= 19
    writer = StoreWriter(TraceStore(path), settle_seconds=3600)
    writer.start()  # rebuilds what was left
    try:
        wait_for(lambda: writer.query("SELECT count(*) FROM traces").rows == [(20,)], "the rebuilds left over")
    finally:
        writer.close()


def test_stale_trajectories_are_rebuilt_when_the_writer_starts(tmp_path):
    path = tmp_path / "stale.duckdb"
    with TraceStore(path) as store:
        store.write([make_span(5, 1)])  # written, never mapped (as if the writer was killed)
    writer = StoreWriter(TraceStore(path), settle_seconds=3600)
    writer.start()
    wait_for(lambda: writer.query("SELECT count(*) FROM traces").rows == [(1,)], "the start-up rebuild")
    writer.close()


def test_pending_rebuilds_beyond_the_limit_are_read_back_from_the_store(tmp_path):
    writer = StoreWriter(
        TraceStore(tmp_path / "bounded.duckdb"), settle_seconds=0.05, max_pending_rebuilds=4, max_rebuild_traces=3
    )
    pending: list[int] = []
    writer.start()
    future = writer.submit([make_span(t, t * 10 + i) for t in range(1, 16) for i in range(2)])  # 15 traces at once
    assert future.result(timeout=_WAIT_SECONDS).spans_inserted == 30
    try:
        deadline = time.monotonic() + _WAIT_SECONDS
        while writer.query("SELECT count(*) FROM traces").rows != [(15,)]:
            pending.append(writer.stats["pending_rebuilds"])
            assert time.monotonic() < deadline, "the traces beyond the limit were never rebuilt"
            time.sleep(0.01)
        assert writer.store.stale_trajectories() == []
    finally:
        writer.close()
    assert max(pending, default=0) <= 4 + 3  # the dirty queues, plus the job being mapped


def test_the_start_up_scan_keeps_only_as_many_stale_traces_as_the_limit_and_rebuilds_the_rest(tmp_path):
    path = tmp_path / "stale-many.duckdb"
    with TraceStore(path) as store:
        store.write([make_span(t, t * 10) for t in range(1, 11)])  # never mapped
        assert store.stale_trajectories(limit=3) == [(DEFAULT_TENANT, trace_hex(t)) for t in (1, 2, 3)]  # oldest first
    writer = StoreWriter(TraceStore(path), settle_seconds=3600, max_pending_rebuilds=3, max_rebuild_traces=2)
    writer.start()
    try:
        assert writer.stats["pending_rebuilds"] <= 3
        wait_for(lambda: writer.query("SELECT count(*) FROM traces").rows == [(10,)], "every stale trace rebuilt")
    finally:
        writer.close()


def test_a_refused_submission_is_told_to_retry_once_its_room_frees_up(tmp_path):
    store = TraceStore(tmp_path / "retry.duckdb")
    writer = StoreWriter(store, max_queue_spans=30_000)
    writer.start()
    try:
        with store._write_lock:  # the writer thread blocks in its first transaction meanwhile
            writer.submit([make_span(1, 1)])
            wait_for(lambda: writer.queue_depth == 0, "the writer to take the first submission")
            for n in range(2, 31):
                writer.submit([make_span(n, n * 10_000 + i) for i in range(1000)])  # 29,000 queued
            with pytest.raises(QueueFull) as caught:
                writer.submit([make_span(99, 990_000 + i) for i in range(2000)])
        # 1,000 records too many free up in a tenth of a second at the assumed 10,000 records/s; the whole
        # queue would take 2.9 s
        assert caught.value.queued == 29_000
        assert caught.value.retry_after == 0.25
    finally:
        writer.close(rebuild_seconds=0)


def test_queue_over_capacity_raises_queue_full(tmp_path):
    store = TraceStore(tmp_path / "full.duckdb")
    writer = StoreWriter(store, max_queue_spans=5)
    writer.start()
    accepted = []
    with store._write_lock:  # the writer thread blocks in its first transaction meanwhile
        with pytest.raises(QueueFull) as caught:
            for n in range(1, 4):
                accepted.append(writer.submit([make_span(n, n * 10 + i) for i in range(3)]))
        assert caught.value.retry_after >= 0.25
        assert caught.value.capacity == 5
        assert "retry in" in str(caught.value)
    assert 1 <= len(accepted) <= 2
    for future in accepted:
        assert future.result(timeout=_WAIT_SECONDS).spans_inserted == 3
    writer.close()


def test_a_submission_larger_than_the_queue_is_accepted_when_the_queue_is_empty(tmp_path):
    writer = StoreWriter(TraceStore(tmp_path / "small.duckdb"), max_queue_spans=2)
    writer.start()
    result = writer.submit([make_span(1, i) for i in range(5)]).result(timeout=_WAIT_SECONDS)
    assert result.spans_inserted == 5
    writer.close()


def test_concurrent_submissions_from_threads(writer):
    threads_count, per_thread, batch = 6, 6, 20
    errors: list[BaseException] = []
    results = []
    lock = threading.Lock()

    def produce(worker: int) -> None:
        try:
            for n in range(per_thread):
                # every worker also re-sends the spans of worker 0's batch n: duplicates across threads
                spans = [make_span(1000 + worker, worker * 10_000 + n * 100 + i) for i in range(batch)]
                spans += [make_span(1000, n * 100 + i) for i in range(3)]
                future = writer.submit(spans)
                with lock:
                    results.append(future.result(timeout=_WAIT_SECONDS))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=produce, args=(w,)) for w in range(threads_count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    unique = threads_count * per_thread * batch  # worker 0's own spans already include the re-sent ones
    total_sent = threads_count * per_thread * (batch + 3)
    assert sum(r.spans_inserted for r in results) == unique
    assert sum(r.spans_duplicate for r in results) == total_sent - unique
    assert writer.query("SELECT count(*), count(DISTINCT (trace_id, span_id)) FROM spans").rows == [(unique, unique)]
    assert writer.stats["spans_written"] == unique


def test_queries_from_other_threads_while_writing(writer):
    stop = threading.Event()
    seen: list[int] = []

    def read() -> None:
        while not stop.is_set():
            seen.append(writer.query("SELECT count(*) FROM spans").rows[0][0])

    reader = threading.Thread(target=read)
    reader.start()
    for n in range(12):
        writer.submit([make_span(n, n * 100 + i) for i in range(10)]).result(timeout=_WAIT_SECONDS)
    stop.set()
    reader.join()
    assert seen and seen == sorted(seen) and seen[-1] <= 120
    assert writer.query("SELECT count(*) FROM spans").rows == [(120,)]


def test_sigkill_mid_load_keeps_every_acknowledged_span_exactly_once(tmp_path):
    path = tmp_path / "crash.duckdb"
    script = Path(__file__).parent / "support" / "store_crash_writer.py"
    process = subprocess.Popen([sys.executable, str(script), str(path)], stdout=subprocess.PIPE, text=True)
    acked: list[int] = []
    try:
        for line in process.stdout:  # type: ignore[union-attr]
            acked.append(int(line.split()[1]))
            if len(acked) == 40:
                break
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=_WAIT_SECONDS)
        acked += [int(line.split()[1]) for line in process.stdout if line.startswith("ack")]  # type: ignore[union-attr]
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == -signal.SIGKILL
    for reopen in (lambda: open_store_for_read(path), lambda: TraceStore(path)):
        with reopen() as store:
            rows = store.query("SELECT trace_id, count(*), count(DISTINCT span_id) FROM spans GROUP BY trace_id").rows
            per_trace = {trace: (total, distinct) for trace, total, distinct in rows}
            for batch in acked:
                assert per_trace.get(trace_hex(batch)) == (SPANS_PER_BATCH, SPANS_PER_BATCH), batch
            duplicates = store.query("SELECT count(*) - count(DISTINCT (trace_id, span_id)) FROM spans").rows
            assert duplicates == [(0,)]


def test_without_wal_a_write_is_durable_only_after_the_checkpoint_that_follows_its_commit(tmp_path):
    store = TraceStore(tmp_path / "nowal.duckdb", wal=False)
    assert not store.wal
    writer = StoreWriter(store, settle_seconds=0.1)
    writer.start()
    durable = threading.Event()
    try:
        result = writer.submit_prepared(prepare_write([make_span(5, 1)]), durable.set).result(timeout=_WAIT_SECONDS)
        assert result.spans_inserted == 1
        assert writer.query("SELECT count(*) FROM spans").rows == [(1,)]  # committed: visible at once
        assert durable.wait(_WAIT_SECONDS), "when_durable was never called"
        assert store.uncheckpointed_since is None  # ... and called after the checkpoint
    finally:
        writer.close()


_NO_WAL_CRASH = """
import sys, time
sys.path.insert(0, {root!r})
from tests.support.store_records import make_span
from tracegrade.store import TraceStore
store = TraceStore(sys.argv[1], wal=False)
store.write([make_span(1, n) for n in range(1, 4)])
store.checkpoint()
store.write([make_span(2, n) for n in range(1, 4)])
print("ready", flush=True)
time.sleep(60)
"""


def test_without_wal_a_crash_loses_exactly_what_was_committed_after_the_last_checkpoint(tmp_path):
    path = tmp_path / "nowal-crash.duckdb"
    code = _NO_WAL_CRASH.format(root=str(Path(__file__).resolve().parents[1]))
    process = subprocess.Popen([sys.executable, "-c", code, str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None and process.stdout.readline().strip() == "ready"
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=_WAIT_SECONDS)
    finally:
        if process.poll() is None:
            process.kill()
    with TraceStore(path) as store:  # the receiver's journal replays the lost commits; here nothing does
        rows = store.query("SELECT trace_id, count(*) FROM spans GROUP BY trace_id").rows
    assert rows == [(trace_hex(1), 3)]


def test_a_store_that_duckdb_invalidated_refuses_writes_with_a_clear_error(tmp_path):
    # A checkpoint that fails on a full disk makes DuckDB invalidate the database (DuckDB 1.x also does when the
    # checkpoint runs out of memory; DuckDB 2 checkpoints 20,000 spans of 2 KB within 24MB).
    # No rebuilds here: DuckDB 1.5 can abort the process when a read races that failure.
    with small_filesystem(tmp_path / "fs", "32m") as mount:
        store = TraceStore(mount / "small.duckdb", wal=False)
        writer = StoreWriter(store, settle_seconds=1e6, root_settle_seconds=1e6)
        writer.start()
        durable = threading.Event()
        try:
            writer.submit([make_span(1, 1)]).result(timeout=_WAIT_SECONDS)
            fill(mount)
            for batch in range(2, 6):
                spans = [make_span(batch, n, attributes={"payload": "x" * 2000 + str(n)}) for n in range(1, 1001)]
                writer.submit_prepared(prepare_write(spans), durable.set)
            wait_for(lambda: store.failure is not None, "the failed checkpoint")
            assert "invalidated" in store.failure and "No space left on device" in store.failure
            with pytest.raises(StoreError, match="until it is reopened"):
                writer.submit([make_span(99, 1)])
            assert not durable.is_set()  # nothing was reported durable: the journal would keep it all
        finally:
            writer.close()


def test_a_lone_write_that_runs_out_of_memory_fails_the_store_so_its_owner_replays_it(tmp_path):
    # 12MB cannot hold one submission of 5,000 spans with 4 KB attributes. Nothing is wrong with the records,
    # so the store is marked failed: a receiver then reopens it and replays them from its journal, instead of
    # leaving acknowledged records unwritten (invisible) until its next start.
    store = TraceStore(tmp_path / "small.duckdb", memory_limit="12MB")
    writer = StoreWriter(store, settle_seconds=0.05)
    writer.start()
    try:
        spans = [make_span(t, t * 10 + i, attributes={"blob": "x" * 4000}) for t in range(1, 1001) for i in range(5)]
        with pytest.raises(StoreError, match="ran out of memory"):
            writer.submit(spans).result(timeout=_WAIT_SECONDS)
        assert store.failure is not None and "a write ran out of memory" in store.failure
        assert writer.stats["write_errors"] == 1
        with pytest.raises(StoreError, match="until it is reopened"):
            writer.submit([make_span(99, 1)])
    finally:
        writer.close()
