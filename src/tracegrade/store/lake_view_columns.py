"""What a tenant's query on a lake learns from the catalog: each table's column names, and which tables were never
written to.

A tenant's query on a lake names every column of each table it reads (``trace_store.tenant_views``' ``columns``).
Reading them (``SELECT * … LIMIT 0``) costs 3 to 10 ms a table, on every query. They change only with the lake's
schema (a migration by any process on the lake, a new column), and DuckLake numbers those changes: each snapshot
records the schema version it was taken at, in the catalog's PostgreSQL database. So the lists are kept for one
schema version, that of the snapshot the query reads (its row, by its primary key: a fraction of a millisecond); a
query at another version reads them again.

DuckLake plans a scan asking its catalog for each column's statistics, and keeps what it found per snapshot; a table
never written to has none, so every query asks again: two catalog round trips per column of every scan of such a
table (bench/RESULTS.md, tables never written to). DuckLake adds a table's statistics in the commit of its first rows
and removes them only with the table, so a table without any, looked up after the query's snapshot was taken, held no
row in that snapshot: its tenant view plans no scan (``tenant_views``' ``empty``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import duckdb

from tracegrade.store.catalog_connection import CatalogConnection
from tracegrade.store.rows import sql_string
from tracegrade.store.trace_store import view_column_names

__all__ = ["SnapshotCatalog", "ViewColumns"]

# DuckLake's own metadata tables, in the schema they were created in (the connection's default: tracegrade names
# none). One snapshot's schema version, and the current tables of one schema without statistics (never written to),
# made at or before it (a table of that name made after it, as after a DROP, is not the one the snapshot holds):
_SNAPSHOT_SQL = """
SELECT (SELECT schema_version FROM ducklake_snapshot WHERE snapshot_id = %(snapshot)s),
       ARRAY(SELECT t.table_name FROM ducklake_table t JOIN ducklake_schema s ON s.schema_id = t.schema_id
             WHERE s.schema_name = %(schema)s AND s.end_snapshot IS NULL AND t.end_snapshot IS NULL
               AND t.begin_snapshot <= %(snapshot)s
               AND NOT EXISTS (SELECT FROM ducklake_table_stats r WHERE r.table_id = t.table_id))
"""
_NEWEST_SNAPSHOT_SQL = "SELECT max(snapshot_id) FROM ducklake_snapshot"
_RELATIONS_SQL = """
SELECT table_name FROM duckdb_tables() WHERE database_name = $database AND schema_name = $schema
UNION ALL SELECT view_name FROM duckdb_views() WHERE database_name = $database AND schema_name = $schema
"""
T = TypeVar("T")


@dataclass(frozen=True)
class SnapshotCatalog:
    """What the catalog tells of the snapshot one transaction reads."""

    schema_version: int | None  # None: the snapshot was expired meanwhile (by a maintenance pass with a short keep)
    unwritten: frozenset[str]  # the tables (of the schema asked about) that held no row in it


class ViewColumns:
    """The tables and views of the lake whose catalog is at ``conninfo``, and their column names."""

    def __init__(self, conninfo: str) -> None:
        self._catalog = CatalogConnection(conninfo)
        self._lock = threading.Lock()
        self._version: int | None = None  # the schema version ``_known_values`` were read at
        self._known_values: dict[object, object] = {}  # column names by source, relation names by schema

    def snapshot(self, cursor: duckdb.DuckDBPyConnection, lake: str, schema: str) -> SnapshotCatalog:
        """What the catalog tells of the snapshot that ``cursor``'s open transaction reads of the lake attached as
        ``lake`` (taken here, if no statement took it yet), with the tables of ``schema`` never written to;
        StoreError when the catalog cannot be read."""
        (snapshot,) = cursor.execute(f"SELECT id FROM ducklake_current_snapshot({sql_string(lake)})").fetchone()  # type: ignore[misc]
        # after the snapshot was taken: a table without statistics now had none in it either
        with self._catalog.cursor("reading the lake's snapshot") as catalog:
            catalog.execute(_SNAPSHOT_SQL, {"snapshot": snapshot, "schema": schema})
            version, unwritten = catalog.fetchone()  # type: ignore[misc]
        return SnapshotCatalog(version, frozenset(unwritten))

    def of(self, cursor: duckdb.DuckDBPyConnection, source: str, version: int | None) -> list[str]:
        """``source``'s column names (a table or view named in full), read on ``cursor`` unless known for
        ``version``, the schema version of the snapshot ``cursor``'s transaction reads (``snapshot``; None: not
        known, so read and not kept)."""
        return self._known(version, source, lambda: view_column_names(cursor, source))

    def relations(
        self, cursor: duckdb.DuckDBPyConnection, database: str, schema: str, version: int | None
    ) -> frozenset[str]:
        """The names of the tables and views of ``database``.``schema``, known per schema version as ``of``'s
        columns are: a query's views are made in its transaction, where naming one that does not exist (a CTE's
        name) would fail the statement and, on DuckDB 2, abort the transaction with it."""
        return self._known(version, (database, schema), lambda: _relation_names(cursor, database, schema))

    def _known(self, version: int | None, key: object, read: Callable[[], T]) -> T:
        """What ``read`` gives for ``key``, read again unless known for ``version`` (None: read, not kept)."""
        if version is None:
            return read()
        with self._lock:
            if version == self._version and key in self._known_values:
                return self._known_values[key]  # type: ignore[return-value]
        value = read()
        with self._lock:
            if version != self._version:  # queries at another version (older or newer) read them again
                self._version, self._known_values = version, {}
            self._known_values[key] = value
        return value

    def newest_snapshot_id(self) -> int:
        """The id of the lake's newest snapshot (a new one at each commit, by any process); StoreError when the
        catalog cannot be read."""
        with self._catalog.cursor("reading the lake's newest snapshot") as cursor:
            cursor.execute(_NEWEST_SNAPSHOT_SQL)
            row = cursor.fetchone()
        return int(row[0]) if row and row[0] is not None else 0

    def close(self) -> None:
        self._catalog.close()


def _relation_names(cursor: duckdb.DuckDBPyConnection, database: str, schema: str) -> frozenset[str]:
    """Lower-case, as a query's names are (``check_read_only``): DuckDB binds a name to a relation whatever the case
    of either, so a relation named in another case must get its tenant view too."""
    rows = cursor.execute(_RELATIONS_SQL, {"database": database, "schema": schema}).fetchall()
    return frozenset(name.lower() for (name,) in rows)
