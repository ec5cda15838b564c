"""Read access to a store from another process: the file itself, or the server that holds it.

``open_store_for_read`` opens the DuckDB file read-only; when `tracegrade serve` holds the file (DuckDB
then refuses every other opener) it finds the server through the ``<store>.server.json`` sidecar that
serve writes ({"pid", "http_url"}) and queries it over HTTP instead.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import pyarrow as pa

from tracegrade.errors import StoreLockedError
from tracegrade.store.lake_location import is_lake_location
from tracegrade.store.query_control import QueryControl
from tracegrade.store.remote import RemoteStore
from tracegrade.store.results import QueryResult
from tracegrade.store.trace_store import TraceStore

__all__ = [
    "ReadableStore",
    "ServerInfo",
    "open_store_for_read",
    "read_sidecar",
    "server_holding",
    "sidecar_path",
]


class ReadableStore(Protocol):
    """What read-only commands need: TraceStore (read-only file) and RemoteStore both provide it."""

    def query(
        self, sql: str, params: Sequence[Any] | None = None, *, control: QueryControl | None = None
    ) -> QueryResult: ...

    def query_arrow(self, sql: str, params: Sequence[Any] | None = None) -> pa.Table: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class ServerInfo:
    pid: int | None
    http_url: str


def sidecar_path(store_path: str | Path) -> Path:
    """Where `tracegrade serve` announces itself for this store: ``<store>.server.json``."""
    return Path(f"{store_path}.server.json")


def read_sidecar(store_path: str | Path) -> ServerInfo | None:
    """The server announced for this store, or None (no sidecar, or one that is unreadable)."""
    try:
        data = json.loads(sidecar_path(store_path).read_text(encoding="utf-8"))
        return ServerInfo(pid=data.get("pid"), http_url=str(data["http_url"]))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def server_holding(store_path: str | Path, token: str | None = None) -> RemoteStore | None:
    """A client for the live server announced by the sidecar, or None when none answers."""
    info = read_sidecar(store_path)
    if info is None:
        return None
    remote = RemoteStore(info.http_url, token)
    return remote if remote.is_alive() else None


def open_store_for_read(path: str | Path, token: str | None = None) -> ReadableStore:
    """The store file opened read-only, or the running server that holds it; a lake location
    (``ducklake:postgres:...``) opens the lake read-only.

    ``token`` defaults to the TRACEGRADE_TOKEN environment variable. Raises StoreLockedError when
    another process holds the file and no server answers for it, StoreError when the store is
    missing, corrupt or not a tracegrade store.
    """
    token = token or os.environ.get("TRACEGRADE_TOKEN") or None
    if is_lake_location(path):  # a lake has no single holder: every reader opens it itself
        from tracegrade.store.lake import LakeStore

        return LakeStore(str(path), read_only=True)
    try:
        return TraceStore(path, read_only=True)
    except StoreLockedError:
        remote = server_holding(path, token)
        if remote is not None:
            return remote
        raise
