"""The query sandbox's gate: only one SELECT that reads the store's own tables may run.

Two layers keep a query inside the store. The connection itself is locked down (``lock_down``): no file
or network access, no extension installed or loaded (and, in the grading sandbox, configuration frozen). This
gate then refuses, before anything runs, every statement that is not exactly one SELECT (or EXPLAIN of one) and
every function that reads outside the store or has a side effect. Statement types come from DuckDB's own parser
(``duckdb.extract_statements``) and the functions a query calls from its parse tree (``json_serialize_sql``), so
comments, case, quoting or nesting cannot hide them. Queries also run inside a transaction that is rolled back,
so nothing a query does can change stored data.

A query is also refused when planning it alone would cost too much: DuckDB's optimizer does not check for an
interrupt, so a join of a hundred tables (minutes of planning) or thousands of UNION branches (gigabytes) would run
on past any time limit. ``MAX_QUERY_RELATIONS`` and ``MAX_QUERY_SELECTS`` bound what one statement reads and holds,
and ``MAX_QUERY_CHARS`` its length: the check itself parses the statement, before any time limit applies. So is
one function call that would build a huge value (``repeat('x', 2000000000)``, a scalar ``range(30000000)``): DuckDB
looks for an interrupt only between chunks and does not count such a value against memory_limit, so its size must
be written in the query, within a cap (``built_values``).

Every query is also refused the system views that tell about the server rather than the store (attached
databases and their paths or connection strings, settings, logs: only ``ALLOWED_SYSTEM_VIEWS`` may be read),
``stats()`` (it reports a whole table's statistics, past any view of some of its rows) and a lake's metadata
catalog (``__ducklake_metadata_*``: the PostgreSQL database behind the catalog, its roles and sessions).

A tenant's query (``scoped=True``) runs where every store table's name is taken by a view of that tenant's
rows (``TraceStore`` makes them per query), so it must name tables the way that reaches those views: no
catalog- or schema-qualified name (``information_schema`` excepted), no time travel (``AT``), none of the
system catalog's views or ``duckdb_tables()`` (they count every tenant's rows), no ``EXPLAIN`` (a plan
shows the statistics of every tenant's rows), and none of the server's counters of queries, connections and
transactions (``SCOPED_REFUSED_FUNCTIONS``: they count every tenant's).
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import duckdb

from tracegrade.errors import QueryRefused, StoreError
from tracegrade.store.built_values import BuiltValues
from tracegrade.store.database import quote_identifier

__all__ = [
    "ALLOWED_SYSTEM_VIEWS",
    "ALLOWED_TABLE_FUNCTIONS",
    "MAX_QUERY_CHARS",
    "MAX_QUERY_RELATIONS",
    "MAX_QUERY_SELECTS",
    "REFUSED_FUNCTIONS",
    "SANDBOX_SETTINGS",
    "SCOPED_REFUSED_FUNCTIONS",
    "SCOPED_TABLE_FUNCTIONS",
    "SandboxLimits",
    "check_read_only",
    "lock_down",
    "refusal",
]

# whitespace and comments before a statement's first word, matched one way only (each alternative starts with its
# own character and cannot run past its end), so that a text that does not match fails in linear time: with
# (?:\s+|…)* a run of 26 spaces before a "(" took 6 s to fail
_LEADING_COMMENTS = r"^(?:\s|--[^\n]*(?:\n|$)|/\*(?:[^*]|\*(?!/))*\*/)*"
_EXPLAIN_PREFIX = re.compile(
    _LEADING_COMMENTS + r"explain\s+(?:\([^)]*\)\s*)?(?:analy[sz]e\s+)?", re.IGNORECASE | re.DOTALL
)
# the statement's first word, after any comments: DuckDB files USE under SET and ANALYZE under VACUUM, and the
# refusal should name what the user wrote
_LEADING_KEYWORD = re.compile(_LEADING_COMMENTS + r"([A-Za-z]+)", re.DOTALL)

# Table functions a query may call: they compute rows or read the store's own catalog. Every other one
# (read_csv, read_text, glob, parquet_scan, query, checkpoint, pragma_*, duckdb_settings …) reads
# files, runs SQL it was handed as a string, changes state or tells about the host.
ALLOWED_TABLE_FUNCTIONS = frozenset(
    {"range", "generate_series", "unnest", "json_each", "json_tree", "duckdb_tables", "duckdb_columns", "duckdb_views"}
)
# What a tenant's query may call: duckdb_tables() is left out, as it counts the rows of every tenant.
SCOPED_TABLE_FUNCTIONS = ALLOWED_TABLE_FUNCTIONS - {"duckdb_tables"}
# The one schema a tenant's query may name: its views describe tables and columns, never rows or counts.
_SCOPED_SCHEMA = "information_schema"
# Scalar functions with a side effect (sequences, the random seed), that read the server's settings, or that
# report a column's statistics over every row of its table (stats: past a tenant's view, past a sandbox's DELETE).
REFUSED_FUNCTIONS = frozenset({"current_setting", "nextval", "currval", "setval", "setseed", "getvariable", "stats"})
# What a tenant's query may not call besides: counters of every query, connection and transaction the server ran,
# whoever ran it, so that one tenant polling them would watch another's queries and ingestion come and go.
SCOPED_REFUSED_FUNCTIONS = REFUSED_FUNCTIONS | {
    "current_query_id",
    "current_connection_id",
    "current_transaction_id",
    "txid_current",
}
# The system catalog's views (outside information_schema) a query not scoped to a tenant may read: they describe
# the store's schemas, tables, columns and types. The others tell about the server: attached databases with their
# paths and connection strings (duckdb_databases, pragma_database_list, pg_database), settings (pg_settings),
# logs and prepared statements.
ALLOWED_SYSTEM_VIEWS = frozenset(
    {
        "duckdb_columns",
        "duckdb_constraints",
        "duckdb_indexes",
        "duckdb_schemas",
        "duckdb_tables",
        "duckdb_types",
        "duckdb_views",
        "sqlite_master",
        "sqlite_schema",
        "pg_attribute",
        "pg_class",
        "pg_constraint",
        "pg_index",
        "pg_indexes",
        "pg_namespace",
        "pg_tables",
        "pg_type",
        "pg_views",
    }
)
# What one statement may read (tables, views, CTE references, subqueries, table functions and VALUES lists in its
# FROM clauses) and how many SELECTs it may hold (UNION branches, subqueries, CTEs). DuckDB 1.5 plans a join of 60
# tables chained on equalities in about a second, of 80 in 4-14 s, of 120 in 45 s, and 10,000 UNION branches in
# 8 s and 1.7 GB (30,000: past 8 GB), none of it interruptible; at these limits planning takes well under a second.
MAX_QUERY_RELATIONS = 50
MAX_QUERY_SELECTS = 500
# The longest statement checked: parsing and checking 5.5 MB of SQL (300,000 columns) took 5 s and 1 GB, and DuckDB
# 12 s and 2 GB in all, past a 5 s time limit; 1 MiB costs about a second. Checks share one parser, one at a time.
MAX_QUERY_CHARS = 1024 * 1024
# the serialized parse tree's table references (they carry no "class", unlike expressions of the same type name)
_RELATION_TYPES = frozenset({"BASE_TABLE", "TABLE_FUNCTION", "SUBQUERY", "EXPRESSION_LIST"})
# DuckLake attaches its catalog database under this prefix; through it a query would reach the PostgreSQL server.
_LAKE_METADATA_CATALOG = "__ducklake_metadata_"
# Applied in this order; ``lock_configuration`` last, since it freezes every setting (this one included).
SANDBOX_SETTINGS: tuple[tuple[str, str], ...] = (
    ("enable_external_access", "false"),
    ("autoinstall_known_extensions", "false"),
    ("autoload_known_extensions", "false"),
    ("allow_community_extensions", "false"),
    ("lock_configuration", "true"),
)


@dataclass(frozen=True)
class SandboxLimits:
    """What the assertions of one grading call may take: each query ``timeout`` seconds, and the sandbox
    ``memory_limit`` of DuckDB memory (as DuckDB writes sizes) with nothing spilled to disk, on one thread."""

    timeout: float
    memory_limit: str

    def config(self) -> dict[str, Any]:
        # no temp_directory: an in-memory database then fails with out-of-memory rather than spill
        return {"memory_limit": self.memory_limit, "temp_directory": "", "threads": 1}


_parser_lock = threading.Lock()
_parser: duckdb.DuckDBPyConnection | None = None
_system_views: frozenset[str] = frozenset()  # the system catalog's views outside information_schema


def lock_down(con: duckdb.DuckDBPyConnection, *, freeze: bool = True) -> None:
    """Apply ``SANDBOX_SETTINGS`` to a connection's database (after it has attached what it needs: from
    now on it can open no file). Settings this DuckDB release does not know are skipped.

    ``freeze=False`` leaves out ``lock_configuration``, so that each read cursor can still set its own
    options (a store's capped reads set their streaming buffer). The boundary holds without it: DuckDB
    refuses to turn external access, community or unsigned extensions, or other directories back on while
    the database runs, and the gate refuses every statement but one SELECT."""
    for name, value in SANDBOX_SETTINGS:
        if name == "lock_configuration" and not freeze:
            continue
        try:
            con.execute(f"SET {name} = {value}")
        except duckdb.CatalogException:
            continue  # an older release without this setting (the others still apply)


def check_read_only(sql: str, *, scoped: bool = False) -> frozenset[str]:
    """Raise QueryRefused unless ``sql`` is exactly one read-only statement that stays inside the store
    (and, ``scoped``, inside the tables of the tenant it runs for; see the module docstring). Returns the
    unqualified table names the statement reads (lower-case): every table whose rows it can reach."""
    if len(sql) > MAX_QUERY_CHARS:
        raise QueryRefused(
            f"the query was refused: it is {len(sql):,} characters long (at most {MAX_QUERY_CHARS:,}); DuckDB parses "
            "and plans a statement this long for seconds, holding gigabytes, before any time limit applies. Pass a "
            "long list of values as one parameter (x IN (SELECT unnest(from_json(?, '[\"VARCHAR\"]')))), or split "
            "the query"
        )
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as exc:
        raise QueryRefused(f"the SQL does not parse: {exc}") from None
    if not statements:
        raise QueryRefused("no SQL statement given; pass one SELECT statement")
    expands = len(statements) == 1 and statements[0].type == duckdb.StatementType.MULTI  # DuckDB 2.x says so
    if expands or (len(statements) > 1 and not any(statement.query.strip() for statement in statements)):
        # DuckDB 1.x expands some statements into several it wrote itself (and gives them no text)
        raise QueryRefused(
            "this statement is not supported by the read-only store: it expands into several (a PIVOT without an "
            "IN list does); list the PIVOT values with IN (...), or write it as a SELECT with GROUP BY"
        )
    if len(statements) > 1:
        raise QueryRefused(
            f"{len(statements)} statements given; the store accepts exactly one read-only statement per query"
        )
    statement = statements[0]
    if statement.type == duckdb.StatementType.EXPLAIN:
        if scoped:
            raise QueryRefused(
                "EXPLAIN is not available to a tenant's query: a plan shows statistics of every tenant's rows"
            )
        # the prefix blanked, not cut: a refusal inside then names the line and column of the text the user wrote
        inner = _EXPLAIN_PREFIX.sub(lambda prefix: re.sub(r"[^\n]", " ", prefix.group()), statement.query, count=1)
        if inner != statement.query:
            return check_read_only(inner)
    if statement.type != duckdb.StatementType.SELECT:
        leading = _LEADING_KEYWORD.match(statement.query)
        keyword = leading.group(1).upper() if leading else None
        what = keyword if keyword not in (None, "WITH") else statement.type.name  # WITH … DELETE is a DELETE
        raise QueryRefused(
            f"{what} statements are not allowed: the store is read-only here "
            "(use SELECT, WITH … SELECT, DESCRIBE, SHOW, SUMMARIZE or EXPLAIN)"
        )
    return _check_tree(statement.query, scoped)


def _parse_tree(sql: str) -> dict[str, Any]:
    global _parser, _system_views
    with _parser_lock:
        if _parser is None:
            parser = duckdb.connect(":memory:")
            lock_down(parser)
            views = parser.execute(
                "SELECT view_name FROM duckdb_views() WHERE internal AND schema_name <> ?", [_SCOPED_SCHEMA]
            )
            _system_views = frozenset(name.lower() for (name,) in views.fetchall())
            _parser = parser
        (document,) = _parser.execute("SELECT json_serialize_sql(?)", [sql]).fetchone()  # type: ignore[misc]
    try:
        return json.loads(document)  # type: ignore[no-any-return]
    except RecursionError:
        raise QueryRefused(
            "the query was refused: it is nested too deeply to be checked (hundreds of levels of subqueries or "
            "expressions); flatten it, with WITH clauses for instance"
        ) from None


def _check_tree(sql: str, scoped: bool) -> frozenset[str]:
    tree = _parse_tree(sql)
    if tree.get("error"):
        # DuckDB serializes plain SELECTs only; PIVOT and the like are rewritten into other statements
        raise QueryRefused(
            f"this form of query is not supported by the read-only store ({tree.get('error_message', 'unknown')}); "
            "write it as a plain SELECT (PIVOT/UNPIVOT as GROUP BY, for instance)"
        )
    allowed = SCOPED_TABLE_FUNCTIONS if scoped else ALLOWED_TABLE_FUNCTIONS
    refused = SCOPED_REFUSED_FUNCTIONS if scoped else REFUSED_FUNCTIONS
    tables: set[str] = set()
    relations = selects = 0
    built = BuiltValues(sql)
    streamed: set[int] = set()  # the calls of table functions in FROM: they stream their rows, built by no one call
    for node in _nodes(tree):
        kind = node.get("type")
        if "class" not in node and isinstance(kind, str) and kind in _RELATION_TYPES:
            relations += 1
        elif kind == "SELECT_NODE":
            selects += 1
        if kind == "TABLE_FUNCTION":
            call = node.get("function") or {}
            streamed.add(id(call))
            name = str(call.get("function_name", "")).lower()
            if name not in allowed:
                raise QueryRefused(
                    f"table function {name}() is not allowed: queries read the store's tables only "
                    f"(allowed table functions: {', '.join(sorted(allowed))})"
                )
        elif node.get("class") == "FUNCTION" and "function_name" in node:
            if str(node["function_name"]).lower() in refused:
                raise QueryRefused(
                    f"function {node['function_name']}() is not allowed: it changes or reveals the server's state"
                )
            if id(node) not in streamed:
                built.check(node)
        elif node.get("type") == "BASE_TABLE":
            _check_table(node)
            if scoped:
                _check_scoped_table(node)
            tables.add(str(node.get("table_name") or "").lower())
    _check_plan_size(relations, selects)
    return frozenset(tables)


def _check_plan_size(relations: int, selects: int) -> None:
    """Refuse a statement DuckDB would plan for longer than any time limit (see ``MAX_QUERY_RELATIONS``)."""
    why = "DuckDB cannot stop a query while it plans it, and planning one this large would run past any time limit"
    if relations > MAX_QUERY_RELATIONS:
        raise QueryRefused(
            f"the query was refused: it reads {relations} tables, views, subqueries or table functions (at most "
            f"{MAX_QUERY_RELATIONS}); {why}. Join fewer at once, or split the query"
        )
    if selects > MAX_QUERY_SELECTS:
        raise QueryRefused(
            f"the query was refused: it has {selects} SELECTs (at most {MAX_QUERY_SELECTS}: UNION branches, "
            f"subqueries and CTEs count); {why}. Put the rows in one VALUES list, or split the query"
        )


def _check_table(node: dict[str, Any]) -> None:
    """Refuse a table reference of any query that reaches the server rather than the store."""
    catalog, schema = str(node.get("catalog_name") or ""), str(node.get("schema_name") or "")
    name = str(node.get("table_name") or "")
    # DuckDB reads the first part of a two-part name (x.y) as a catalog too, so the schema's place is checked as well
    for qualifier in (catalog, schema):
        if qualifier.lower().startswith(_LAKE_METADATA_CATALOG):
            raise QueryRefused(
                f"{qualifier}.*: the lake's catalog database is not allowed in queries (it is the PostgreSQL server "
                "behind the lake); read the store's tables and views: spans, traces, tool_calls …"
            )
    qualified = ".".join(part for part in (catalog, schema, name) if part)
    # no store table has these: DuckDB would read it as a file or URL; a qualified name it does not find, DuckDB
    # reads as the file its parts name joined with dots ("/data/lake/x".csv is /data/lake/x.csv), which a lake's
    # connection may open: its data directory stays open to DuckDB, and so to a query
    if any(mark in name for mark in "/\\.:") or (qualified != name and _read_as_file(catalog, schema, name)):
        raise QueryRefused(
            f"{qualified!r} is not a table of the store, and reading a file or URL as a table is not allowed (a name "
            "with '/', '.', ':' or '\\' reads one, as does a qualified name DuckDB takes for a file's, such as "
            "dir.csv); name the store's tables as they are: spans, traces, tool_calls …"
        )
    lowered = name.lower()
    if lowered in _system_views and lowered not in ALLOWED_SYSTEM_VIEWS:
        raise QueryRefused(
            f"{name}: this system view is not allowed: it tells about the server, not the store; the catalog views "
            f"a query may read are information_schema.* and {', '.join(sorted(ALLOWED_SYSTEM_VIEWS))}"
        )


def _read_as_file(*parts: str) -> bool:
    """Whether DuckDB would read the table name of these parts (catalog, schema, table; empty: not given) as a file
    (a replacement scan: CSV, Parquet, JSON … by the name's last part, whichever formats this DuckDB release reads
    so): asked of the locked-down parser connection, which refuses to open any file, so binding the name there
    fails on the permission alone."""
    reference = ".".join(quote_identifier(part) for part in parts if part)
    with _parser_lock:
        assert _parser is not None  # the tree being checked was parsed on it
        try:
            _parser.execute(f"EXPLAIN SELECT * FROM {reference}")
        except duckdb.PermissionException:
            return True
        except duckdb.Error:
            return False  # a name of no table here: the store's own tables are bound where the query runs
    return False


def _check_scoped_table(node: dict[str, Any]) -> None:
    """Refuse a table reference of a tenant's query that could reach past its tenant's views."""
    catalog, schema = str(node.get("catalog_name") or ""), str(node.get("schema_name") or "")
    name = str(node.get("table_name") or "")
    shown = ".".join(part for part in (catalog, schema, name) if part)
    if catalog or (schema and schema.lower() != _SCOPED_SCHEMA):
        raise QueryRefused(
            f"{shown}: a tenant's query names tables without a catalog or schema (write {name}); "
            f"only {_SCOPED_SCHEMA}.* may be qualified"
        )
    if node.get("at_clause"):
        raise QueryRefused(f"{shown} AT (...): time travel is not available to a tenant's query")
    if not schema and name.lower() in _system_views:
        raise QueryRefused(
            f"{name}: the system catalog's views are not available to a tenant's query (they count every "
            f"tenant's rows); use {_SCOPED_SCHEMA}.tables and {_SCOPED_SCHEMA}.columns"
        )


def _nodes(tree: Any) -> Iterator[dict[str, Any]]:
    """Every object node anywhere in a serialized parse tree."""
    stack = [tree]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            yield item
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def refusal(exc: duckdb.Error) -> StoreError:
    """A DuckDB permission error from a locked-down connection, said as the sandbox's refusal."""
    return QueryRefused(f"the query tried to reach outside the store and was refused: {str(exc).splitlines()[0]}")
