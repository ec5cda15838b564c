"""The column names a tenant's guarded views list on a lake, kept per DuckLake schema version.

A tenant's query on a lake names every column of each table it reads (``TraceStore._scope``, ``guard_columns``).
Reading them (``SELECT * … LIMIT 0``) is a DuckLake transaction of its own, 3 to 10 ms a table, on every query. They
change only with the lake's schema (a migration by any process on the lake, a new column), and DuckLake numbers
those changes: each snapshot records the schema version it was taken at, in the catalog's PostgreSQL database. So
the lists are kept for one schema version, read from PostgreSQL on every query (the newest snapshot's row, by its
primary key: a fraction of a millisecond); a newer version drops them all.
"""

from __future__ import annotations

import threading

import duckdb

from tracegrade.store.catalog_connection import CatalogConnection
from tracegrade.store.trace_store import view_column_names

__all__ = ["ViewColumns"]

# DuckLake's own metadata table, in the schema it was created in (the connection's default: tracegrade names none)
_SCHEMA_VERSION_SQL = "SELECT schema_version FROM ducklake_snapshot ORDER BY snapshot_id DESC LIMIT 1"


class ViewColumns:
    """The column names of the tables and views of the lake whose catalog is at ``conninfo``."""

    def __init__(self, conninfo: str) -> None:
        self._catalog = CatalogConnection(conninfo)
        self._lock = threading.Lock()
        self._version: int | None = None  # the schema version ``_columns`` were read at (or after)
        self._columns: dict[str, list[str]] = {}

    def of(self, cursor: duckdb.DuckDBPyConnection, source: str) -> list[str]:
        """``source``'s column names (a table or view named in full), read on ``cursor`` unless known for the lake's
        current schema version; StoreError when the catalog cannot be read."""
        version = self._schema_version()
        with self._lock:
            if version == self._version and source in self._columns:
                return self._columns[source]
        # read after the version: these are the columns of that version or of a newer one, never of an older one
        names = view_column_names(cursor, source)
        with self._lock:
            if version != self._version:
                self._version, self._columns = version, {}
            self._columns[source] = names
        return names

    def _schema_version(self) -> int:
        with self._catalog.cursor("reading the lake's schema version") as cursor:
            cursor.execute(_SCHEMA_VERSION_SQL)
            row = cursor.fetchone()
        return int(row[0]) if row else 0

    def close(self) -> None:
        self._catalog.close()
