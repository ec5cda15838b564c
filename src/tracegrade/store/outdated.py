"""Trajectories an older mapper built: how many a store holds, and rebuilding them a step at a time.

Each ``traces`` row carries the revision of the mapper that built it (``mapper_revision``; NULL in rows built
before schema version 13). A row whose revision is NULL or below ``tracegrade.trajectory.MAPPER_REVISION`` holds
what an older mapper derived and stays so until its trace is rebuilt: a receiver rebuilds a trace only when new
spans of it arrive. ``rebuild_steps`` rebuilds them in the order of their keys, each step committed before the
next begins, and a rebuilt trace carries the current revision: a rebuild stopped halfway and started again goes on
with the traces it had not reached.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tracegrade.store.mapping_batches import DEFAULT_MAPPING_BATCH_BYTES
from tracegrade.store.rebuilder import RebuildStats, rebuild_traces
from tracegrade.store.tenancy import TraceKey

if TYPE_CHECKING:
    from tracegrade.store.backend import StoreBackend

__all__ = ["LIST_PAGE", "RebuildScope", "RebuiltStep", "count_to_rebuild", "outdated_count", "rebuild_steps"]

# trace keys listed per query: each listing reads the whole traces table (a lake's view deduplicates every build
# first), so a page holds many steps
LIST_PAGE = 10_000


def _revision() -> int:
    # imported here: the package's first import loads the whole mapper, which a store's readers never need
    from tracegrade.trajectory import MAPPER_REVISION

    return MAPPER_REVISION


@dataclass(frozen=True)
class RebuildScope:
    """Which stored trajectories to rebuild: the out-of-date ones, or ``every`` one; of every tenant, or one."""

    every: bool = False
    tenant: str | None = None

    def where(self) -> tuple[list[str], list[Any]]:
        """The conditions on ``traces`` selecting these traces, and their parameters."""
        conditions: list[str] = []
        params: list[Any] = []
        if not self.every:
            conditions.append("(mapper_revision IS NULL OR mapper_revision < ?)")
            params.append(_revision())
        if self.tenant is not None:
            conditions.append("tenant = ?")
            params.append(self.tenant)
        return conditions, params


@dataclass(frozen=True)
class RebuiltStep:
    """One step rebuilt and committed: how many traces, how many of them still had spans (a trace without
    any loses its trajectory rows, as ``rebuild_traces`` does), and in how many batches their spans were mapped."""

    traces: int
    with_spans: int
    mapping_batches: int


def outdated_count(store: StoreBackend) -> int:
    """How many of the store's traces (every tenant's) hold a trajectory an older mapper built."""
    return count_to_rebuild(store, RebuildScope())


def count_to_rebuild(store: StoreBackend, scope: RebuildScope) -> int:
    """How many traces ``scope`` selects now."""
    conditions, params = scope.where()
    where = f" WHERE {' AND '.join(conditions)}" if conditions else ""
    return int(store.query(f"SELECT count(*) FROM traces{where}", params).rows[0][0])


def _page(store: StoreBackend, scope: RebuildScope, after: TraceKey | None, size: int) -> list[TraceKey]:
    """The next ``size`` traces ``scope`` selects whose key follows ``after``, in key order."""
    conditions, params = scope.where()
    if after is not None:
        conditions.append("(tenant > ? OR (tenant = ? AND trace_id > ?))")
        params += [after[0], after[0], after[1]]
    where = f" WHERE {' AND '.join(conditions)}" if conditions else ""
    rows = store.query(
        f"SELECT tenant, trace_id FROM traces{where} ORDER BY tenant, trace_id LIMIT {int(size)}", params
    )
    return [(str(tenant), str(trace_id)) for tenant, trace_id in rows.rows]


def rebuild_steps(
    store: StoreBackend,
    scope: RebuildScope,
    *,
    step: int | None = None,
    max_bytes: int = DEFAULT_MAPPING_BATCH_BYTES,
) -> Iterator[RebuiltStep]:
    """Rebuild the trajectories ``scope`` selects, ``step`` traces at a time (default: the store's build chunk,
    ``rebuild_traces``), mapped ``max_bytes`` of stored spans at a time, each step committed before it is yielded:
    a caller that stops iterating leaves every step it was given done. Traces are listed in key order,
    ``LIST_PAGE`` at a time (``step`` when larger), so every trace selected when its page is listed is reached
    once, even one that a receiver rebuilt meanwhile or that ``every`` selects again."""
    size = step or store.rebuild_traces
    after: TraceKey | None = None
    while keys := _page(store, scope, after, max(size, LIST_PAGE)):
        for start in range(0, len(keys), size):
            chunk = keys[start : start + size]
            stats = RebuildStats()
            with_spans = rebuild_traces(store, chunk, max_bytes=max_bytes, stats=stats)
            yield RebuiltStep(len(chunk), with_spans, stats.mapping_batches)
        after = keys[-1]
