"""A tenant's query on a lake over tables never written to (``lake_view_columns``): their views plan no scan (DuckLake
asked its catalog twice per column of each such scan, on every query), yet rows another process writes to them later
are in the tenant's next query, and the query's own names (a CTE's) still pass through the views made in its
transaction, where no statement may fail."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import duckdb
import pytest

from tests.support import pg_cluster
from tests.support.pg_cluster import PgServer
from tests.support.store_records import make_log, make_span
from tracegrade.store.lake import LakeStore

pg_server = pg_cluster.pg_server  # the session's PostgreSQL (a fixture)


def _scans(store: LakeStore, tenant: str, table: str) -> bool:
    """Whether the plan of ``tenant``'s count of ``table`` scans the lake (on a cursor given the tenant's views as a
    query's is: EXPLAIN is refused to a tenant's own query)."""
    cursor = store._cursor()
    try:
        cursor.begin()
        store._scope_views(cursor, tenant, frozenset({table}))
        plan = "\n".join(row[1] for row in cursor.execute(f"EXPLAIN SELECT count(*) FROM {table}").fetchall())
    finally:
        store._reads.end(cursor)
    return "DUCKLAKE_SCAN" in plan


@pytest.fixture
def lake(pg_server: PgServer, tmp_path: Path) -> tuple[str, Path]:
    return f"ducklake:postgres:{pg_server.new_database()}", tmp_path / "lake-data"


def test_a_table_never_written_to_is_planned_without_a_scan_until_another_process_writes_it(
    lake: tuple[str, Path],
) -> None:
    location, data = lake
    with LakeStore(location, data_path=data) as store:
        store.write([make_span(1, 1)], tenant="acme")
        assert _scans(store, "acme", "spans")  # a table with rows (another tenant's or its own)
        assert not _scans(store, "acme", "logs")
        assert store.query("SELECT count(*) FROM logs", tenant="acme").rows == [(0,)]
        with LakeStore(location, data_path=data) as other:  # another process writes the first log records
            other.write([], [make_log(1, 1)], tenant="acme")
            other.write([], [make_log(1, 2)], tenant="globex")
        assert _scans(store, "acme", "logs")
        assert store.query("SELECT count(*) FROM logs", tenant="acme").rows == [(1,)]


def test_a_tenants_view_of_a_table_never_written_to_has_its_columns_and_no_rows(lake: tuple[str, Path]) -> None:
    location, data = lake
    with LakeStore(location, data_path=data) as writer:
        writer.write([make_span(1, 1)], tenant="globex")
        with LakeStore(location, read_only=True) as reader:  # as `tracegrade ui` or `mcp` on the lake
            for store in (writer, reader):
                for table in ("traces", "tool_calls", "eval_runs", "logs"):
                    every_tenants = store.query(f"SELECT * FROM {table} LIMIT 0")
                    result = store.query(f"SELECT * FROM {table}", tenant="acme")
                    assert (result.columns, result.rows) == (every_tenants.columns, [])
                # written to, by another tenant: the usual view, which shows acme none of it
                assert store.query("SELECT count(*) FROM spans", tenant="acme").rows == [(0,)]
                assert store.query("SELECT count(*) FROM spans", tenant="globex").rows == [(1,)]


def test_a_ctes_name_beside_the_tables_passes_through_the_views_made_in_the_querys_transaction(
    lake: tuple[str, Path],
) -> None:
    location, data = lake
    with LakeStore(location, data_path=data) as store:
        store.write([make_span(1, 1), make_span(1, 2)], tenant="acme")
        store.write([make_span(2, 1)], tenant="globex")
        sql = (
            "WITH recent AS (SELECT span_id FROM spans), traces AS (SELECT 1 AS one) "
            "SELECT (SELECT count(*) FROM recent), (SELECT count(*) FROM traces), (SELECT count(*) FROM llm_calls)"
        )
        assert store.query(sql, tenant="acme").rows == [(2, 1, 0)]


class _FailureLog:
    """A cursor that records each statement that fails: inside a query's transaction, one failed statement aborts
    the transaction on DuckDB 2, so making the views must fail none."""

    def __init__(self, cursor: duckdb.DuckDBPyConnection) -> None:
        self._cursor = cursor
        self.failed: list[str] = []

    def execute(self, sql: str, *args: Any) -> duckdb.DuckDBPyConnection:
        try:
            return self._cursor.execute(sql, *args)
        except duckdb.Error:
            self.failed.append(sql)
            raise

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cursor, name)


@pytest.mark.parametrize("guard", [True, False], ids=["guarded", "guard off"])
def test_a_tenants_views_are_made_in_the_querys_transaction_without_a_statement_that_fails(
    lake: tuple[str, Path], monkeypatch: pytest.MonkeyPatch, guard: bool
) -> None:
    """Guarded or not (``bench_tenant_view_guard``'s "guard off" runs), the lake reads each table's columns and its
    schema's relations first, so no statement fails: a CTE's name made the guard-off views fail one, and the query's
    transaction was aborted with it."""
    monkeypatch.setattr(LakeStore, "_scan_filters_run_early", guard)
    location, data = lake
    with LakeStore(location, data_path=data) as store:
        store.write([make_span(1, 1)], tenant="acme")
        store.write([make_span(2, 1)], tenant="globex")
        cursor = store._cursor()
        try:
            cursor.begin()
            logged = _FailureLog(cursor)
            # a CTE's name, a table without a tenant column, a table with rows, one never written to
            names = frozenset({"recent", "schema_version", "spans", "logs"})
            store._scope_views(cast(duckdb.DuckDBPyConnection, logged), "acme", names)
            assert logged.failed == []
            views = {
                name
                for (name,) in cursor.execute(
                    "SELECT view_name FROM duckdb_views() WHERE temporary AND NOT internal"
                ).fetchall()
            }
            assert views == {"schema_version", "spans", "logs"}
            assert cursor.execute("SELECT count(*) FROM spans").fetchall() == [(1,)]  # acme's one span
            assert cursor.execute("SELECT count(*) FROM schema_version").fetchall() == [(0,)]
        finally:
            store._reads.end(cursor)
        sql = "WITH recent AS (SELECT span_id FROM spans) SELECT (SELECT count(*) FROM recent), count(*) FROM spans"
        assert store.query(sql, tenant="acme").rows == [(1, 1)]


def test_a_relation_named_in_another_case_gets_the_tenants_view(lake: tuple[str, Path]) -> None:
    """DuckDB binds a query's ``notes`` to a relation named ``Notes``: one left without its tenant's view (its name not
    found among the lower-case names a query's are compared with) showed the tenant every tenant's rows."""
    location, data = lake
    with LakeStore(location, data_path=data) as store:
        store.execute_write('CREATE TABLE main."Notes" (tenant VARCHAR, note VARCHAR)')
        store.execute_write("INSERT INTO main.\"Notes\" VALUES ('acme', 'mine'), ('globex', 'theirs')")
        assert store.query("SELECT note FROM notes", tenant="acme").rows == [("mine",)]


def test_a_table_replaced_after_the_querys_snapshot_is_read_as_that_snapshot_holds_it(lake: tuple[str, Path]) -> None:
    """The catalog is read after the snapshot is taken: a table of the same name made meanwhile (after a DROP, or a
    CREATE OR REPLACE) has no statistics yet, but it is not the table the query reads, which has rows."""
    location, data = lake
    with LakeStore(location, data_path=data) as store, LakeStore(location, data_path=data) as other:
        store.write([make_span(1, 1)], [make_log(1, 1)], tenant="acme")
        cursor = store._cursor()
        try:
            cursor.begin()
            cursor.execute("SELECT id FROM ducklake_current_snapshot('lake')").fetchall()  # the query's snapshot
            other.execute_write("CREATE OR REPLACE TABLE raw.logs AS SELECT * FROM raw.logs LIMIT 0")
            store._scope_views(cursor, "acme", frozenset({"logs"}))
            assert cursor.execute("SELECT count(*) FROM logs").fetchall() == [(1,)]
        finally:
            store._reads.end(cursor)
