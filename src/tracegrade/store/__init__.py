"""The DuckDB trace store: spans, logs and trajectory tables, its single writer and read access.

Schema: see SCHEMA.md in this package. Entry points: ``StoreBackend`` (the store seam every backend
implements) and ``open_store`` (a DuckDB file or a lake, by location), ``TraceStore`` (the file),
``StoreWriter`` (the receiver's single writer thread), ``open_store_for_read`` (CLI readers: the file, or
the server holding it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tracegrade._lazy import lazy_exports

if TYPE_CHECKING:
    from tracegrade.store.access import ReadableStore, ServerInfo, open_store_for_read, read_sidecar, sidecar_path
    from tracegrade.store.backend import StoreBackend, open_store
    from tracegrade.store.readonly import check_read_only
    from tracegrade.store.remote import RemoteStore
    from tracegrade.store.results import QueryResult, WriteResult
    from tracegrade.store.retention import RetentionPolicy, TenantScope
    from tracegrade.store.schema import SCHEMA_VERSION, TABLES
    from tracegrade.store.trace_deletion import Deleted
    from tracegrade.store.trace_store import TraceStore
    from tracegrade.store.writer import QueueFull, StoreWriter

# Names resolve on first use (PEP 562), so a process that needs one submodule (the receiver's mapping
# process needs only the trajectory rows) does not load DuckDB with the rest.
_HOMES = {
    "SCHEMA_VERSION": "schema",
    "TABLES": "schema",
    "Deleted": "trace_deletion",
    "QueryResult": "results",
    "QueueFull": "writer",
    "ReadableStore": "access",
    "RemoteStore": "remote",
    "RetentionPolicy": "retention",
    "ServerInfo": "access",
    "StoreBackend": "backend",
    "open_store": "backend",
    "StoreWriter": "writer",
    "TenantScope": "retention",
    "TraceStore": "trace_store",
    "WriteResult": "results",
    "check_read_only": "readonly",
    "open_store_for_read": "access",
    "read_sidecar": "access",
    "sidecar_path": "access",
}

__all__ = [
    "SCHEMA_VERSION",
    "TABLES",
    "Deleted",
    "QueryResult",
    "QueueFull",
    "ReadableStore",
    "RemoteStore",
    "RetentionPolicy",
    "ServerInfo",
    "StoreBackend",
    "StoreWriter",
    "TenantScope",
    "TraceStore",
    "WriteResult",
    "check_read_only",
    "open_store",
    "open_store_for_read",
    "read_sidecar",
    "sidecar_path",
]


__getattr__, __dir__ = lazy_exports(__name__, {name: f"{__name__}.{home}" for name, home in _HOMES.items()})
