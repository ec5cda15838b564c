"""StoreWriter: the single writer thread in front of a TraceStore.

Submissions wait in a queue bounded in records (spans + log records); when it is over capacity,
``submit`` raises QueueFull with a retry delay (the receiver answers 429 / RESOURCE_EXHAUSTED). The
thread coalesces everything queued into one transaction and resolves each submission's Future after
the commit. Traces that gained spans are rebuilt ``settle_seconds`` after their last span, a small
batch at a time between write batches (sized to take about ``rebuild_budget_seconds``), so writes never
wait long behind a rebuild.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from tracegrade.errors import StoreError
from tracegrade.models.span import LogRecordData, SpanRecord
from tracegrade.store.results import QueryResult, WriteResult
from tracegrade.store.trace_store import TraceStore

__all__ = ["QueueFull", "StoreWriter"]

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
    spans: Sequence[SpanRecord]
    logs: Sequence[LogRecordData]
    future: Future[WriteResult]
    size: int
    enqueued_at: float = field(default_factory=time.monotonic)


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
    traces_rebuilt: int = 0
    rebuild_batches: int = 0
    rebuild_errors: int = 0
    records_per_second: float = 0.0  # smoothed write throughput, used for retry_after


class StoreWriter:
    """One writer thread owning ``store`` (closing the writer closes the store)."""

    def __init__(
        self,
        store: TraceStore,
        *,
        max_queue_spans: int = 200_000,
        settle_seconds: float = 1.0,
        max_batch_spans: int = 50_000,
        rebuild_budget_seconds: float = 0.05,
    ) -> None:
        if max_queue_spans < 1:
            raise ValueError("max_queue_spans must be at least 1")
        self.store = store
        self.max_queue_spans = max_queue_spans
        self.settle_seconds = settle_seconds
        self.max_batch_spans = max_batch_spans
        self.rebuild_budget_seconds = rebuild_budget_seconds
        self._rebuild_seconds_per_trace = 0.002  # learnt from each rebuild; sizes the next batch
        self._queue: deque[_Submission] = deque()
        self._queued = 0
        self._dirty: dict[str, float] = {}  # trace id -> monotonic time its rebuild is due
        self._cond = threading.Condition()
        self._stats = _Stats()
        self._thread: threading.Thread | None = None
        self._closing = False
        self._drain = True

    # ------------------------------------------------------------ public API

    def start(self) -> None:
        """Start the writer thread; traces left stale by an earlier crash are queued for rebuild."""
        if self._thread is not None:
            raise StoreError("the store writer is already started")
        due = time.monotonic()
        for trace_id in self.store.stale_trajectories():
            self._dirty[trace_id] = due
        self._thread = threading.Thread(target=self._run, name="tracegrade-store-writer", daemon=True)
        self._thread.start()

    def submit(self, spans: Sequence[SpanRecord], logs: Sequence[LogRecordData] = ()) -> Future[WriteResult]:
        """Queue spans and logs; the Future resolves with the WriteResult once they are committed.

        Raises QueueFull when the queue is over capacity (a submission larger than the whole queue is
        accepted when the queue is empty, so it can never be refused forever).
        """
        size = len(spans) + len(logs)
        future: Future[WriteResult] = Future()
        with self._cond:
            if self._closing or self._thread is None:
                raise StoreError("the store writer is not running (not started, or closed)")
            if self._queued and self._queued + size > self.max_queue_spans:
                raise QueueFull(self._queued, self.max_queue_spans, self._retry_after())
            self._queue.append(_Submission(spans, logs, future, size))
            self._queued += size
            self._cond.notify()
        return future

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
                "traces_rebuilt": s.traces_rebuilt,
                "rebuild_batches": s.rebuild_batches,
                "rebuild_errors": s.rebuild_errors,
                "pending_rebuilds": len(self._dirty),
            }

    def close(self, drain: bool = True) -> None:
        """Stop the writer and close the store.

        ``drain=True`` writes everything queued and rebuilds every pending trajectory first;
        ``drain=False`` fails queued submissions with StoreError and leaves pending rebuilds to the
        next start (they are found again by ``TraceStore.stale_trajectories``).
        """
        with self._cond:
            if self._closing:
                return
            self._closing = True
            self._drain = drain
            self._cond.notify()
        if self._thread is not None:
            self._thread.join()
        self.store.close()

    # --------------------------------------------------------- writer thread

    def _retry_after(self) -> float:
        rate = self._stats.records_per_second or 10_000.0
        return min(30.0, max(1.0, self._queued / rate))

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._due_rebuilds() and not self._closing:
                    self._cond.wait(self._wait_seconds())
                if self._closing and not self._drain:
                    break
                batch = self._take_batch()
                rebuild = self._take_rebuilds(everything=self._closing and not self._queue)
                if not batch and not rebuild and self._closing:
                    break
            if batch:
                self._write(batch)
            if rebuild:
                self._rebuild(rebuild)
        self._fail_queued()

    def _next_due(self) -> float | None:
        return next(iter(self._dirty.values()), None)

    def _wait_seconds(self) -> float | None:
        next_due = self._next_due()
        return None if next_due is None else max(0.0, next_due - time.monotonic())

    def _due_rebuilds(self) -> bool:
        next_due = self._next_due()
        return next_due is not None and next_due <= time.monotonic()

    def _take_batch(self) -> list[_Submission]:
        batch: list[_Submission] = []
        taken = 0
        while self._queue and (not batch or taken + self._queue[0].size <= self.max_batch_spans):
            submission = self._queue.popleft()
            self._queued -= submission.size
            if submission.future.set_running_or_notify_cancel():
                batch.append(submission)
                taken += submission.size
        return batch

    def _take_rebuilds(self, *, everything: bool) -> list[str]:
        now = time.monotonic()
        # with no write waiting, larger batches are fine (5x the budget); at least 32 either way: a rebuild
        # transaction has a fixed cost that tiny batches would pay over and over
        budget = self.rebuild_budget_seconds * (1 if self._queue else 5)
        limit = max(32, min(1000, int(budget / self._rebuild_seconds_per_trace)))
        due: list[str] = []
        for trace_id, at in self._dirty.items():  # in due order (see _record)
            if len(due) == limit or (at > now and not everything):
                break
            due.append(trace_id)
        for trace_id in due:
            del self._dirty[trace_id]
        return due

    def _write(self, batch: list[_Submission]) -> None:
        started = time.monotonic()
        try:
            results = self.store.write_many([(s.spans, s.logs) for s in batch])
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
            self._record(batch, results, finished - started, finished)
        for submission, result in zip(batch, results):
            submission.future.set_result(result)

    def _record(self, batch: list[_Submission], results: list[WriteResult], seconds: float, now: float) -> None:
        s = self._stats
        due = now + self.settle_seconds
        for result in results:
            s.spans_written += result.spans_inserted
            s.spans_duplicate += result.spans_duplicate
            s.logs_written += result.logs_inserted
            s.logs_duplicate += result.logs_duplicate
            for trace_id in result.trace_ids:  # re-inserted at the end: the dict stays in due order
                self._dirty.pop(trace_id, None)
                self._dirty[trace_id] = due
        s.submissions += len(batch)
        s.transactions += 1
        s.last_write_seconds = seconds
        s.total_write_seconds += seconds
        s.last_submission_latency_seconds = now - batch[0].enqueued_at
        rate = sum(b.size for b in batch) / max(seconds, 1e-6)
        s.records_per_second = rate if not s.records_per_second else 0.8 * s.records_per_second + 0.2 * rate

    def _rebuild(self, trace_ids: list[str]) -> None:
        started = time.monotonic()
        try:
            rebuilt = self.store.rebuild_trajectories(trace_ids)
        except Exception as exc:  # keep writing; the traces stay stale and are retried on the next start
            log.error("rebuilding trajectories of %d traces failed: %s", len(trace_ids), exc)
            with self._cond:
                self._stats.rebuild_errors += 1
            return
        per_trace = (time.monotonic() - started) / len(trace_ids)
        self._rebuild_seconds_per_trace = 0.7 * self._rebuild_seconds_per_trace + 0.3 * per_trace
        with self._cond:
            self._stats.traces_rebuilt += rebuilt
            self._stats.rebuild_batches += 1

    def _fail_queued(self) -> None:
        with self._cond:
            pending = list(self._queue)
            self._queue.clear()
            self._queued = 0
        for submission in pending:
            if submission.future.set_running_or_notify_cancel():
                submission.future.set_exception(StoreError("the store writer closed before this batch was written"))
