"""Read-only SQL gate: only one SELECT (or EXPLAIN of a SELECT) may run against the store.

The statement type comes from DuckDB's own parser (``duckdb.extract_statements``), so comments,
case and whitespace cannot hide a write. Queries also run inside a transaction that is rolled back,
so even a function with side effects cannot change stored data.
"""

from __future__ import annotations

import re

import duckdb

from tracegrade.errors import StoreError

__all__ = ["check_read_only"]

_EXPLAIN_PREFIX = re.compile(r"^\s*explain\s+(?:\([^)]*\)\s*)?(?:analy[sz]e\s+)?", re.IGNORECASE)


def check_read_only(sql: str) -> None:
    """Raise StoreError unless ``sql`` is exactly one read-only statement."""
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as exc:
        raise StoreError(f"the SQL does not parse: {exc}") from None
    if not statements:
        raise StoreError("no SQL statement given; pass one SELECT statement")
    if len(statements) > 1:
        raise StoreError(
            f"{len(statements)} statements given; the store accepts exactly one read-only statement per query"
        )
    statement = statements[0]
    if statement.type == duckdb.StatementType.EXPLAIN:
        inner = _EXPLAIN_PREFIX.sub("", statement.query, count=1)
        if inner != statement.query:
            check_read_only(inner)
            return
    if statement.type != duckdb.StatementType.SELECT:
        raise StoreError(
            f"{statement.type.name} statements are not allowed: the store is read-only here "
            "(use SELECT, WITH … SELECT, DESCRIBE, SHOW, SUMMARIZE or EXPLAIN)"
        )
