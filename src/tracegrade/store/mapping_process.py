"""MappingProcess: map traces to trajectory rows in a child process, beside the receiver's own work.

Mapping is pure Python and costs more per span than decoding and storing together; in the receiver's
process it would share one interpreter lock with the request path. Here the rebuilder hands a child
process the stored spans and logs of a set of traces as Arrow tables (read from DuckDB without Python
objects, pickled as Arrow IPC buffers) and gets the four trajectory tables back the same way; the
receiver's process only moves buffers between DuckDB and the pipe.

The child runs at a lower CPU priority (``CHILD_NICENESS``) and starts on first use (``spawn``: a fork
of a process running gRPC threads is not safe), and ends by itself when the receiver's process is
gone. If it dies, the job fails (the rebuilder retries those traces later) and the next job starts a
new one.
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
from tracegrade.store.arrow_pool import use_system_allocator
from tracegrade.store.rows import log_from_row, span_from_row
from tracegrade.store.trajectories import map_traces

__all__ = ["CHILD_NICENESS", "MappingProcess", "map_arrow"]

# Mapping is background work: under a burst of exports the receiver's own threads get the CPU first,
# and the trajectories catch up once it has cycles to spare.
CHILD_NICENESS = 10
PARENT_CHECK_SECONDS = 0.2

ArrowTables = dict[str, pa.Table]


def _start_child(parent_pid: int) -> None:
    """In the child: lower its priority, and end it when the receiver's process is gone (a receiver
    killed with SIGKILL cannot shut its pool down; an orphan would hold its pipes and memory)."""
    os.nice(CHILD_NICENESS)
    use_system_allocator()

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
    """One child process running ``map_arrow``; ``map`` blocks until its answer (call from one thread)."""

    def __init__(self) -> None:
        self._pool: ProcessPoolExecutor | None = None
        self._lock = threading.Lock()
        self._closed = False

    def map(self, spans: pa.Table, logs: pa.Table, updated_at: datetime) -> ArrowTables:
        pool = self._ensure_pool()
        try:
            return pool.submit(map_arrow, spans, logs, updated_at).result()
        except BrokenProcessPool as exc:
            with self._lock:
                if self._pool is pool:
                    self._pool = None
            pool.shutdown(wait=False, cancel_futures=True)
            raise StoreError(f"the trajectory mapping process died: {exc}") from None

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
