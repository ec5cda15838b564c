"""MappingProcess: map traces to trajectory rows in a child process, beside the receiver's own work.

Mapping is pure Python and costs more per span than decoding and storing together; in the receiver's
process it would share one interpreter lock with the request path. Here the rebuilder hands a child
process the stored spans and logs of a set of traces as Arrow tables (read from DuckDB without Python
objects, pickled as Arrow IPC buffers) and gets the four trajectory tables back the same way; the
receiver's process only moves buffers between DuckDB and the pipe.

Small jobs (``IN_PROCESS_SPANS`` spans at most: the few traces that settle at a time under light load)
are mapped in the receiver's process instead: they take milliseconds, and a child kept for them would
cost a whole process's memory. ``in_process_spans=None`` maps every job in process and never starts a
child: what ``tracegrade serve`` does unless given ``--mapping-process``: it saves the child's memory
(bench/RESULTS.md, bench_ingest), and mapping then holds the receiver's interpreter lock.

The child serves the large jobs of a backlog (after a burst, or under sustained load). It starts on the
first one (``spawn``: a fork of a process running gRPC threads is not safe), runs at a lower CPU priority
(``CHILD_NICENESS``), exits after ``CHILD_IDLE_SECONDS`` without a job (``close_if_idle``) and ends by
itself when the receiver's process is gone. If it dies, the job fails (the rebuilder retries those traces
later) and the next large job starts a new one.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from datetime import datetime
from typing import Any

import pyarrow as pa

from tracegrade.errors import StoreError
from tracegrade.models.span import LogRecordData, SpanRecord
from tracegrade.store.rows import log_from_row, span_from_row
from tracegrade.store.trajectories import map_traces

__all__ = ["CHILD_NICENESS", "MappingProcess", "map_arrow"]

# Mapping is background work: under a burst of exports the receiver's own threads get the CPU first,
# and the trajectories catch up once it has cycles to spare.
CHILD_NICENESS = 10
PARENT_CHECK_SECONDS = 0.2
# Mapping an agent trace costs tens of microseconds per span (bench/RESULTS.md, trajectory mapper), so a
# job this size holds the receiver's interpreter lock for a few tens of milliseconds at most.
IN_PROCESS_SPANS = 500
CHILD_IDLE_SECONDS = 60.0

ArrowTables = dict[str, pa.Table]


def _start_child(parent_pid: int) -> None:
    """In the child: lower its priority, and end it when the receiver's process is gone (a receiver
    killed with SIGKILL cannot shut its pool down; an orphan would hold its pipes and memory)."""
    os.nice(CHILD_NICENESS)

    def watch_parent() -> None:
        while os.getppid() == parent_pid:
            time.sleep(PARENT_CHECK_SECONDS)
        os._exit(0)

    threading.Thread(target=watch_parent, name="tracegrade-parent-watch", daemon=True).start()


def _rows(table: pa.Table) -> list[tuple]:
    return list(zip(*(column.to_pylist() for column in table.columns)))


def map_arrow(spans: pa.Table, logs: pa.Table, updated_at: datetime) -> ArrowTables:
    """Trajectory tables of the traces in ``spans``: what runs in the child (usable in-process too).

    ``spans`` and ``logs`` have the columns of ``SPAN_SELECT_COLUMNS`` and ``LOG_SELECT_COLUMNS``.
    """
    by_trace: dict[str, list[SpanRecord]] = {}
    resources: dict[str, dict[str, Any]] = {}
    for row in _rows(spans):
        by_trace.setdefault(row[0], []).append(span_from_row(row, resources))
    logs_by_trace: dict[str, list[LogRecordData]] = {}
    for row in _rows(logs):
        logs_by_trace.setdefault(row[0], []).append(log_from_row(row))
    return map_traces(by_trace, logs_by_trace, updated_at).to_arrow()


class MappingProcess:
    """``map_arrow`` for the rebuilder: small jobs (all with ``in_process_spans=None``) in process, large
    ones in one child process; ``map`` blocks until the answer (call from one thread)."""

    def __init__(
        self, in_process_spans: int | None = IN_PROCESS_SPANS, idle_seconds: float = CHILD_IDLE_SECONDS
    ) -> None:
        self.in_process_spans = in_process_spans
        self.idle_seconds = idle_seconds
        self._pool: ProcessPoolExecutor | None = None
        self._lock = threading.Lock()
        self._closed = False
        self._last_used = time.monotonic()

    @property
    def child_running(self) -> bool:
        return self._pool is not None

    def map(self, spans: pa.Table, logs: pa.Table, updated_at: datetime) -> ArrowTables:
        """The trajectory tables of a job: here when it is small, else in the child."""
        if self.in_process_spans is None or spans.num_rows <= self.in_process_spans:
            return map_arrow(spans, logs, updated_at)
        pool = self._ensure_pool()
        try:
            return pool.submit(map_arrow, spans, logs, updated_at).result()
        except BrokenProcessPool as exc:
            with self._lock:
                if self._pool is pool:
                    self._pool = None
            pool.shutdown(wait=False, cancel_futures=True)
            raise StoreError(f"the trajectory mapping process died: {exc}") from None
        finally:
            self._last_used = time.monotonic()

    def close_if_idle(self) -> bool:
        """End the child when it has had no job for ``idle_seconds`` (the next large job starts another);
        True when it was ended."""
        with self._lock:
            pool = self._pool
            if pool is None or time.monotonic() - self._last_used < self.idle_seconds:
                return False
            self._pool = None
        pool.shutdown(wait=True)
        return True

    def _ensure_pool(self) -> ProcessPoolExecutor:
        with self._lock:
            if self._closed:
                raise StoreError("the trajectory mapping process is shut down")
            if self._pool is None:
                spawn = multiprocessing.get_context("spawn")
                self._pool = ProcessPoolExecutor(1, mp_context=spawn, initializer=_start_child, initargs=(os.getpid(),))
            return self._pool

    def close(self) -> None:
        with self._lock:
            self._closed = True
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)
