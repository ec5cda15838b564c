"""The query sandbox's gate: only one SELECT that reads the store's own tables may run.

Two layers keep a query inside the store. The connection itself is locked down (``lock_down``): no file
or network access, no extension installed or loaded, configuration frozen. This gate then refuses, before
anything runs, every statement that is not exactly one SELECT (or EXPLAIN of one) and every function that
reads outside the store or has a side effect. Statement types come from DuckDB's own parser
(``duckdb.extract_statements``) and the functions a query calls from its parse tree
(``json_serialize_sql``), so comments, case, quoting or nesting cannot hide them. Queries also run inside a
transaction that is rolled back, so nothing a query does can change stored data.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from typing import Any

import duckdb

from tracegrade.errors import QueryRefused, StoreError

__all__ = [
    "ALLOWED_TABLE_FUNCTIONS",
    "REFUSED_FUNCTIONS",
    "SANDBOX_SETTINGS",
    "check_read_only",
    "lock_down",
    "refusal",
]

_EXPLAIN_PREFIX = re.compile(r"^\s*explain\s+(?:\([^)]*\)\s*)?(?:analy[sz]e\s+)?", re.IGNORECASE)

# Table functions a query may call: they compute rows or read the store's own catalog. Every other one
# (read_csv, read_text, glob, parquet_scan, query, checkpoint, pragma_*, duckdb_settings …) reads
# files, runs SQL it was handed as a string, changes state or tells about the host.
ALLOWED_TABLE_FUNCTIONS = frozenset(
    {"range", "generate_series", "unnest", "json_each", "json_tree", "duckdb_tables", "duckdb_columns", "duckdb_views"}
)
# Scalar functions with a side effect (sequences, the random seed) or that read the server's settings.
REFUSED_FUNCTIONS = frozenset({"current_setting", "nextval", "currval", "setseed", "getvariable"})
# Applied in this order; ``lock_configuration`` last, since it freezes every setting (this one included).
SANDBOX_SETTINGS: tuple[tuple[str, str], ...] = (
    ("enable_external_access", "false"),
    ("autoinstall_known_extensions", "false"),
    ("autoload_known_extensions", "false"),
    ("allow_community_extensions", "false"),
    ("lock_configuration", "true"),
)

_parser_lock = threading.Lock()
_parser: duckdb.DuckDBPyConnection | None = None


def lock_down(con: duckdb.DuckDBPyConnection) -> None:
    """Apply ``SANDBOX_SETTINGS`` to a connection's database (after it has attached what it needs: from
    now on it can open no file). Settings this DuckDB release does not know are skipped."""
    for name, value in SANDBOX_SETTINGS:
        try:
            con.execute(f"SET {name} = {value}")
        except duckdb.CatalogException:
            continue  # an older release without this setting (the others still apply)


def check_read_only(sql: str) -> None:
    """Raise QueryRefused unless ``sql`` is exactly one read-only statement that stays inside the store."""
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as exc:
        raise QueryRefused(f"the SQL does not parse: {exc}") from None
    if not statements:
        raise QueryRefused("no SQL statement given; pass one SELECT statement")
    if len(statements) > 1:
        raise QueryRefused(
            f"{len(statements)} statements given; the store accepts exactly one read-only statement per query"
        )
    statement = statements[0]
    if statement.type == duckdb.StatementType.EXPLAIN:
        inner = _EXPLAIN_PREFIX.sub("", statement.query, count=1)
        if inner != statement.query:
            check_read_only(inner)
            return
    if statement.type != duckdb.StatementType.SELECT:
        raise QueryRefused(
            f"{statement.type.name} statements are not allowed: the store is read-only here "
            "(use SELECT, WITH … SELECT, DESCRIBE, SHOW, SUMMARIZE or EXPLAIN)"
        )
    _check_functions(statement.query)


def _parse_tree(sql: str) -> dict[str, Any]:
    global _parser
    with _parser_lock:
        if _parser is None:
            _parser = duckdb.connect(":memory:")
            lock_down(_parser)
        (document,) = _parser.execute("SELECT json_serialize_sql(?)", [sql]).fetchone()  # type: ignore[misc]
    return json.loads(document)


def _check_functions(sql: str) -> None:
    tree = _parse_tree(sql)
    if tree.get("error"):
        # DuckDB serializes plain SELECTs only; PIVOT and the like are rewritten into other statements
        raise QueryRefused(
            f"this form of query is not supported by the read-only store ({tree.get('error_message', 'unknown')}); "
            "write it as a plain SELECT (PIVOT/UNPIVOT as GROUP BY, for instance)"
        )
    for kind, name in _functions(tree):
        if kind == "table" and name not in ALLOWED_TABLE_FUNCTIONS:
            raise QueryRefused(
                f"table function {name}() is not allowed: queries read the store's tables only "
                f"(allowed table functions: {', '.join(sorted(ALLOWED_TABLE_FUNCTIONS))})"
            )
        if kind == "scalar" and name in REFUSED_FUNCTIONS:
            raise QueryRefused(f"function {name}() is not allowed: it changes or reveals the server's state")


def _functions(node: Any) -> Iterator[tuple[str, str]]:
    """Every ("table" | "scalar", lower-case name) called anywhere in a serialized parse tree."""
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if item.get("type") == "TABLE_FUNCTION":
                function = item.get("function") or {}
                yield "table", str(function.get("function_name", "")).lower()
            elif item.get("class") == "FUNCTION" and "function_name" in item:
                yield "scalar", str(item["function_name"]).lower()
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def refusal(exc: duckdb.Error) -> StoreError:
    """A DuckDB permission error from a locked-down connection, said as the sandbox's refusal."""
    return QueryRefused(f"the query tried to reach outside the store and was refused: {str(exc).splitlines()[0]}")
