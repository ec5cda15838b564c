"""What a rebuild of stored trajectories reports as it goes, run by ``tracegrade rebuild`` itself or by the receiver
that holds the store file (``POST /v1/rebuild``, which sends it as JSON lines): first how many traces it will
rebuild (``RebuildStart``), then each step committed (``outdated.RebuiltStep``), and last that it is done.

``progress_line`` writes one of them as a line, ``read_progress_line`` reads it back; a line ``{"error": …}`` is the
server's account of why the rebuild ended early (every step before it is committed).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from tracegrade.errors import StoreError
from tracegrade.store.outdated import RebuildScope, RebuiltStep, count_to_rebuild

if TYPE_CHECKING:
    from tracegrade.store.backend import StoreBackend

__all__ = [
    "MAX_BATCH",
    "RebuildDone",
    "RebuildStart",
    "error_line",
    "progress_line",
    "read_progress_line",
    "start_rebuild",
]

# a step's trace keys are listed and held at once, and its count is a SQL LIMIT: a bound far above any useful step
MAX_BATCH = 1_000_000

# tenants listed when --tenant names one without traces: enough to spot the one meant
TENANTS_SHOWN = 20


@dataclass(frozen=True)
class RebuildStart:
    """How many traces the rebuild selected, of which tenant (None: every tenant's), with which mapper revision it
    maps them, and, when it selected none, why there is nothing to rebuild (the line to print)."""

    total: int
    tenant: str | None
    mapper_revision: int
    nothing: str | None = None


@dataclass(frozen=True)
class RebuildDone:
    """Every trace selected at the start was reached (the last line of a rebuild that was not stopped)."""


def start_rebuild(store: StoreBackend, scope: RebuildScope, *, name_tenants: bool = True) -> RebuildStart:
    """Count what ``scope`` selects now; with nothing to rebuild, say why (a tenant the store holds nothing of is
    likely mistyped: with ``name_tenants`` the message lists the tenants that have trajectories, which a caller
    who may see only its own tenant must not be shown)."""
    from tracegrade.trajectory import MAPPER_REVISION

    total = count_to_rebuild(store, scope)
    if total:
        return RebuildStart(total, scope.tenant, MAPPER_REVISION)
    if scope.tenant is not None and _unknown_tenant(store, scope):
        absent = f"tenant {scope.tenant} has no traces in this store"
        return RebuildStart(
            0,
            scope.tenant,
            MAPPER_REVISION,
            f"{_no_traces_of(store, scope.tenant) if name_tenants else absent}; nothing to rebuild",
        )
    whose = f" of tenant {scope.tenant}" if scope.tenant is not None else ""
    which = "stored" if scope.every else "built by an older mapper"
    return RebuildStart(
        0,
        scope.tenant,
        MAPPER_REVISION,
        f"no trajectory{whose} is {which}; nothing to rebuild (mapper revision {MAPPER_REVISION})",
    )


def _unknown_tenant(store: StoreBackend, scope: RebuildScope) -> bool:
    """Whether the store holds nothing of ``scope``'s tenant: no trajectory of any revision, and no span waiting to
    be built into one (a mistyped --tenant, most likely, rather than a tenant whose trajectories are current)."""
    if count_to_rebuild(store, replace(scope, every=True)):
        return False
    return not store.query("SELECT 1 FROM spans WHERE tenant = ? LIMIT 1", [scope.tenant]).rows


def _no_traces_of(store: StoreBackend, tenant: str) -> str:
    """That ``tenant`` has no traces in the store, and which tenants have trajectories there (the first few)."""
    rows = store.query(f"SELECT DISTINCT tenant FROM traces ORDER BY tenant LIMIT {TENANTS_SHOWN + 1}").rows
    if not rows:
        return f"tenant {tenant} has no traces in this store, and no tenant has a trajectory stored"
    tenants = [str(row[0]) for row in rows[:TENANTS_SHOWN]]
    more = ", …" if len(rows) > TENANTS_SHOWN else ""
    return (
        f"tenant {tenant} has no traces in this store; the tenants with trajectories: {', '.join(tenants)}{more} "
        '(`tracegrade sql "SELECT tenant, count(*) FROM traces GROUP BY tenant"` with the same --store lists them '
        "all): check the name given to --tenant"
    )


def progress_line(event: RebuildStart | RebuiltStep | RebuildDone) -> bytes:
    """``event`` as one line of JSON."""
    document: dict[str, Any]
    if isinstance(event, RebuildStart):
        start = {"total": event.total, "tenant": event.tenant, "mapper_revision": event.mapper_revision}
        document = {"start": start}
        if event.nothing is not None:
            document["start"]["nothing"] = event.nothing
    elif isinstance(event, RebuiltStep):
        step = {"traces": event.traces, "with_spans": event.with_spans, "mapping_batches": event.mapping_batches}
        document = {"step": step}
    else:
        document = {"done": True}
    return json.dumps(document).encode() + b"\n"


def error_line(reason: str) -> bytes:
    """The last line of a rebuild that ended early, saying why (every step before it is committed)."""
    return json.dumps({"error": reason}).encode() + b"\n"


def read_progress_line(line: bytes) -> RebuildStart | RebuiltStep | RebuildDone:
    """The event a line of ``progress_line`` holds. StoreError: the line is an ``{"error": …}`` (its message), or
    is none of these (ValueError: said so)."""
    document = json.loads(line)
    if not isinstance(document, dict):
        raise ValueError(f"not a JSON object: {line[:80]!r}")
    if isinstance(document.get("error"), str):
        raise StoreError(document["error"])
    try:
        if "start" in document:
            start = document["start"]
            tenant, nothing = start["tenant"], start.get("nothing")
            return RebuildStart(
                int(start["total"]),
                None if tenant is None else str(tenant),
                int(start["mapper_revision"]),
                None if nothing is None else str(nothing),
            )
        if "step" in document:
            step = document["step"]
            return RebuiltStep(int(step["traces"]), int(step["with_spans"]), int(step["mapping_batches"]))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ValueError(f"{exc!r} in {line[:80]!r}") from None
    if document.get("done") is True:
        return RebuildDone()
    raise ValueError(f"no start, step, done or error in {line[:80]!r}")
