"""StoreWriter: the single writer thread in front of a TraceStore.

Submissions are converted to Arrow in the submitting thread (``prepare_write``) and wait in a queue
bounded in records (spans + log records); when it is over capacity, ``submit`` raises QueueFull with a
retry delay (the receiver answers 503 / RESOURCE_EXHAUSTED). The thread coalesces everything queued
into one transaction (group commit: one fsync for all of them) and resolves each submission's Future
after the commit.

With a store that writes no WAL (``TraceStore(wal=False)``, under the receiver's request journal) a
commit is durable only after a checkpoint: the thread checkpoints once the spans table's last row group
is full (a transaction takes no more spans than it has room for; see ``row_groups``), once
``checkpoint_bytes`` of records and trajectory rows are committed, or ``CHECKPOINT_SECONDS`` after the
oldest of them, and then calls each submission's ``when_durable`` (with a WAL, right after its commit).

Traces that gained records are rebuilt once they settle (while the writer is behind, at most one
rebuild job starts per ``REBUILD_MIN_INTERVAL``): ``root_settle_seconds`` after their last
record when their root span came in that write (an agent's root span ends, and is exported, last),
else ``settle_seconds``. Settled traces go to the rebuilder thread in jobs; it maps them (through
``mapping``: by default a backlog in a child process) and replaces their rows, so writes never wait behind
a rebuild. At most ``max_pending_rebuilds`` waiting traces are kept in memory; beyond that the store's own
record of stale trajectories is read back, oldest first, once those have been rebuilt.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from tracegrade.errors import StoreError
from tracegrade.models.span import LogRecordData, SpanRecord
from tracegrade.store.mapping_process import MappingProcess
from tracegrade.store.prepared import PreparedWrite, prepare_write
from tracegrade.store.rebuilder import RebuildJob, TrajectoryRebuilder
from tracegrade.store.results import QueryResult, WriteResult
from tracegrade.store.trace_store import BatchWrite, TraceStore

__all__ = ["QueueFull", "StoreWriter"]

# traces mapped and replaced per rebuild transaction: the rows of a few hundred agent traces stay well
# inside the store's memory limit (1,000 ran a 128 MB store out of memory on 10-span agent traces)
REBUILD_TRACES = 250
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
# Ingestion first: while the writer is behind (more than a tenth of the queue's capacity waiting), a
# rebuild job starts only when none has started for REBUILD_MIN_INTERVAL, so trajectories still advance
# under a sustained burst and keep up freely otherwise: rebuilds interleaved freely took the CPU the
# writer needed to keep up with the exporters (bench/RESULTS.md, bench_ingest).
REBUILD_MIN_INTERVAL = 2.0
BEHIND_FRACTION = 0.1
# traces waiting for a rebuild that the writer keeps in memory (about 150 bytes each); beyond it the store's
# own record of stale traces takes over (see _DirtyTraces)
MAX_PENDING_REBUILDS = 100_000

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
    last_write_seconds: float = 0.0
    total_write_seconds: float = 0.0
    last_submission_latency_seconds: float = 0.0
    records_per_second: float = 0.0  # smoothed write throughput, used for retry_after


class _DirtyTraces:
    """Traces waiting for a rebuild, each with the monotonic time it is due; at most ``capacity`` of them.

    Two queues, one per settle delay, so each stays in due order by appending alone. A trace marked
    while the queues are full is not kept, only ``overflowed`` is set: the store still knows it is stale
    (``TraceStore.stale_trajectories``), and the writer asks for it once the queues have drained, so memory
    stays bounded however far mapping falls behind the exports.
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.overflowed = False
        self._queues: tuple[dict[str, float], dict[str, float]] = ({}, {})

    def __len__(self) -> int:
        return sum(map(len, self._queues))

    @property
    def drained_after_overflow(self) -> bool:
        """Empty, and traces were left out while full: time to read them back from the store."""
        return self.overflowed and not len(self)

    def mark(self, trace_id: str, due: float, *, soon: bool) -> None:
        known = False
        for queue in self._queues:
            known = queue.pop(trace_id, None) is not None or known
        if not known and len(self) >= self.capacity:
            self.overflowed = True
            return
        self._queues[0 if soon else 1][trace_id] = due

    def next_due(self) -> float | None:
        heads = [next(iter(q.values())) for q in self._queues if q]
        return min(heads) if heads else None

    def take(self, limit: int, now: float | None) -> list[str]:
        """Up to ``limit`` traces due by ``now`` (any trace when ``now`` is None), soon-queue first."""
        due: list[str] = []
        for queue in self._queues:
            taken: list[str] = []
            for trace_id, at in queue.items():
                if len(due) + len(taken) == limit or (now is not None and at > now):
                    break
                taken.append(trace_id)
            for trace_id in taken:
                del queue[trace_id]
            due += taken
        return due


class StoreWriter:
    """One writer thread owning ``store`` (closing the writer closes the store).

    ``on_dequeued`` is called on the writer's thread each time it takes a transaction's records from the
    queue (the receiver lets requests that wait for room go on).
    """

    def __init__(
        self,
        store: TraceStore,
        *,
        max_queue_spans: int = 200_000,
        settle_seconds: float = 1.0,
        root_settle_seconds: float = 0.1,
        max_batch_spans: int = 50_000,
        max_rebuild_traces: int = REBUILD_TRACES,
        checkpoint_bytes: int = DEFAULT_CHECKPOINT_BYTES,
        max_pending_rebuilds: int = MAX_PENDING_REBUILDS,
        mapping: MappingProcess | None = None,
        on_dequeued: Callable[[], None] | None = None,
    ) -> None:
        if max_queue_spans < 1:
            raise ValueError("max_queue_spans must be at least 1")
        self.store = store
        self.max_queue_spans = max_queue_spans
        self.settle_seconds = settle_seconds
        self.root_settle_seconds = min(root_settle_seconds, settle_seconds)
        self.max_batch_spans = max_batch_spans
        self.max_rebuild_traces = max_rebuild_traces
        self.checkpoint_bytes = checkpoint_bytes
        self._on_dequeued = on_dequeued
        self._queue: deque[_Submission] = deque()
        self._queued = 0
        self._dirty = _DirtyTraces(max_pending_rebuilds)
        self._rebuilder = TrajectoryRebuilder(store, on_idle=self._wake, on_failed=self._retry_rebuild, mapping=mapping)
        self._cond = threading.Condition()
        self._stats = _Stats()
        self._thread: threading.Thread | None = None
        self._closing = False
        self._drain = True
        self._rebuild_deadline: float | None = None
        self._awaiting_checkpoint: list[Callable[[], None]] = []  # when_durable of commits not checkpointed
        self._last_rebuild_job = float("-inf")  # monotonic time the last rebuild job was handed over
        self._stale_scan_after = float("-inf")  # no scan for stale traces before (after a failed one)

    # ------------------------------------------------------------ public API

    def start(self) -> None:
        """Start the writer; traces left stale by an earlier crash are queued for rebuild."""
        if self._thread is not None:
            raise StoreError("the store writer is already started")
        self._mark_stale()
        self._rebuilder.start()
        self._thread = threading.Thread(target=self._run, name="tracegrade-store-writer", daemon=True)
        self._thread.start()

    def submit(
        self, spans: Sequence[SpanRecord], logs: Sequence[LogRecordData] = (), *, check_capacity: bool = True
    ) -> Future[WriteResult]:
        """Queue spans and logs; the Future resolves with the WriteResult once they are committed.

        Raises QueueFull when the queue is over capacity (a submission larger than the whole queue is
        accepted when the queue is empty, so it can never be refused forever). ``check_capacity=False``
        queues regardless: for records already admitted by ``check_room`` (and made durable elsewhere).
        """
        if check_capacity:
            self.check_room(len(spans) + len(logs))
        return self.submit_prepared(prepare_write(spans, logs))

    def submit_prepared(
        self, prepared: PreparedWrite, when_durable: Callable[[], None] | None = None
    ) -> Future[WriteResult]:
        """Queue a write already converted by ``prepare_write`` (no capacity check: see ``check_room``).

        ``when_durable`` is called (on the writer thread) once the write is in the database file or its
        WAL: at once after the commit, or after the next checkpoint of a store without WAL.
        """
        future: Future[WriteResult] = Future()
        with self._cond:
            if self._closing or self._thread is None:
                raise StoreError("the store writer is not running (not started, or closed)")
            self._queue.append(_Submission(prepared, future, when_durable))
            self._queued += prepared.size
            self._cond.notify()
        return future

    def check_room(self, size: int, reserved: int = 0) -> None:
        """Raise QueueFull unless ``size`` more records fit beside the queue and ``reserved`` promised ones."""
        with self._cond:
            self._check_room(size, reserved)

    def _check_room(self, size: int, reserved: int) -> None:
        if self.store.failure is not None:
            raise StoreError(
                f"the store failed and accepts no writes ({self.store.failure}); restart `tracegrade serve`: "
                "spans already acknowledged are in its journal and are stored when it starts"
            )
        queued = self._queued + reserved
        if queued and queued + size > self.max_queue_spans:
            raise QueueFull(queued, self.max_queue_spans, self.retry_after(queued + size - self.max_queue_spans))

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
        rebuilds = self._rebuilder.stats
        pending_in_jobs = self._rebuilder.pending
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
                "last_write_seconds": s.last_write_seconds,
                "avg_write_seconds": s.total_write_seconds / s.transactions if s.transactions else 0.0,
                "last_submission_latency_seconds": s.last_submission_latency_seconds,
                "queue_depth": self._queued,
                "queue_capacity": self.max_queue_spans,
                "traces_rebuilt": rebuilds.traces_rebuilt,
                "rebuild_batches": rebuilds.rebuild_batches,
                "rebuild_errors": rebuilds.rebuild_errors,
                "pending_rebuilds": len(self._dirty) + pending_in_jobs,
            }

    def close(self, drain: bool = True, rebuild_seconds: float | None = None) -> None:
        """Stop the writer and close the store.

        ``drain=True`` writes everything queued and rebuilds every pending trajectory first (for at
        most ``rebuild_seconds`` when given); ``drain=False`` fails queued submissions with StoreError.
        Rebuilds not done are left to the next start (``TraceStore.stale_trajectories`` finds them).
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
        return min(30.0, max(MIN_RETRY_AFTER, excess / rate))

    def _wake(self) -> None:
        with self._cond:
            self._cond.notify()

    def _retry_rebuild(self, trace_ids: list[str]) -> None:
        """A rebuild failed (a transient store error, say): try those traces again once settled.

        While closing, they are left to the next start, which finds them stale.
        """
        due = time.monotonic() + self.settle_seconds
        with self._cond:
            if self._closing:
                return
            for trace_id in trace_ids:
                self._dirty.mark(trace_id, due, soon=False)

    def _mark_stale(self) -> None:
        """Queue the traces the store knows are stale, as many as the dirty queues keep, oldest first.

        Raises StoreError when the store cannot be read.
        """
        due = time.monotonic()
        stale = self.store.stale_trajectories(limit=self._dirty.capacity - len(self._dirty))
        with self._cond:
            self._dirty.overflowed = False
            for trace_id in stale:
                self._dirty.mark(trace_id, due, soon=True)
            if len(self._dirty) >= self._dirty.capacity:
                self._dirty.overflowed = True

    def _mark_overflowed_stale(self) -> None:
        """Queue the traces left out while the dirty queues were full (a failed scan is retried later)."""
        try:
            self._mark_stale()
        except StoreError as exc:
            log.error("finding the traces that wait for a rebuild failed (will retry): %s", exc)
            self._stale_scan_after = time.monotonic() + self.settle_seconds

    def _rebuild_due(self) -> bool:
        if self.store.failure is not None or not self._rebuilder.idle:
            return False
        if self._dirty.drained_after_overflow:  # the store holds stale traces the queues had no room for
            return time.monotonic() >= self._stale_scan_after
        next_due = self._dirty.next_due()
        return next_due is not None and next_due <= time.monotonic()

    def _wait_seconds(self) -> float | None:
        times = [self._checkpoint_at()]
        if self._rebuilder.idle and self.store.failure is None:  # else the rebuilder wakes us when it is idle again
            times.append(self._dirty.next_due())
            if self._dirty.drained_after_overflow:
                times.append(self._stale_scan_after)
        known = [at for at in times if at is not None]
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
                    while (
                        not self._queue and not self._rebuild_due() and not self._checkpoint_due() and not self._closing
                    ):
                        self._cond.wait(self._wait_seconds())
                    if self._closing and not self._drain:
                        break
                    batch = self._take_batch()
                    finishing = self._closing and not batch
                if batch:
                    if self._on_dequeued is not None:
                        self._on_dequeued()
                    self._write(batch)
                if finishing:
                    self._rebuild(everything=True)
                    break
                if self._rebuilder.idle and (
                    self._queued <= BEHIND_FRACTION * self.max_queue_spans
                    or time.monotonic() - self._last_rebuild_job >= REBUILD_MIN_INTERVAL
                ):
                    if self._rebuild_due() and self._dirty.drained_after_overflow:
                        self._mark_overflowed_stale()
                    self._rebuild(everything=False)
                if self._checkpoint_due():
                    self._checkpoint()
        finally:
            self._rebuilder.stop(self._rebuild_deadline)
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

    def _rebuild(self, *, everything: bool) -> None:
        """Hand due traces (every dirty trace when ``everything``) to the rebuilder, in jobs."""
        while self.store.failure is None:  # a failed store's traces are rebuilt at the next start
            with self._cond:
                due = self._dirty.take(self.max_rebuild_traces, None if everything else time.monotonic())
            if not due:
                return
            self._rebuilder.submit(RebuildJob(self.store.stamp(), due))  # stamped between two writes
            self._last_rebuild_job = time.monotonic()
            if not everything:
                return

    def _write(self, batch: list[_Submission]) -> None:
        group = self.store.span_group
        if not self.store.wal and group.unsaved and not group.fits(sum(s.prepared.spans_sent for s in batch)):
            self._checkpoint()  # the group is as full as it gets: write it once, before the next one starts
        started = time.monotonic()
        try:
            written = self.store.write_batch([s.prepared for s in batch])
        except Exception as exc:
            if len(batch) > 1:  # one bad submission must not fail the others: write each alone
                for submission in batch:
                    self._write([submission])
                return
            log.error("store write failed: %s", exc)
            with self._cond:
                self._stats.write_errors += 1
            batch[0].future.set_exception(exc if isinstance(exc, StoreError) else StoreError(f"write failed: {exc}"))
            return
        finished = time.monotonic()
        with self._cond:
            self._record(batch, written, finished - started, finished)
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
        for result in written.results:
            for trace_id in result.trace_ids:
                soon = trace_id in written.rooted
                self._dirty.mark(trace_id, now + (self.root_settle_seconds if soon else self.settle_seconds), soon=soon)
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
