"""Writing the tables of recorded runs (and judge calibrations), for a DuckDB file and for a lake: every such
write goes through here.

A run's rows are written by key: a row replaces the row with its key (``RECORD_KEYS``, which lead with the
tenant: a run is its tenant's alone), and the ``eval_results`` rows of a case, (tenant, run_id, eval_id),
replace every result row that case had (a case graded
again may have fewer criteria than before). A DuckDB file holds this with its primary keys: the case's old
results are deleted, then INSERT OR REPLACE. A lake has no keys and several machines may record at once, so
it appends every write, each row stamped with ``written_at`` and one ``write_id`` per write, and its views
show the newest write of each key and the results of each case's newest write (``lake_schema``).

``CASE_COUNTS`` are a run's counts over its cases, for the runs recorded case by case (an online worker's
window, which has no report of its own): a file's write counts them in the transaction that adds the cases
(``recount_runs``), and a lake's ``eval_runs`` view counts them when read, since two workers recording cases
of one run at once each write without the other's.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import datetime

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from tracegrade.store.database import insert_arrow
from tracegrade.store.duckdb_api import registered

__all__ = [
    "CASE_COUNTS",
    "RECORD_KEYS",
    "WRITE_COLUMNS",
    "append_record_rows",
    "recount_runs",
    "replace_record_rows",
]

# the tables a run is recorded in, and the key of each (grading_jobs is a job queue: see worker_jobs)
RECORD_KEYS: dict[str, tuple[str, ...]] = {
    "eval_runs": ("tenant", "run_id"),
    "eval_case_results": ("tenant", "run_id", "eval_id"),
    "eval_results": ("tenant", "run_id", "eval_id", "criterion"),
    "eval_run_cases": ("tenant", "run_id", "eval_id"),
    "calibrations": ("tenant", "criterion", "judge_model", "prompt_version"),
}
# the lake's stamp on each written row: when, and which write (one id for all tables of one write)
WRITE_COLUMNS: tuple[tuple[str, str], ...] = (("written_at", "TIMESTAMP"), ("write_id", "VARCHAR"))
# (column of eval_runs, its value as an aggregate over the run's eval_case_results rows)
CASE_COUNTS: tuple[tuple[str, str], ...] = (
    ("total_cases", "count(*)"),
    ("passed_cases", "count_if(passed)"),
    ("failed_cases", "count(*) - count_if(passed) - count_if(error IS NOT NULL)"),
    ("error_cases", "count_if(error IS NOT NULL)"),
    ("pass_rate", "count_if(passed) / count(*)"),
)
_CASES_VIEW = "_tracegrade_recorded_cases"
_RUNS_VIEW = "_tracegrade_recounted_runs"


def _unknown(tables: Mapping[str, pa.Table]) -> None:
    unknown = set(tables) - set(RECORD_KEYS)
    if unknown:
        raise ValueError(f"not a table of recorded runs: {', '.join(sorted(unknown))}")


def replace_record_rows(con: duckdb.DuckDBPyConnection, tables: Mapping[str, pa.Table]) -> None:
    """A DuckDB file's write (the caller holds a transaction): the ``eval_results`` rows of the cases
    written go first, then each table's rows replace those with their key, in the order given."""
    _unknown(tables)
    results = tables.get("eval_results")
    if results is not None and results.num_rows:
        with registered(con, _CASES_VIEW, results.select(["tenant", "run_id", "eval_id"])):
            con.execute(
                f"DELETE FROM eval_results USING (SELECT DISTINCT tenant, run_id, eval_id FROM {_CASES_VIEW}) c "
                "WHERE eval_results.tenant = c.tenant AND eval_results.run_id = c.run_id "
                "AND eval_results.eval_id = c.eval_id"
            )
    for table, rows in tables.items():
        if rows.num_rows:
            insert_arrow(con, table, rows, replace=True)
    runs = tables.get("eval_runs")
    if runs is not None and runs.num_rows:  # the runs recorded case by case count the cases they now hold
        with registered(con, _RUNS_VIEW, runs.filter(pc.is_null(runs["report"])).select(["tenant", "run_id"])):
            recount_runs(con, f"SELECT DISTINCT tenant, run_id FROM {_RUNS_VIEW}")


def recount_runs(con: duckdb.DuckDBPyConnection, runs: str) -> None:
    """Set the ``CASE_COUNTS`` columns of the runs that the query ``runs`` names (tenant, run_id) from their
    ``eval_case_results`` rows, zero for a run left with none (the caller holds a transaction)."""
    of_run = "eval_runs.tenant = c.tenant AND eval_runs.run_id = c.run_id"
    zero = ", ".join(f"{column} = 0" for column, _ in CASE_COUNTS)
    con.execute(f"UPDATE eval_runs SET {zero} FROM ({runs}) c WHERE {of_run}")
    counted = ", ".join(f"{value} AS {column}" for column, value in CASE_COUNTS)
    remaining = (
        f"SELECT e.tenant, e.run_id, {counted} FROM eval_case_results e SEMI JOIN ({runs}) r "
        "ON r.tenant = e.tenant AND r.run_id = e.run_id GROUP BY e.tenant, e.run_id"
    )
    assigned = ", ".join(f"{column} = c.{column}" for column, _ in CASE_COUNTS)
    con.execute(f"UPDATE eval_runs SET {assigned} FROM ({remaining}) c WHERE {of_run}")


def append_record_rows(con: duckdb.DuckDBPyConnection, tables: Mapping[str, pa.Table], written_at: datetime) -> None:
    """A lake's write (the caller holds a transaction, on the schema of the base tables): every row
    appended, stamped with ``written_at`` and one new write id."""
    _unknown(tables)
    write_id = uuid.uuid4().hex
    for table, rows in tables.items():
        if rows.num_rows:
            stamped = rows.append_column("written_at", pa.array([written_at] * rows.num_rows, pa.timestamp("us")))
            stamped = stamped.append_column("write_id", pa.array([write_id] * rows.num_rows, pa.string()))
            insert_arrow(con, table, stamped)
