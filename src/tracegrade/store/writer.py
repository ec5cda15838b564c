"""StoreWriter: the single writer thread in front of a store, owning group commit and checkpoints.

Submissions are converted to Arrow in the submitting thread (``prepare_write``) and wait in a queue
bounded in records (spans + log records); ``check_room`` is where admission is decided: over capacity,
it raises QueueFull with a retry delay (the receiver answers 503 / RESOURCE_EXHAUSTED). The thread
coalesces what is queued into one transaction (group commit: one commit for all of them) and resolves
each submission's Future after the commit. A store that prefers fewer, larger commits (a lake:
``store.commit_seconds``) gathers for that long, or until half the queue (at most ``max_batch_spans``) waits.

A commit that loses a race with another writer (``CommitConflict``) is tried again after a pause, up to
``COMMIT_ATTEMPTS`` times; one that still fails marks the store failed, and the receiver reopens it and
replays its request journal, so the batch is retried from there: never dropped, and (the store skipping
what it has) never stored twice.

With a store that writes no WAL (``TraceStore(wal=False)``, under the receiver's request journal) a
commit is durable only after a checkpoint: the thread checkpoints once the spans table's last row group
is full (a transaction takes no more spans than it has room for; see ``row_groups``), once
``checkpoint_bytes`` of records and trajectory rows are committed, or ``CHECKPOINT_SECONDS`` after the
oldest of them, and then calls each submission's ``when_durable`` (with a WAL, right after its commit).

Trajectories are the rebuilder's (``TrajectoryRebuilder``): the store's writes mark their traces in its
build queue, and the writer only wakes the rebuilder after each commit and tells it when it is behind.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import duckdb

from tracegrade.errors import StoreError
from tracegrade.models.span import LogRecordData, SpanRecord
from tracegrade.store.build_queue import DEFAULT_CAPACITY
from tracegrade.store.mapping_batches import DEFAULT_MAPPING_BATCH_BYTES
from tracegrade.store.mapping_process import MappingProcess
from tracegrade.store.prepared import PreparedWrite, prepare_write
from tracegrade.store.rebuilder import TrajectoryRebuilder
from tracegrade.store.results import CommitConflict, QueryResult, WriteResult
from tracegrade.store.tenancy import DEFAULT_TENANT

if TYPE_CHECKING:
    from tracegrade.store.backend import StoreBackend
    from tracegrade.store.trace_store import BatchWrite

__all__ = ["QueueFull", "StoreWriter"]

# shortest retry delay suggested to a refused exporter (gRPC RetryInfo carries it exactly; the HTTP
# Retry-After header rounds it up to whole seconds)
MIN_RETRY_AFTER = 0.25
# checkpoint policy of a store without WAL: what is committed between checkpoints stays in DuckDB's
# memory, and the checkpoint needs about as much again: past the memory limit DuckDB fails it and
# invalidates the database (seen with 16,384 spans of 2.7 KB under a 64MB limit). So a checkpoint comes
# once a quarter of the memory limit is committed (``checkpoint_bytes``, Arrow bytes), or after
# CHECKPOINT_SECONDS. Fewer, larger checkpoints are cheaper per span (each rewrites the row group it
# appends to; bench/RESULTS.md, store writes).
DEFAULT_CHECKPOINT_BYTES = 32 * 2**20
CHECKPOINT_SECONDS = 1.0
# While more than this fraction of the queue's capacity waits, the writer is behind and the rebuilder
# spaces its claims (rebuilds interleaved freely took the CPU the writer needed: bench/RESULTS.md, bench_ingest).
BEHIND_FRACTION = 0.1
# a commit that lost races this many times in a row (each after DuckLake's own retries) fails the store
COMMIT_ATTEMPTS = 4
COMMIT_RETRY_PAUSE = 0.25  # seconds before the second attempt, doubling before each further one
MAX_PENDING_REBUILDS = DEFAULT_CAPACITY

log = logging.getLogger(__name__)


class QueueFull(StoreError):
    """The write queue is over capacity; retry the submission after ``retry_after`` seconds."""

    def __init__(self, queued: int, capacity: int, retry_after: float) -> None:
        self.queued = queued
        self.capacity = capacity
        self.retry_after = retry_after
        super().__init__(
            f"the store write queue is full ({queued} of {capacity} records waiting); retry in {retry_after:.1f}s"
        )


@dataclass(slots=True)
class _Submission:
    prepared: PreparedWrite
    future: Future[WriteResult]
    when_durable: Callable[[], None] | None
    replay: bool = False  # a journal replay: running out of memory by itself does not fail the store
    enqueued_at: float = field(default_factory=time.monotonic)

    @property
    def size(self) -> int:
        return self.prepared.size


@dataclass(slots=True)
class _Stats:
    spans_written: int = 0
    spans_duplicate: int = 0
    logs_written: int = 0
    logs_duplicate: int = 0
    submissions: int = 0
    transactions: int = 0
    write_errors: int = 0
    commit_retries: int = 0
    last_write_seconds: float = 0.0
    total_write_seconds: float = 0.0
    last_submission_latency_seconds: float = 0.0
    records_per_second: float = 0.0  # smoothed write throughput, used for retry_after


class StoreWriter:
    """One writer thread owning ``store`` (closing the writer closes the store), and its rebuilder.

    ``on_dequeued`` is called on the writer's thread each time it takes a transaction's records from the
    queue (the receiver lets requests that wait for room go on). ``build=False`` runs no rebuilder: the
    store's build queue is still marked, and another process builds (a lake's ``tracegrade build``).
    ``commit_seconds`` overrides how long the writer gathers submissions (default: ``store.commit_seconds``).
    ``build_hold`` says why the rebuilder must write no build now (see ``TrajectoryRebuilder``), or None.
    """

    def __init__(
        self,
        store: StoreBackend,
        *,
        max_queue_spans: int = 200_000,
        settle_seconds: float = 1.0,
        root_settle_seconds: float = 0.1,
        max_batch_spans: int = 50_000,
        max_rebuild_traces: int | None = None,
        max_rebuild_bytes: int = DEFAULT_MAPPING_BATCH_BYTES,
        checkpoint_bytes: int = DEFAULT_CHECKPOINT_BYTES,
        max_pending_rebuilds: int = MAX_PENDING_REBUILDS,
        mapping: MappingProcess | None = None,
        on_dequeued: Callable[[], None] | None = None,
        build: bool = True,
        commit_seconds: float | None = None,
        build_hold: Callable[[], str | None] | None = None,
    ) -> None:
        if max_queue_spans < 1:
            raise ValueError("max_queue_spans must be at least 1")
        self.store = store
        self.max_queue_spans = max_queue_spans
        self.max_batch_spans = max_batch_spans
        self.checkpoint_bytes = checkpoint_bytes
        self.commit_seconds = store.commit_seconds if commit_seconds is None else commit_seconds
        store.builds.configure(
            settle_seconds=settle_seconds, root_settle_seconds=root_settle_seconds, capacity=max_pending_rebuilds
        )
        self._on_dequeued = on_dequeued
        self._queue: deque[_Submission] = deque()
        self._queued = 0
        self._rebuilder = (
            TrajectoryRebuilder(
                store,
                mapping=mapping,
                max_traces=max_rebuild_traces,
                max_bytes=max_rebuild_bytes,
                behind=self._behind,
                write_hold=build_hold,
            )
            if build
            else None
        )
        self._cond = threading.Condition()
        self._stats = _Stats()
        self._thread: threading.Thread | None = None
        self._closing = False
        self._drain = True
        self._rebuild_deadline: float | None = None
        self._awaiting_checkpoint: list[Callable[[], None]] = []  # when_durable of commits not checkpointed

    # ------------------------------------------------------------ public API

    def start(self) -> None:
        """Start the writer (and its rebuilder, which first queues what an earlier run left unbuilt)."""
        if self._thread is not None:
            raise StoreError("the store writer is already started")
        if self._rebuilder is not None:
            self._rebuilder.start()
        self._thread = threading.Thread(target=self._run, name="tracegrade-store-writer", daemon=True)
        self._thread.start()

    def submit(
        self,
        spans: Sequence[SpanRecord],
        logs: Sequence[LogRecordData] = (),
        *,
        check_capacity: bool = True,
        tenant: str = DEFAULT_TENANT,
    ) -> Future[WriteResult]:
        """Queue ``tenant``'s spans and logs; the Future resolves with the WriteResult once they are committed.

        Raises QueueFull when the queue is over capacity (a submission larger than the whole queue is
        accepted when the queue is empty, so it can never be refused forever). ``check_capacity=False``
        queues regardless: for records already admitted by ``check_room`` (and made durable elsewhere).
        """
        if check_capacity:
            self.check_room(len(spans) + len(logs))
        return self.submit_prepared(prepare_write(spans, logs, tenant))

    def submit_prepared(
        self, prepared: PreparedWrite, when_durable: Callable[[], None] | None = None, *, replay: bool = False
    ) -> Future[WriteResult]:
        """Queue a write already converted by ``prepare_write`` (no capacity check: see ``check_room``).

        ``when_durable`` is called (on the writer thread) once the write is in the database file or its
        WAL: at once after the commit, or after the next checkpoint of a store without WAL. ``replay``: a
        journal replay's record, whose write running out of memory by itself fails its Future only, not the
        store (the replay tries it again alone, and sets it aside if it fails again: ``JournaledWriter.recover``).
        """
        future: Future[WriteResult] = Future()
        with self._cond:
            if self._closing or self._thread is None:
                raise StoreError("the store writer is not running (not started, or closed)")
            self._queue.append(_Submission(prepared, future, when_durable, replay))
            self._queued += prepared.size
            self._cond.notify()
        return future

    def check_room(self, size: int, reserved: int = 0) -> None:
        """Raise QueueFull unless ``size`` more records fit beside the queue and ``reserved`` promised ones.

        The one admission check: the receiver's journal and its queue gate both ask here."""
        with self._cond:
            if self.store.failure is not None:
                raise StoreError(
                    f"the store failed and accepts no writes until it is reopened ({self.store.failure}); "
                    "`tracegrade serve` reopens it by itself and then stores what its journal holds"
                )
            queued = self._queued + reserved
            if queued and queued + size > self.max_queue_spans:
                raise QueueFull(queued, self.max_queue_spans, self.retry_after(queued + size - self.max_queue_spans))

    def free_records(self, reserved: int = 0) -> int:
        """Records the queue can still take beside ``reserved`` promised ones."""
        return self.max_queue_spans - self._queued - reserved

    def query(self, sql: str, params: Sequence[Any] | None = None) -> QueryResult:
        """Run read-only SQL on the store's connection (safe from any thread, while writes go on)."""
        return self.store.query(sql, params)

    @property
    def queue_depth(self) -> int:
        """Records (spans + log records) waiting to be written."""
        return self._queued

    @property
    def stats(self) -> dict[str, Any]:
        """Counters and gauges for /metrics."""
        rebuilder = self._rebuilder
        rebuilds = rebuilder.stats if rebuilder is not None else None
        pending = rebuilder.pending if rebuilder is not None else 0
        with self._cond:
            s = self._stats
            return {
                "spans_written": s.spans_written,
                "spans_duplicate": s.spans_duplicate,
                "logs_written": s.logs_written,
                "logs_duplicate": s.logs_duplicate,
                "submissions": s.submissions,
                "transactions": s.transactions,
                "write_errors": s.write_errors,
                "commit_retries": s.commit_retries,
                "last_write_seconds": s.last_write_seconds,
                "avg_write_seconds": s.total_write_seconds / s.transactions if s.transactions else 0.0,
                "last_submission_latency_seconds": s.last_submission_latency_seconds,
                "queue_depth": self._queued,
                "queue_capacity": self.max_queue_spans,
                "traces_rebuilt": rebuilds.traces_rebuilt if rebuilds else 0,
                "rebuild_batches": rebuilds.rebuild_batches if rebuilds else 0,
                "rebuild_errors": rebuilds.rebuild_errors if rebuilds else 0,
                "mapping_batches": rebuilds.mapping_batches if rebuilds else 0,
                "mapping_batch_bytes_max": rebuilds.mapping_batch_bytes_max if rebuilds else 0,
                "mapping_traces_over_budget": rebuilds.mapping_traces_over_budget if rebuilds else 0,
                "pending_rebuilds": pending,
            }

    def close(self, drain: bool = True, rebuild_seconds: float | None = None) -> None:
        """Stop the writer and close the store.

        ``drain=True`` writes everything queued and rebuilds every pending trajectory first (for at
        most ``rebuild_seconds`` when given); ``drain=False`` fails queued submissions with StoreError.
        Rebuilds not done are left to the next start (or, on a lake, to another builder).
        """
        with self._cond:
            if self._closing:
                return
            self._closing = True
            self._drain = drain
            self._rebuild_deadline = None if rebuild_seconds is None else time.monotonic() + rebuild_seconds
            self._cond.notify()
        if self._thread is not None:
            self._thread.join()
        self.store.close()

    # --------------------------------------------------------- writer thread

    def retry_after(self, excess: int) -> float:
        """About how long the writer takes to free room for ``excess`` more records at its recent rate (a
        quarter second at least). Not the whole queue's drain time: exporters told to wait that long came
        back to a writer that had run dry, and fewer spans were stored per second (bench/RESULTS.md,
        bench_ingest: measured over gRPC, which passes the delay on exactly)."""
        rate = self._stats.records_per_second or 10_000.0
        return min(30.0, max(MIN_RETRY_AFTER, excess / rate + self.commit_seconds))

    def _behind(self) -> bool:
        return self._queued > BEHIND_FRACTION * self.max_queue_spans

    def _commit_due_at(self) -> float | None:
        """When the queued submissions are to be committed (None: nothing queued; call with the lock held)."""
        if not self._queue:
            return None
        # half the queue is worth a commit: the other half keeps taking requests while it runs
        full = min(self.max_batch_spans, self.max_queue_spans // 2)
        if self._closing or self._queued >= full or not self.commit_seconds:
            return 0.0
        return self._queue[0].enqueued_at + self.commit_seconds

    def _wait_seconds(self) -> float | None:
        known = [at for at in (self._checkpoint_at(), self._commit_due_at()) if at is not None]
        return max(0.0, min(known) - time.monotonic()) if known else None

    def _checkpoint_at(self) -> float | None:
        """When the store is next due a checkpoint (None: it writes a WAL, or holds nothing new)."""
        since = self.store.uncheckpointed_since
        if self.store.wal or since is None or self.store.failure is not None:
            return None
        group = self.store.span_group
        if (group.full and group.unsaved) or self.store.uncheckpointed_bytes >= self.checkpoint_bytes:
            return since
        return since + CHECKPOINT_SECONDS

    def _checkpoint_due(self) -> bool:
        at = self._checkpoint_at()
        return at is not None and at <= time.monotonic()

    def _commit_due(self) -> bool:
        at = self._commit_due_at()
        return at is not None and at <= time.monotonic()

    def _checkpoint(self) -> None:
        """Checkpoint the store and tell the writes it made durable (a failure is retried next time)."""
        try:
            self.store.checkpoint()
        except StoreError as exc:
            log.error("%s", exc)
            return
        durable, self._awaiting_checkpoint = self._awaiting_checkpoint, []
        for when_durable in durable:
            when_durable()

    def _run(self) -> None:
        try:
            while True:
                with self._cond:
                    while not self._commit_due() and not self._checkpoint_due() and not self._closing:
                        self._cond.wait(self._wait_seconds())
                    if self._closing and not self._drain:
                        break
                    batch = self._take_batch() if self._commit_due() else []
                    finishing = self._closing and not self._queue and not batch
                if batch:
                    if self._on_dequeued is not None:
                        self._on_dequeued()
                    self._write(batch)
                if finishing:
                    break
                if self._checkpoint_due():
                    self._checkpoint()
        finally:
            if self._rebuilder is not None:
                self._rebuilder.stop(self._rebuild_deadline, drain=self._drain and self.store.failure is None)
            if not self.store.wal and not self.store.closed and self.store.failure is None:
                self._checkpoint()
            self._fail_queued()

    def _take_batch(self) -> list[_Submission]:
        """The next transaction's submissions: up to ``max_batch_spans`` records, and (without WAL) no
        more spans than the row group they go into has room for."""
        batch: list[_Submission] = []
        taken = spans = 0
        span_room = self._span_room()
        while self._queue and (
            not batch
            or (
                taken + self._queue[0].size <= self.max_batch_spans
                and spans + self._queue[0].prepared.spans_sent <= span_room
            )
        ):
            submission = self._queue.popleft()
            self._queued -= submission.size
            if submission.future.set_running_or_notify_cancel():
                batch.append(submission)
                taken += submission.size
                spans += submission.prepared.spans_sent
        return batch

    def _span_room(self) -> int:
        """Spans the next transaction may take: the room left in the last row group, or a whole group
        when the first queued submission does not fit there (it starts a new one)."""
        group = self.store.span_group
        if self.store.wal:
            return self.max_batch_spans
        return group.room if self._queue and group.fits(self._queue[0].prepared.spans_sent) else group.size

    def _commit(self, batch: list[_Submission]) -> BatchWrite:
        """One transaction of ``batch``, tried again after a pause while it loses races with other writers;
        after ``COMMIT_ATTEMPTS`` the store is marked failed (its owner replays the batch from its journal)."""
        pause = COMMIT_RETRY_PAUSE
        for attempt in range(1, COMMIT_ATTEMPTS + 1):
            try:
                return self.store.write_batch([s.prepared for s in batch])
            except CommitConflict as exc:
                if attempt == COMMIT_ATTEMPTS:
                    self.store.mark_failed(f"a commit lost {attempt} races in a row: {exc}")
                    raise
                log.warning("a commit lost a race with another writer (attempt %d); retrying: %s", attempt, exc)
                with self._cond:
                    self._stats.commit_retries += 1
                time.sleep(pause)
                pause *= 2
        raise AssertionError("unreachable")

    def _write(self, batch: list[_Submission]) -> None:
        group = self.store.span_group
        if not self.store.wal and group.unsaved and not group.fits(sum(s.prepared.spans_sent for s in batch)):
            self._checkpoint()  # the group is as full as it gets: write it once, before the next one starts
        started = time.monotonic()
        try:
            written = self._commit(batch)
        except Exception as exc:
            if len(batch) > 1 and self.store.failure is None:  # one bad submission must not fail the others
                for submission in batch:
                    self._write([submission])
                return
            log.error("store write failed: %s", exc)
            replayed = all(submission.replay for submission in batch)
            if self.store.failure is None and not replayed and isinstance(exc.__cause__, duckdb.OutOfMemoryException):
                # Nothing is wrong with the records: the store could not hold the write (a burst). Failing
                # the store makes its owner reopen it and replay them from the journal, rather than leave
                # acknowledged records unwritten until the next start.
                self.store.mark_failed(f"a write ran out of memory: {str(exc).splitlines()[0]}")
            with self._cond:
                self._stats.write_errors += len(batch)
            error = exc if isinstance(exc, StoreError) else StoreError(f"write failed: {exc}")
            for submission in batch:
                submission.future.set_exception(error)
            return
        finished = time.monotonic()
        with self._cond:
            self._record(batch, written, finished - started, finished)
        if self._rebuilder is not None:
            self._rebuilder.wake()
        for submission, result in zip(batch, written.results):
            submission.future.set_result(result)
        durable = [s.when_durable for s in batch if s.when_durable is not None]
        if self.store.wal:
            for when_durable in durable:
                when_durable()
        else:
            self._awaiting_checkpoint += durable

    def _record(self, batch: list[_Submission], written: BatchWrite, seconds: float, now: float) -> None:
        s = self._stats
        for result in written.results:
            s.spans_written += result.spans_inserted
            s.spans_duplicate += result.spans_duplicate
            s.logs_written += result.logs_inserted
            s.logs_duplicate += result.logs_duplicate
        s.submissions += len(batch)
        s.transactions += 1
        s.last_write_seconds = seconds
        s.total_write_seconds += seconds
        s.last_submission_latency_seconds = now - batch[0].enqueued_at
        rate = sum(b.size for b in batch) / max(seconds, 1e-6)
        s.records_per_second = rate if not s.records_per_second else 0.8 * s.records_per_second + 0.2 * rate

    def _fail_queued(self) -> None:
        with self._cond:
            pending = list(self._queue)
            self._queue.clear()
            self._queued = 0
        for submission in pending:
            if submission.future.set_running_or_notify_cancel():
                submission.future.set_exception(StoreError("the store writer closed before this batch was written"))
