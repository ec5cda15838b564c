"""Retention: delete the traces that have been quiet for longer than a store keeps them.

A trace's age is the time since the store last received anything of it: its newest span or log record
(``received_at``, the receiver's clock, never the sender's) or its newest trajectory build (``updated_at``).
A trace is expired when all of them are older than the cutoff; its spans, log records, evaluation events and
trajectory rows go in one transaction, so no reader ever sees half a trace. Log records that belong to no
trace expire by their own ``received_at``. An online worker's runs (``kind = 'worker'``: a case per trace it
graded, so they grow with the traffic) expire once the newest case recorded in them is older than the cutoff.
The runs that people record (``grade``, CI, live runs) stay: they are the history that ``diff`` and ``gate``
compare, and they hold their own copy of what they graded.

What arrives after the cutoff is never deleted: the candidates are read in the same transaction as the
deletes, which only touch rows received before the cutoff. A span of an expired trace that arrives later
starts the trace again (and is rebuilt into a trajectory of its own).

The SQL runs on a writing connection whose tables have the store's names: a DuckDB file's, or a lake's
``raw`` tables (every copy and build of a row goes; each batch inside the lake's write gate, ``lake_write_gate``,
since DuckLake fails a delete that races an insert into the same table).
"""

from __future__ import annotations

from datetime import datetime

import duckdb
import pyarrow as pa

from tracegrade.store.tenancy import TraceKey
from tracegrade.store.trace_deletion import Deleted, delete_traces, first_count

__all__ = [
    "EXPIRE_BATCH",
    "OLDER_ROWS_SQL",
    "expire_quiet_traces",
    "expire_traceless_logs",
    "expire_worker_runs",
]

# traces deleted per transaction: a file store's writer waits while one runs, so a large backlog is cut into
# several; each batch scans the store's old rows again, so fewer, larger ones finish a pass sooner, and up to
# 50,000 traces of 10 spans the writer's longest wait stayed the same (bench/RESULTS.md, retention)
EXPIRE_BATCH = 20_000
_EXPIRED_VIEW = "_tracegrade_expired_traces"
_EXPIRED_RUNS_VIEW = "_tracegrade_expired_runs"
# the tables holding a recorded run's rows
_RUN_TABLES = ("eval_results", "eval_case_results", "eval_run_cases", "eval_runs")
# (table, the column saying when the store last wrote the row)
_RECEIVED = (("spans", "received_at"), ("logs", "received_at"), ("traces", "updated_at"))
# whether anything could expire: a row written before the cutoff (the one parameter), on a reading cursor
OLDER_ROWS_SQL = "SELECT " + " OR ".join(
    [f"EXISTS (SELECT 1 FROM {table} WHERE {column} < $1)" for table, column in _RECEIVED]
    + ["EXISTS (SELECT 1 FROM eval_runs WHERE kind = 'worker' AND created_at < $1)"]
)


def _candidates(con: duckdb.DuckDBPyConnection, cutoff: datetime, after: TraceKey | None, limit: int) -> pa.Table:
    """The first ``limit`` traces after ``after`` (in key order) with a row written before the cutoff."""
    past = "" if after is None else " AND (tenant > $tenant OR (tenant = $tenant AND trace_id > $trace_id))"
    older = " UNION ".join(
        f"SELECT tenant, trace_id FROM {table} WHERE {column} < $cutoff AND trace_id IS NOT NULL{past}"
        for table, column in _RECEIVED
    )
    params: dict[str, object] = {"cutoff": cutoff, "limit": limit}
    if after is not None:
        params |= {"tenant": after[0], "trace_id": after[1]}
    return con.execute(f"SELECT tenant, trace_id FROM ({older}) ORDER BY ALL LIMIT $limit", params).fetch_arrow_table()


def _quiet(con: duckdb.DuckDBPyConnection, cutoff: datetime) -> pa.Table:
    """Those of the registered candidates with no row written at or after the cutoff."""
    # a semi join builds on the (few) candidates and streams the newer rows past them
    newer = " UNION ALL ".join(
        f"SELECT tenant, trace_id FROM {table} SEMI JOIN {_EXPIRED_VIEW} USING (tenant, trace_id) "
        f"WHERE {column} >= $cutoff"
        for table, column in _RECEIVED
    )
    sql = f"SELECT tenant, trace_id FROM {_EXPIRED_VIEW} EXCEPT SELECT tenant, trace_id FROM ({newer})"
    return con.execute(sql, {"cutoff": cutoff}).fetch_arrow_table()


def expire_quiet_traces(
    con: duckdb.DuckDBPyConnection, cutoff: datetime, after: TraceKey | None = None, limit: int = EXPIRE_BATCH
) -> tuple[Deleted, TraceKey | None]:
    """Look at the next ``limit`` traces (by key, after ``after``) with rows written before ``cutoff`` (naive
    UTC) and delete every row of those quiet since; the caller holds the transaction. Returns what was
    deleted and where the next batch starts (None: no trace is left to look at).

    Batches go by key rather than by age, so a trace that is not quiet (old spans, and new ones) is looked at
    once per pass, never again and again by every batch."""
    candidates = _candidates(con, cutoff, after, limit)
    if candidates.num_rows == 0:
        return Deleted(), None
    last = candidates.slice(candidates.num_rows - 1).to_pylist()[0]
    following = (str(last["tenant"]), str(last["trace_id"])) if candidates.num_rows == limit else None
    con.register(_EXPIRED_VIEW, candidates)
    try:
        quiet = _quiet(con, cutoff)
    finally:
        con.unregister(_EXPIRED_VIEW)
    if quiet.num_rows == 0:
        return Deleted(), following
    return delete_traces(con, quiet, cutoff), following


def expire_worker_runs(con: duckdb.DuckDBPyConnection, cutoff: datetime) -> Deleted:
    """Delete the online worker's runs whose newest recording is older than ``cutoff``, every row of them
    (every write of them, in a lake); the caller holds the transaction."""
    runs = con.execute(
        "SELECT tenant, run_id FROM eval_runs WHERE kind = 'worker' GROUP BY ALL HAVING max(created_at) < ?", [cutoff]
    ).fetch_arrow_table()
    if runs.num_rows == 0:
        return Deleted()
    con.register(_EXPIRED_RUNS_VIEW, runs)
    try:
        for table in _RUN_TABLES:
            con.execute(
                f"DELETE FROM {table} WHERE EXISTS (SELECT 1 FROM {_EXPIRED_RUNS_VIEW} r "
                f"WHERE r.tenant = {table}.tenant AND r.run_id = {table}.run_id)"
            )
    finally:
        con.unregister(_EXPIRED_RUNS_VIEW)
    return Deleted(worker_runs=runs.num_rows)


def expire_traceless_logs(con: duckdb.DuckDBPyConnection, cutoff: datetime) -> Deleted:
    """Delete the log records of no trace (and their evaluation events) received before ``cutoff``."""
    where = "trace_id IS NULL AND received_at < ?"
    return Deleted(
        logs=first_count(con, f"DELETE FROM logs WHERE {where}", [cutoff]),
        evaluations=first_count(con, f"DELETE FROM evaluations WHERE {where}", [cutoff]),
    )
