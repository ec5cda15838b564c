"""The store's versioned schema: migrations applied in order, each recorded in ``schema_version``.

Every table and column is documented in SCHEMA.md next to this file. To change the schema, add
``schema_vN.sql`` (ALTER/CREATE statements taking version N-1 to N) and a ``Migration`` entry; never
edit a released migration.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import duckdb
import pyarrow as pa

from tracegrade.errors import StoreError
from tracegrade.store.database import insert_arrow
from tracegrade.store.duckdb_api import fetch_arrow
from tracegrade.store.evaluations import EVALUATION_EVENT, evaluation_rows
from tracegrade.store.rows import utc_now
from tracegrade.store.store_option import point_at_a_store

__all__ = [
    "GRADING_TABLES",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "TABLES",
    "TRACE_TABLES",
    "check_schema",
    "ensure_schema",
    "schema_version",
]


@dataclass(frozen=True)
class Migration:
    version: int
    description: str
    script: str  # file name inside this package
    # a step in Python after the script, in its transaction (rows the script cannot derive in SQL alone)
    then: Callable[[duckdb.DuckDBPyConnection], None] | None = None


def _evaluations_of_stored_logs(con: duckdb.DuckDBPyConnection) -> None:
    """Version 5: the evaluation events stored before the table existed get their rows."""
    logs = fetch_arrow(con, "SELECT * FROM logs WHERE event_name = ?", [EVALUATION_EVENT])
    rows = evaluation_rows(logs)
    if rows is not None:
        insert_arrow(con, "evaluations", rows)


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "spans, logs, traces, node_visits, tool_calls, llm_calls", "schema_v1.sql"),
    Migration(2, "traces.execution as zstd-compressed JSON", "schema_v2.sql"),
    Migration(3, "spans without primary key and trace_id index (the writer keeps ids unique)", "schema_v3.sql"),
    Migration(4, "a tenant column on every table, leading the keys of logs and traces", "schema_v4.sql"),
    Migration(
        5, "evaluations: one row per gen_ai.evaluation.result event", "schema_v5.sql", _evaluations_of_stored_logs
    ),
    Migration(6, "traces.tool_names: the distinct tools each trace called", "schema_v6.sql"),
    Migration(
        7,
        "grading tables: eval_runs, eval_case_results, eval_results, eval_run_cases, calibrations, grading_jobs",
        "schema_v7.sql",
    ),
    Migration(8, "a tenant column on the grading tables, leading their keys", "schema_v8.sql"),
    Migration(9, "traces.lean_execution: the execution without its LLM content, for offline grading", "schema_v9.sql"),
    Migration(10, "forgotten_traces: the traces deleted on request, never stored again", "schema_v10.sql"),
    Migration(11, "traces.error_spans: how many of each trace's spans failed", "schema_v11.sql"),
    Migration(
        12,
        "spans and logs keep the resource's and scope's schema URLs, the scope's attributes and dropped counts",
        "schema_v12.sql",
    ),
    Migration(13, "traces.mapper_revision: the trajectory mapper's revision that built each trace", "schema_v13.sql"),
)
SCHEMA_VERSION = MIGRATIONS[-1].version

# what receivers store and the mapper derives, and what grading records; a user can query or export each
TRACE_TABLES: tuple[str, ...] = (
    "spans",
    "logs",
    "evaluations",
    "traces",
    "node_visits",
    "tool_calls",
    "llm_calls",
    "forgotten_traces",
)
GRADING_TABLES: tuple[str, ...] = (
    "eval_runs",
    "eval_case_results",
    "eval_results",
    "eval_run_cases",
    "calibrations",
    "grading_jobs",
)
TABLES: tuple[str, ...] = (*TRACE_TABLES, *GRADING_TABLES)

_VERSION_TABLE = """
CREATE TABLE IF NOT EXISTS schema_version (
    version     INTEGER NOT NULL PRIMARY KEY,
    description VARCHAR NOT NULL,
    applied_at  TIMESTAMP NOT NULL
)
"""


def _table_names(con: duckdb.DuckDBPyConnection) -> set[str]:
    rows = con.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = 'main'").fetchall()
    return {r[0] for r in rows}


def schema_version(con: duckdb.DuckDBPyConnection) -> int | None:
    """The highest applied migration, or None when the file has no ``schema_version`` table."""
    if "schema_version" not in _table_names(con):
        return None
    (version,) = con.execute("SELECT coalesce(max(version), 0) FROM schema_version").fetchone() or (0,)
    return int(version)


def _not_a_store(path: Path) -> StoreError:
    return StoreError(
        f"{path} is a DuckDB database but not a tracegrade store (it has no schema_version table); {point_at_a_store()}"
    )


def _too_new(path: Path, version: int) -> StoreError:
    return StoreError(
        f"store {path} has schema version {version}, newer than this tracegrade supports ({SCHEMA_VERSION}); "
        "upgrade tracegrade"
    )


def ensure_schema(con: duckdb.DuckDBPyConnection, path: Path) -> int:
    """Create or migrate the schema (read-write connections); returns the version now in place."""
    version = schema_version(con)
    if version is None and _table_names(con):
        raise _not_a_store(path)
    version = version or 0
    if version > SCHEMA_VERSION:
        raise _too_new(path, version)
    for migration in MIGRATIONS:
        if migration.version <= version:
            continue
        script = resources.files(__package__).joinpath(migration.script).read_text(encoding="utf-8")
        con.execute("BEGIN TRANSACTION")
        try:
            con.execute(_VERSION_TABLE)
            con.execute(script)
            if migration.then is not None:
                migration.then(con)
            con.execute(
                "INSERT INTO schema_version (version, description, applied_at) VALUES (?, ?, ?)",
                [migration.version, migration.description, utc_now()],
            )
            con.execute("COMMIT")
        except (duckdb.Error, pa.ArrowException) as exc:
            con.execute("ROLLBACK")
            raise StoreError(f"migrating store {path} to schema version {migration.version} failed: {exc}") from exc
    return SCHEMA_VERSION


def check_schema(con: duckdb.DuckDBPyConnection, path: Path) -> int:
    """Check a read-only connection's schema is one this tracegrade can read."""
    version = schema_version(con)
    if version is None:
        raise _not_a_store(path)
    if version > SCHEMA_VERSION:
        raise _too_new(path, version)
    if version < SCHEMA_VERSION:
        raise StoreError(
            f"store {path} has schema version {version}; this tracegrade needs {SCHEMA_VERSION}. "
            f"Open it once read-write (`tracegrade serve --store {path}` or `tracegrade import`) to migrate it"
        )
    return version
