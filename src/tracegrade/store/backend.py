"""The store seam: what the write path, the rebuilder, the receiver and the graders need of a store.

Two implementations: ``TraceStore`` (one DuckDB file, one writing process) and ``LakeStore`` (a DuckLake:
catalog in PostgreSQL, Parquet files, many processes). ``ingest/`` and ``evaluation/`` hold a
``StoreBackend`` and never ask which one it is; ``open_store`` picks it from the location. A third
backend (ClickHouse, say) implements the same three parts:

- **write**: ``write_batch`` commits prepared submissions in one transaction, skipping records it already
  holds, and marks the traces it touched in ``builds``; ``write_records`` for recorded runs (see
  ``grading_tables``), ``job_queue`` for online grading's jobs (see ``grading_jobs``) and ``expire`` for
  retention (see ``retention``);
  ``commit_seconds`` says how long a writer should gather submissions into one commit; a store with
  ``wal=False`` is durable only after ``checkpoint`` (its writer schedules them from
  ``uncheckpointed_bytes``/``uncheckpointed_since``/``span_group``).
- **read**: ``query``/``query_arrow`` (one read-only statement; with ``tenant``, it sees that tenant's rows
  only) and ``load_arrow`` (a set of one tenant's traces' spans and logs).
- **rebuild**: ``builds`` (the build queue: which traces wait, claimed by one builder at a time; a trace
  is a ``TraceKey``, tenant and trace id), ``replace_trajectories`` and ``stale_trajectories``.

A store that cannot go on (an invalidated database, an unreachable catalog, a full data path) sets
``failure``; its owner closes it and opens it again (the receiver replays its journal then).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import pyarrow as pa

from tracegrade.store.build_queue import BuildQueue
from tracegrade.store.grading_jobs import JobQueue
from tracegrade.store.prepared import PreparedWrite
from tracegrade.store.query_control import QueryControl
from tracegrade.store.results import QueryResult
from tracegrade.store.retention import TenantScope
from tracegrade.store.row_groups import RowGroupFill
from tracegrade.store.tenancy import TraceKey
from tracegrade.store.trace_deletion import Deleted

if TYPE_CHECKING:
    from tracegrade.store.trace_store import BatchWrite

__all__ = ["StoreBackend", "open_store"]


class StoreBackend(Protocol):
    """A trace store, read-write or read-only (see the module docstring)."""

    read_only: bool
    wal: bool  # a commit is durable when it returns
    failure: str | None  # why the store must be reopened before it writes again
    uncheckpointed_bytes: int
    uncheckpointed_since: float | None
    span_group: RowGroupFill

    @property
    def path(self) -> Path | str:
        """The location, fit for messages (never a password)."""

    @property
    def closed(self) -> bool: ...

    @property
    def commit_seconds(self) -> float:
        """How long a writer gathers submissions before it commits them (0: commit at once)."""

    @property
    def rebuild_traces(self) -> int:
        """How many traces one build claims (and maps and replaces in one transaction)."""

    @property
    def builds(self) -> BuildQueue: ...

    # -- write
    def write_batch(self, submissions: Sequence[PreparedWrite]) -> BatchWrite: ...

    def write_records(self, tables: Mapping[str, pa.Table]) -> None: ...

    def job_queue(self) -> JobQueue: ...

    def expire(self, cutoff: datetime, *, scope: TenantScope = ...) -> Deleted: ...

    def forget(self, trace_ids: Sequence[str], tenant: str = ..., *, delete_runs: bool = ...) -> Deleted: ...

    def checkpoint(self) -> None: ...

    def mark_failed(self, reason: str) -> None:
        """Refuse writes from now on: the owner must reopen the store (and replay what it journaled)."""

    # -- read
    def query(
        self,
        sql: str,
        params: Sequence[Any] | None = None,
        *,
        control: QueryControl | None = None,
        tenant: str | None = None,
    ) -> QueryResult: ...

    def query_arrow(
        self,
        sql: str,
        params: Sequence[Any] | None = None,
        *,
        control: QueryControl | None = None,
        tenant: str | None = None,
    ) -> pa.Table: ...

    def load_arrow(self, trace_ids: Sequence[str], tenant: str = ...) -> tuple[pa.Table, pa.Table]: ...

    # -- rebuild
    def stamp(self) -> datetime: ...

    def replace_trajectories(self, tables: dict[str, pa.Table], *, clear: Sequence[str], tenant: str = ...) -> None: ...

    def replacing_exclusively(self) -> AbstractContextManager[None]: ...

    def stale_trajectories(self, limit: int | None = None, *, tenant: str | None = None) -> list[TraceKey]:
        """The traces waiting for their trajectory to be built, longest-waiting first (``tenant``'s only, when
        given)."""

    def close(self) -> None: ...


def open_store(
    location: str | Path,
    *,
    read_only: bool = False,
    data_path: str | Path | None = None,
    memory_limit: str | None = None,
    query_memory_limit: str | None = None,
    journaled: bool = False,
) -> StoreBackend:
    """Open the store at ``location``: a DuckDB file, or a lake (``ducklake:postgres:<conninfo>``, whose
    Parquet files go under ``data_path``). ``journaled``: the caller keeps its own log of every write (the
    receiver's request journal), so a file store need not write a WAL. Raises StoreError."""
    from tracegrade.store.lake_location import is_lake_location

    if is_lake_location(location):
        from tracegrade.store.lake import LakeStore

        return LakeStore(
            str(location),
            data_path=data_path,
            read_only=read_only,
            memory_limit=memory_limit,
            query_memory_limit=query_memory_limit,
        )
    from tracegrade.store.trace_store import TraceStore

    if not read_only:
        Path(location).parent.mkdir(parents=True, exist_ok=True)
    return TraceStore(
        location,
        read_only=read_only,
        memory_limit=memory_limit,
        query_memory_limit=query_memory_limit,
        wal=not journaled,
    )
