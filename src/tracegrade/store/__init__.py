"""The DuckDB trace store: spans, logs and trajectory tables, its single writer and read access.

Schema: see SCHEMA.md in this package. Entry points: ``TraceStore`` (the file), ``StoreWriter`` (the
receiver's single writer thread), ``open_store_for_read`` (CLI readers: the file, or the server holding it).
"""

from tracegrade.store.access import ReadableStore, ServerInfo, open_store_for_read, read_sidecar, sidecar_path
from tracegrade.store.readonly import check_read_only
from tracegrade.store.remote import RemoteStore
from tracegrade.store.results import QueryResult, WriteResult
from tracegrade.store.schema import SCHEMA_VERSION, TABLES
from tracegrade.store.trace_store import TraceStore
from tracegrade.store.writer import QueueFull, StoreWriter

__all__ = [
    "SCHEMA_VERSION",
    "TABLES",
    "QueryResult",
    "QueueFull",
    "ReadableStore",
    "RemoteStore",
    "ServerInfo",
    "StoreWriter",
    "TraceStore",
    "WriteResult",
    "check_read_only",
    "open_store_for_read",
    "read_sidecar",
    "sidecar_path",
]
