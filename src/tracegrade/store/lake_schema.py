"""The lake's schema, derived from the file store's migrations: base tables of every copy, deduping views.

DuckLake has no PRIMARY KEY, UNIQUE or indexes, and several receivers write one lake, so a span
delivered to two of them is stored twice. The lake keeps what was written in schema ``raw`` (one table
per store table, columns as the file schema has them after every migration, constraints other than NOT
NULL dropped) and gives each store table's name, in ``main``, to a view that shows one row per key:

- ``spans``: the first copy received of each (tenant, trace_id, span_id); ``logs`` and ``evaluations``:
  of each (tenant, trace_id, log_key);
- ``traces``: the newest build of each (tenant, trace_id); its ``node_visits``, ``tool_calls`` and
  ``llm_calls`` rows are those of that same build. Trajectory base tables carry a ``build_id`` (one per
  replacement), since two builders may map the same trace at once and each insert its rows.
- the tables of recorded runs: the newest write of each key; ``eval_results`` holds the results of each
  case's newest write, and a run recorded case by case counts its cases when read (``grading_tables``).
  Their base tables carry ``written_at`` and ``write_id``.
- ``grading_jobs`` and ``forgotten_traces``: tables in the catalog's PostgreSQL database (``lake_jobs``,
  ``lake_forgotten``), read through an attachment of that database named ``JOBS_ALIAS``, with the file store's
  column types.

The columns come from running the file store's migrations on an in-memory DuckDB and reading the result,
so a new migration reaches the lake without a lake script. Opening a lake written by an older tracegrade
adds the columns it lacks; the rows already there read as NULL in them, or as ``BACKFILL`` gives (what the
file store's migration wrote into its old rows: the ``tenant`` column, for one).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import duckdb

from tracegrade.errors import StoreError
from tracegrade.store.database import quote_identifier
from tracegrade.store.grading_tables import CASE_COUNTS, RECORD_KEYS, WRITE_COLUMNS
from tracegrade.store.lake_jobs import JOBS_SCHEMA
from tracegrade.store.rows import sql_string, utc_now
from tracegrade.store.schema import MIGRATIONS, SCHEMA_VERSION, TABLES, ensure_schema
from tracegrade.store.tenancy import DEFAULT_TENANT, TENANT_COLUMN
from tracegrade.store.trajectories import TRAJECTORY_TABLES

__all__ = [
    "BACKFILL",
    "BUILD_COLUMN",
    "CATALOG_TABLES",
    "FIRST_COPY",
    "JOBS_ALIAS",
    "RAW_SCHEMA",
    "VIEWS_OF_RAW",
    "Column",
    "ensure_lake_schema",
    "file_schema_columns",
    "lake_version",
]

RAW_SCHEMA = "raw"
JOBS_ALIAS = "tracegrade_jobs"  # the catalog's PostgreSQL database, attached read-only for grading_jobs
# not in the lake: their views read the tables in the catalog's database (the job queue, the forgotten traces)
CATALOG_TABLES = ("grading_jobs", "forgotten_traces")
# the views of ``main`` whose rows are rows of the ``raw`` table of their name (other tables only narrow them or fill
# in columns): with that raw table empty, the view is too
VIEWS_OF_RAW = frozenset(TABLES) - frozenset(CATALOG_TABLES)
BUILD_COLUMN = "build_id"  # trajectory base tables only: which replacement wrote the row
# What rows stored before a column was added hold in it (DuckLake keeps it as the column's initial default,
# so the old Parquet files are not rewritten).
BACKFILL: dict[str, str | int] = {
    TENANT_COLUMN: DEFAULT_TENANT,
    # version 12's envelope of spans and log records: nothing more than version 11 kept
    "scope_version": "",
    "resource_schema_url": "",
    "resource_dropped_attributes_count": 0,
    "scope_attributes": "{}",
    "scope_schema_url": "",
    "scope_dropped_attributes_count": 0,
}
# The one row a view keeps of each key; the key columns lead each PARTITION BY so a filter on tenant or
# trace_id reaches the scan (DuckDB pushes filters on partition columns below the window).
FIRST_COPY = {
    "spans": ("tenant, trace_id, span_id", "received_at, start_ns"),
    "logs": ("tenant, trace_id, log_key", "received_at"),
    "evaluations": ("tenant, trace_id, log_key", "received_at"),  # one row per stored log record
}
_NEWEST_BUILD = f"row_number() OVER (PARTITION BY tenant, trace_id ORDER BY updated_at DESC, {BUILD_COLUMN} DESC) = 1"
_WRITTEN, _WRITE_ID = (name for name, _ in WRITE_COLUMNS)


@dataclass(frozen=True)
class Column:
    name: str
    data_type: str
    not_null: bool

    def ddl(self, *, constrained: bool = True) -> str:
        return f"{quote_identifier(self.name)} {self.data_type}" + (
            " NOT NULL" if self.not_null and constrained else ""
        )


def file_schema_columns() -> dict[str, list[Column]]:
    """The columns of every store table (``TABLES``) as the file store's migrations leave them."""
    con = duckdb.connect(":memory:")
    try:
        ensure_schema(con, Path(":memory:"))
        rows = con.execute(
            "SELECT table_name, column_name, data_type, NOT is_nullable FROM duckdb_columns() "
            "WHERE database_name = 'memory' AND schema_name = 'main' ORDER BY table_name, column_index"
        ).fetchall()
    finally:
        con.close()
    columns: dict[str, list[Column]] = {table: [] for table in TABLES}
    for table, name, data_type, not_null in rows:
        if table in columns:
            columns[table].append(Column(name, data_type, bool(not_null)))
    missing = [table for table, found in columns.items() if not found]
    if missing:
        raise AssertionError(f"the file schema has no table {missing}")  # TABLES and the migrations disagree
    return columns


def _base_columns(table: str, columns: list[Column]) -> list[Column]:
    if table in TRAJECTORY_TABLES:
        return [*columns, Column(BUILD_COLUMN, "VARCHAR", True)]
    if table in RECORD_KEYS:
        return [*columns, *(Column(name, data_type, True) for name, data_type in WRITE_COLUMNS)]
    return columns


def _newest_write(table: str, columns: str = "*") -> str:
    """The rows of ``table``'s newest write of each key."""
    key = ", ".join(RECORD_KEYS[table])
    order = f"{_WRITTEN} DESC, {_WRITE_ID} DESC"
    newest = f"row_number() OVER (PARTITION BY {key} ORDER BY {order}) = 1"
    return f"SELECT {columns} FROM {RAW_SCHEMA}.{table} QUALIFY {newest}"


def _record_view_sql(table: str, columns: list[Column]) -> str:
    stamps = f"EXCLUDE ({_WRITTEN}, {_WRITE_ID})"
    if table == "eval_results":  # the results of each case's newest write, however many criteria it had
        cases = _newest_write("eval_case_results", f"tenant, run_id, eval_id, {_WRITE_ID}")
        key = ", ".join(f"r.{column}" for column in RECORD_KEYS[table])
        return (
            f"SELECT r.* {stamps} FROM {RAW_SCHEMA}.eval_results r SEMI JOIN ({cases}) c ON r.tenant = c.tenant "
            f"AND r.run_id = c.run_id AND r.eval_id = c.eval_id AND r.{_WRITE_ID} = c.{_WRITE_ID} "
            f"QUALIFY row_number() OVER (PARTITION BY {key}) = 1"  # a write stored twice shows once
        )
    if table == "eval_runs":  # a run recorded case by case (no report) counts the cases it has
        types = {column.name: column.data_type for column in columns}
        counts = ", ".join(f"{value} AS {name}" for name, value in CASE_COUNTS)
        recounted = ", ".join(
            f"CAST(coalesce(c.{name}, r.{name}) AS {types[name]}) AS {name}" for name, _ in CASE_COUNTS
        )
        return (
            f"SELECT r.* {stamps} REPLACE ({recounted}) FROM ({_newest_write(table)}) r LEFT JOIN "
            f"(SELECT tenant, run_id, {counts} FROM ({_newest_write('eval_case_results')}) GROUP BY tenant, run_id) c "
            "ON r.report IS NULL AND c.tenant = r.tenant AND c.run_id = r.run_id"
        )
    return f"SELECT * {stamps} FROM ({_newest_write(table)})"


def _view_sql(table: str, columns: list[Column]) -> str:
    raw = f"{RAW_SCHEMA}.{table}"
    if table in FIRST_COPY:
        key, order = FIRST_COPY[table]
        return f"SELECT * FROM {raw} QUALIFY row_number() OVER (PARTITION BY {key} ORDER BY {order}) = 1"
    if table == "traces":
        return f"SELECT * EXCLUDE ({BUILD_COLUMN}) FROM {raw} QUALIFY {_NEWEST_BUILD}"
    if table in TRAJECTORY_TABLES:
        newest = f"SELECT tenant, trace_id, {BUILD_COLUMN} FROM {RAW_SCHEMA}.traces QUALIFY {_NEWEST_BUILD}"
        return (
            f"SELECT r.* EXCLUDE ({BUILD_COLUMN}) FROM {raw} r SEMI JOIN ({newest}) b "
            f"ON r.tenant = b.tenant AND r.trace_id = b.trace_id AND r.{BUILD_COLUMN} = b.{BUILD_COLUMN}"
        )
    if table in RECORD_KEYS:
        return _record_view_sql(table, columns)
    if table in CATALOG_TABLES:
        listed = ", ".join(
            f"CAST({quote_identifier(c.name)} AS {c.data_type}) AS {quote_identifier(c.name)}" for c in columns
        )
        return f"SELECT {listed} FROM {JOBS_ALIAS}.{JOBS_SCHEMA}.{table}"
    raise AssertionError(f"no lake view is defined for table {table}")  # a new store table needs its key here


def lake_version(con: duckdb.DuckDBPyConnection, catalog: str) -> int | None:
    """The lake's schema version (None: no tracegrade tables yet)."""
    try:
        row = con.execute(f"SELECT coalesce(max(version), 0) FROM {quote_identifier(catalog)}.main.schema_version")
    except duckdb.CatalogException:
        return None
    return row.fetchone()[0]  # type: ignore[index]


def _existing_columns(con: duckdb.DuckDBPyConnection, catalog: str) -> dict[str, dict[str, str]]:
    rows = con.execute(
        "SELECT table_name, column_name, data_type FROM duckdb_columns() WHERE database_name = ? AND schema_name = ?",
        [catalog, RAW_SCHEMA],
    ).fetchall()
    found: dict[str, dict[str, str]] = {}
    for table, name, data_type in rows:
        found.setdefault(table, {})[name] = data_type
    return found


def _added_column(table: str, column: Column) -> list[str]:
    """The statements adding ``column`` to ``table``: rows already stored read as its ``BACKFILL`` value
    (its initial default, dropped at once so every later write must give one), else as NULL."""
    added = [f"ALTER TABLE {table} ADD COLUMN {column.ddl(constrained=False)}"]
    if column.name in BACKFILL:
        value = BACKFILL[column.name]
        added[0] += f" DEFAULT {sql_string(value) if isinstance(value, str) else int(value)}"
        added.append(f"ALTER TABLE {table} ALTER COLUMN {quote_identifier(column.name)} DROP DEFAULT")
    return added


def ensure_lake_schema(con: duckdb.DuckDBPyConnection, catalog: str, where: str) -> int:
    """Create or bring up to date the schema of the lake attached as ``catalog`` (read-write).

    In one transaction: a lake created by two receivers at once has one of them retry or fail with a
    conflict, and the next open finds the tables in place.
    """
    version = lake_version(con, catalog)
    if version is not None and version > SCHEMA_VERSION:
        raise StoreError(
            f"lake {where} has schema version {version}, newer than this tracegrade supports ({SCHEMA_VERSION}); "
            "upgrade tracegrade"
        )
    if version == SCHEMA_VERSION:
        return version
    db = quote_identifier(catalog)
    statements = [f"CREATE SCHEMA IF NOT EXISTS {db}.{RAW_SCHEMA}"]
    existing = _existing_columns(con, catalog)
    file_columns = file_schema_columns()
    for table, columns in file_columns.items():
        if table in CATALOG_TABLES:
            continue
        wanted = _base_columns(table, columns)
        have = existing.get(table)
        if have is None:
            listed = ", ".join(column.ddl() for column in wanted)
            statements.append(f"CREATE TABLE {db}.{RAW_SCHEMA}.{table} ({listed})")
        else:
            for column in wanted:
                if column.name not in have:
                    statements += _added_column(f"{db}.{RAW_SCHEMA}.{table}", column)
                elif have[column.name] != column.data_type:
                    raise StoreError(
                        f"lake {where}: column {table}.{column.name} is {have[column.name]}, schema version "
                        f"{SCHEMA_VERSION} has {column.data_type}; DuckLake cannot convert it in place: create a new "
                        "lake (another METADATA database) and re-import the spans"
                    )
    for table in TABLES:
        statements.append(f"CREATE OR REPLACE VIEW {db}.main.{table} AS {_view_sql(table, file_columns[table])}")
    statements.append(
        f"CREATE TABLE IF NOT EXISTS {db}.main.schema_version "
        "(version INTEGER NOT NULL, description VARCHAR NOT NULL, applied_at TIMESTAMP NOT NULL)"
    )
    con.execute("BEGIN TRANSACTION")
    try:
        for statement in statements:
            con.execute(statement)
        for migration in MIGRATIONS:
            if migration.version > (version or 0):
                con.execute(
                    f"INSERT INTO {db}.main.schema_version VALUES (?, ?, ?)",
                    [migration.version, migration.description, utc_now()],
                )
        con.execute("COMMIT")
    except duckdb.Error as exc:
        con.execute("ROLLBACK")
        raise StoreError(f"creating the tracegrade schema in lake {where} failed: {exc}") from exc
    return SCHEMA_VERSION
