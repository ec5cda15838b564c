"""Key repair: find tables whose primary key no longer holds and rebuild them from their own rows.

A failed write or checkpoint can persist a damaged key index: rows that share a key, or an index that
answers "Duplicate key" for keys no row has any more. DuckDB cannot rebuild an index in place, so a damaged
table is rebuilt: its rows (one per key, the newest) are copied aside, the table is dropped and created
again from the schema's own definition (with its key and indexes), and the rows go back, in one
transaction. The tables with keys hold derived data (trajectories, which can be mapped again) or data
whose key is its content (log records), so keeping one row per key loses nothing.
"""

from __future__ import annotations

import functools
import logging
from pathlib import Path

import duckdb

from tracegrade.store.schema import ensure_schema

__all__ = ["KEYED_TABLES", "damaged_keys", "repair_keys"]

log = logging.getLogger(__name__)

# table -> (key columns, the column that says which of several rows with one key is newest)
KEYED_TABLES: dict[str, tuple[tuple[str, ...], str]] = {
    "traces": (("tenant", "trace_id"), "updated_at"),
    "logs": (("tenant", "log_key"), "received_at"),
}


@functools.cache
def _definitions(table: str) -> tuple[str, tuple[str, ...]]:
    """The CREATE TABLE statement and CREATE INDEX statements the schema gives ``table``."""
    scratch = duckdb.connect(":memory:")
    try:
        ensure_schema(scratch, Path(":memory:"))
        (create,) = scratch.execute("SELECT sql FROM duckdb_tables() WHERE table_name = ?", [table]).fetchone()  # type: ignore[misc]
        indexes = scratch.execute("SELECT sql FROM duckdb_indexes() WHERE table_name = ?", [table]).fetchall()
    finally:
        scratch.close()
    return create, tuple(sql for (sql,) in indexes if sql)


def damaged_keys(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    """The keyed tables whose key does not hold, each with what is wrong (a full scan of the key columns)."""
    found: dict[str, str] = {}
    for table, (key, _) in KEYED_TABLES.items():
        columns = ", ".join(key)
        rows, keys = con.execute(f"SELECT count(*), count(DISTINCT ({columns})) FROM {table}").fetchone()  # type: ignore[misc]
        if rows != keys:
            found[table] = f"{rows - keys} rows share a key with another row"
            continue
        constraints = con.execute(
            "SELECT count(*) FROM duckdb_constraints() WHERE table_name = ? AND constraint_type = 'PRIMARY KEY'",
            [table],
        ).fetchone()
        if constraints is None or constraints[0] == 0:
            found[table] = "its primary key is missing"
    return found


def repair_keys(con: duckdb.DuckDBPyConnection, table: str, why: str) -> int:
    """Rebuild ``table`` with one row per key (the newest) and its key and indexes; returns the rows kept.

    The caller holds the store's write lock and no transaction.
    """
    key, newest = KEYED_TABLES[table]
    create, indexes = _definitions(table)
    aside = f"_tracegrade_repair_{table}"
    columns = ", ".join(key)
    con.execute("BEGIN TRANSACTION")
    try:
        con.execute(
            f"CREATE TEMP TABLE {aside} AS SELECT * FROM {table} "
            f"QUALIFY row_number() OVER (PARTITION BY {columns} ORDER BY {newest} DESC NULLS LAST) = 1"
        )
        con.execute(f"DROP TABLE {table}")
        con.execute(create)
        names = [row[0] for row in con.execute(f"DESCRIBE {table}").fetchall()]
        listed = ", ".join(f'"{name}"' for name in names)
        con.execute(f"INSERT INTO {table} ({listed}) SELECT {listed} FROM {aside}")
        for index in indexes:
            con.execute(index)
        con.execute(f"DROP TABLE {aside}")
        (kept,) = con.execute(f"SELECT count(*) FROM {table}").fetchone()  # type: ignore[misc]
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    log.warning("store table %s was damaged (%s) and has been rebuilt with its key: %d rows kept", table, why, kept)
    return int(kept)
