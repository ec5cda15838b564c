"""Tenants in the store: every row carries the tenant whose token sent (or graded) it.

A receiver started with ``--tokens FILE`` maps each bearer token to a tenant; one started with ``--token``
(or none) has a single tenant, ``DEFAULT_TENANT``, which is also what rows stored before tenants existed
belong to. Rows are keyed by tenant first: two tenants may send the same trace id, and their spans never
meet in one trajectory. A trace is therefore named by a ``TraceKey``, ``(tenant, trace_id)``, wherever
traces of several tenants travel together (the writer's rebuild queue, ``stale_trajectories``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING

from tracegrade.errors import InvalidValueError

if TYPE_CHECKING:  # the receiver's settings import this module before anything loads pyarrow
    import pyarrow as pa

__all__ = [
    "DEFAULT_TENANT",
    "GRADING_TENANT",
    "TENANT_COLUMN",
    "TraceKey",
    "by_tenant",
    "check_tenant_name",
    "grading_for",
    "with_tenant",
]

DEFAULT_TENANT = "default"
TENANT_COLUMN = "tenant"
# Tenant names go into SQL literals, journal records and file names: plain ASCII, no quotes or spaces.
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")

TraceKey = tuple[str, str]  # (tenant, trace_id)

# The tenant a grading runs for, where a process grades for several (the online worker runs each job as its
# rule's tenant): what it caches, such as judge replies, is that tenant's alone.
GRADING_TENANT: ContextVar[str] = ContextVar("tracegrade_grading_tenant", default=DEFAULT_TENANT)


@contextmanager
def grading_for(tenant: str | None) -> Iterator[None]:
    """Within it, what grading caches (judge replies) is ``tenant``'s (``GRADING_TENANT``); None leaves it as is."""
    if tenant is None:
        yield
        return
    grading_as = GRADING_TENANT.set(tenant)
    try:
        yield
    finally:
        GRADING_TENANT.reset(grading_as)


def check_tenant_name(name: object, where: str = "tenant") -> str:
    """``name`` when it is a valid tenant name, else InvalidValueError saying what a name may hold."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise InvalidValueError(
            f"{where}: {name!r} is not a valid tenant name; use 1-64 characters of letters, digits, '_', '.' "
            "or '-', starting with a letter or digit"
        )
    return name


def by_tenant(keys: Iterable[TraceKey]) -> dict[str, list[str]]:
    """Trace ids grouped by tenant, each list in first-seen order without repeats."""
    grouped: dict[str, dict[str, None]] = {}
    for tenant, trace_id in keys:
        grouped.setdefault(tenant, {})[trace_id] = None
    return {tenant: list(ids) for tenant, ids in grouped.items()}


def with_tenant(table: pa.Table, tenant: str) -> pa.Table:
    """``table`` with a ``tenant`` column holding ``tenant`` on every row (replacing one it had)."""
    import pyarrow as pa

    if TENANT_COLUMN in table.column_names:
        table = table.drop_columns([TENANT_COLUMN])
    return table.append_column(TENANT_COLUMN, pa.array([tenant] * table.num_rows, pa.string()))
