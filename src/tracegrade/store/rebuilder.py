"""The trajectory rebuilder: a thread that maps settled traces and replaces their trajectory rows.

The StoreWriter hands it ``RebuildJob``s: trace ids and the ``updated_at`` stamp taken when the job was
made, between two writes. For each job the rebuilder reads the traces' spans and logs back from the
store as Arrow tables (DuckDB works without the GIL), has them mapped (``MappingProcess``: large jobs
in a child process, since mapping is pure Python and would otherwise compete with the receiver's
request threads; small ones in process), and replaces their rows in one transaction, so a long rebuild
never delays a write. Jobs run one at a time, in order, so a trace's newer rows always replace its older
ones.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from tracegrade.store.mapping_process import MappingProcess
from tracegrade.store.trace_store import TraceStore

__all__ = ["RebuildJob", "TrajectoryRebuilder"]

log = logging.getLogger(__name__)


@dataclass(slots=True)
class RebuildJob:
    """Traces to map, with the ``updated_at`` their new rows get."""

    updated_at: datetime
    trace_ids: list[str]

    def __len__(self) -> int:
        return len(self.trace_ids)


@dataclass(slots=True)
class RebuildStats:
    traces_rebuilt: int = 0
    rebuild_batches: int = 0
    rebuild_errors: int = 0
    seconds_per_trace: float = 0.0


class TrajectoryRebuilder:
    """One thread running RebuildJobs against ``store``; ``on_idle`` is called after each job, and
    ``on_failed`` with the trace ids of a job that failed (the writer queues them again)."""

    def __init__(
        self,
        store: TraceStore,
        on_idle: Callable[[], None],
        on_failed: Callable[[list[str]], None],
        mapping: MappingProcess | None = None,
    ) -> None:
        self.store = store
        self._mapping = mapping or MappingProcess()
        self.stats = RebuildStats()
        self._on_idle = on_idle
        self._on_failed = on_failed
        self._jobs: deque[RebuildJob] = deque()
        self._running = 0  # traces in the job being run
        self._stopping = False
        self._deadline: float | None = None
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="tracegrade-trajectory-rebuilder", daemon=True)

    def start(self) -> None:
        self._thread.start()

    @property
    def idle(self) -> bool:
        """No job waiting or running (the writer hands over the next one only then)."""
        with self._cond:
            return not self._jobs and not self._running

    @property
    def pending(self) -> int:
        """Traces in jobs waiting or running."""
        with self._cond:
            return sum(map(len, self._jobs)) + self._running

    def submit(self, job: RebuildJob) -> None:
        with self._cond:
            self._jobs.append(job)
            self._cond.notify()

    def stop(self, deadline: float | None = None) -> None:
        """Finish the jobs already submitted, then end the thread. With a ``deadline`` (a
        ``time.monotonic()`` value), jobs not started by then are dropped: their traces stay stale
        and the next start rebuilds them (``TraceStore.stale_trajectories``)."""
        with self._cond:
            self._stopping = True
            self._deadline = deadline
            self._cond.notify()
        if self._thread.is_alive():
            self._thread.join()
        self._mapping.close()

    def _run(self) -> None:
        while (job := self._next_job()) is not None:
            try:
                self._rebuild(job)
            finally:
                with self._cond:
                    self._running = 0
                self._on_idle()

    def _next_job(self) -> RebuildJob | None:
        """Wait for the next job; None once stopping with nothing left to run. After a wait with no job,
        the mapping child is closed if it has been idle long enough (freeing its memory), outside the
        lock: a job submitted meanwhile does not wait for the child's shutdown. Only this thread uses
        the mapping process."""
        while True:
            with self._cond:
                if self._jobs or self._stopping:
                    return self._take_job()
                woken = self._cond.wait(self._mapping.idle_seconds)
            if not woken:
                self._mapping.close_if_idle()

    def _take_job(self) -> RebuildJob | None:
        """Pop the next job, dropping every job once a stop's deadline has passed (call with the lock held)."""
        if self._stopping and self._deadline is not None and time.monotonic() > self._deadline:
            dropped = sum(map(len, self._jobs))
            if dropped:
                log.warning("stopping: %d trajectory rebuilds left to the next start", dropped)
            self._jobs.clear()
        if not self._jobs:
            return None
        job = self._jobs.popleft()
        self._running = max(1, len(job))
        return job

    def _rebuild(self, job: RebuildJob) -> None:
        started = time.monotonic()
        try:
            spans, logs = self.store.load_arrow(job.trace_ids)
            tables = self._mapping.map(spans, logs, job.updated_at)
            self.store.replace_trajectories(tables, clear=job.trace_ids)
        except Exception as exc:  # keep going; the writer retries these traces later
            log.error("rebuilding trajectories of %d traces failed (will retry): %s", len(job), exc)
            with self._cond:
                self.stats.rebuild_errors += 1
            self._on_failed(job.trace_ids)
            return
        per_trace = (time.monotonic() - started) / max(1, len(job))
        with self._cond:
            s = self.stats
            s.traces_rebuilt += len(job)
            s.rebuild_batches += 1
            s.seconds_per_trace = per_trace if not s.seconds_per_trace else 0.7 * s.seconds_per_trace + 0.3 * per_trace
