"""Deleting whole traces: every row a store holds of a set of (tenant, trace_id) keys; and forgetting traces
for good, which also adds them to ``forgotten_traces``.

Retention deletes the traces that have been quiet too long (``retention``). Forgetting deletes the traces
someone asks to have removed (a user's conversation, under privacy law), and they must not come back. Yet a
forgotten trace's spans may still be on their way: in an exporter's retry, in a receiver's queue, in its
request journal (replayed after a crash), or at another receiver in front of the same lake. So every write
looks up the forgotten traces among those it holds, in its own transaction, and drops their records
(``TraceStore.write_batch``, ``TraceStore.replace_trajectories``); a forgotten trace id stays forgotten. A file
store's only writer keeps them in memory too; a lake keeps them in its catalog's database (``lake_forgotten``).

The SQL runs on a writing connection whose tables have the store's names (a DuckDB file's, or a lake's
``raw`` tables), in a transaction the caller holds.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any

import duckdb
import pyarrow as pa

from tracegrade.store.duckdb_api import fetch_arrow, fetch_one, registered
from tracegrade.store.grading_tables import recount_runs
from tracegrade.store.trajectories import TRAJECTORY_TABLES

__all__ = [
    "FORGOTTEN_TABLE",
    "HELD_TABLES",
    "MAX_FORGET_IDS",
    "Deleted",
    "add_forgotten",
    "checked_trace_ids",
    "delete_traces",
    "delete_whole_runs",
    "delete_worker_cases",
    "first_count",
    "held_traces",
    "recorded_runs_of",
    "recorded_runs_sql",
    "trace_keys",
]


FORGOTTEN_TABLE = "forgotten_traces"
MAX_FORGET_IDS = 10_000  # trace ids one request may forget: each request is one transaction
# a store holds something of a trace when one of these has a row of it (every other table's rows of a trace come
# with one of these: evaluation events are log records, trajectory rows are written with the trace's row)
HELD_TABLES = ("spans", "logs", "traces")
_MAX_ID_LENGTH = 256
_HEX_ID = re.compile(r"[0-9a-fA-F]{32}")
_KEYS_VIEW = "_tracegrade_deleted_traces"
_CASES_VIEW = "_tracegrade_deleted_cases"
_RUNS_VIEW = "_tracegrade_deleted_runs"
_WORKER, _RECORDED = "= 'worker'", "<> 'worker'"  # conditions on eval_runs.kind: an online worker's run, or not
_CASE_TABLES = ("eval_results", "eval_case_results", "eval_run_cases")  # a recorded case's rows
# every trace of every recorded case: ``trace_id`` (the first; the only one in rows recorded before ``trace_ids``
# existed), and the others of ``trace_ids``, which only a list holding a comma can have (parsing every case's
# JSON would cost a forget tens of milliseconds per 100,000 cases)
_CASE_TRACES = (
    "SELECT tenant, run_id, eval_id, trace_id FROM eval_case_results UNION ALL "
    "SELECT tenant, run_id, eval_id, unnest(CAST(trace_ids AS VARCHAR[])) FROM eval_case_results "
    "WHERE CAST(trace_ids AS VARCHAR) LIKE '%,%'"
)
_RECEIVED = {"spans": "received_at", "logs": "received_at", "evaluations": "received_at", "traces": "updated_at"}


@dataclass(frozen=True)
class Deleted:
    """What a deletion removed: traces, and rows by kind (every copy of a row in a lake)."""

    traces: int = 0
    spans: int = 0
    logs: int = 0  # log records, evaluation events among them
    evaluations: int = 0
    trajectory_rows: int = 0  # rows of traces, node_visits, tool_calls and llm_calls
    jobs: int = 0  # online grading jobs of the deleted traces
    worker_runs: int = 0  # an online worker's runs, every row of them
    worker_cases: int = 0  # cases an online worker graded of the deleted traces, every row of them
    recorded_runs: int = 0  # runs people recorded (grade, CI, live) that graded a deleted trace, deleted whole
    runs_kept: tuple[str, ...] = ()  # the ids of such runs, when the forget was not asked to delete them

    def __add__(self, other: Deleted) -> Deleted:
        counts = {name: getattr(self, name) + getattr(other, name) for name in _COUNTS}
        return Deleted(**counts, runs_kept=tuple(dict.fromkeys(self.runs_kept + other.runs_kept)))

    def summary(self, verb: str = "deleted") -> str:
        recorded = f", {self.recorded_runs} recorded run(s)" if self.recorded_runs else ""  # forgetting may
        return (
            f"{verb} {self.traces} trace(s): {self.spans} span(s), {self.logs} log record(s) "
            f"({self.evaluations} evaluation event(s)), {self.trajectory_rows} trajectory row(s), "
            f"{self.jobs} grading job(s), {self.worker_runs} online grading run(s), "
            f"{self.worker_cases} online graded case(s){recorded}"
        )

    def as_dict(self) -> dict[str, int | list[str]]:
        return {name: getattr(self, name) for name in _COUNTS} | {"runs_kept": list(self.runs_kept)}

    @classmethod
    def from_dict(cls, document: dict[str, Any]) -> Deleted:
        """The inverse of :meth:`as_dict`; TypeError or ValueError for a document that is not one."""
        unknown = set(document) - {*_COUNTS, "runs_kept"}
        if unknown:
            raise ValueError(f"unknown keys {sorted(unknown)}")
        kept = document.get("runs_kept", [])
        if not isinstance(kept, list) or not all(isinstance(run, str) for run in kept):
            raise TypeError("runs_kept must be a list of run ids")
        return cls(**{name: int(document[name]) for name in _COUNTS if name in document}, runs_kept=tuple(kept))


_COUNTS = tuple(f.name for f in fields(Deleted) if f.name != "runs_kept")


def checked_trace_ids(
    values: Sequence[object], where: str = "trace_ids", *, limit: int | None = MAX_FORGET_IDS
) -> list[str]:
    """``values`` as trace ids to forget: each a non-empty string, a 32-digit hex id in lower case as the
    receiver stores it; raises ValueError naming the first that is not (by its index in ``where``), and for
    more than ``limit`` of them."""
    if not values:
        raise ValueError(f"{where} is empty: give the id of at least one trace to forget")
    if limit is not None and len(values) > limit:
        raise ValueError(f"{where} holds {len(values)} ids; forget at most {limit} at a time")
    checked = []
    for index, value in enumerate(values):
        if not isinstance(value, str) or not value.strip() or len(value) > _MAX_ID_LENGTH:
            raise ValueError(
                f"{where}[{index}] must be a trace id (a string of 1 to {_MAX_ID_LENGTH} characters, "
                f"usually 32 hex digits); got {repr(value)[:80]}"
            )
        value = value.strip()
        checked.append(value.lower() if _HEX_ID.fullmatch(value) else value)
    return checked


def trace_keys(tenant: str, trace_ids: list[str]) -> pa.Table:
    """The keys of ``tenant``'s traces ``trace_ids`` (each once), as the deletions here take them."""
    unique = list(dict.fromkeys(trace_ids))
    tenants = pa.array([tenant] * len(unique), pa.string())
    return pa.table({"tenant": tenants, "trace_id": pa.array(unique, pa.string())})


def first_count(con: duckdb.DuckDBPyConnection, sql: str, params: list[object]) -> int:
    """The integer in the first column of the first row ``sql`` returns (a count, the rows a DELETE removed)."""
    row = fetch_one(con, sql, params)
    return int(row[0]) if row else 0


def delete_traces(con: duckdb.DuckDBPyConnection, keys: pa.Table, received_before: datetime | None = None) -> Deleted:
    """Delete the rows of the traces ``keys`` (columns tenant, trace_id) from the spans, logs, evaluations and
    trajectory tables; with ``received_before``, only rows the store wrote before it (which narrows the scan:
    rows lie in arrival order). ``traces`` in the answer is the number of keys."""
    with registered(con, _KEYS_VIEW, keys):

        def delete(table: str) -> int:
            column = _RECEIVED.get(table)
            when = f"{column} < ? AND " if received_before is not None and column else ""
            return first_count(
                con,
                f"DELETE FROM {table} WHERE {when}EXISTS (SELECT 1 FROM {_KEYS_VIEW} k "
                f"WHERE k.tenant = {table}.tenant AND k.trace_id = {table}.trace_id)",
                [received_before] if when else [],
            )

        return Deleted(
            traces=keys.num_rows,
            spans=delete("spans"),
            logs=delete("logs"),
            evaluations=delete("evaluations"),
            trajectory_rows=sum(delete(table) for table in TRAJECTORY_TABLES),
        )


def held_traces(con: duckdb.DuckDBPyConnection, keys: pa.Table) -> int:
    """How many of the traces ``keys`` the store holds anything of (spans, log records or a trajectory)."""
    held = " UNION ".join(f"SELECT tenant, trace_id FROM {table}" for table in HELD_TABLES)
    with registered(con, _KEYS_VIEW, keys):
        return first_count(con, f"SELECT count(*) FROM {_KEYS_VIEW} SEMI JOIN ({held}) USING (tenant, trace_id)", [])


def add_forgotten(con: duckdb.DuckDBPyConnection, keys: pa.Table, at: datetime) -> None:
    """Add the traces ``keys`` to ``forgotten_traces`` (at ``at``, the store's clock), those not in it yet."""
    with registered(con, _KEYS_VIEW, keys):
        con.execute(
            f"INSERT INTO {FORGOTTEN_TABLE} (tenant, trace_id, forgotten_at) SELECT tenant, trace_id, ? "
            f"FROM {_KEYS_VIEW} ANTI JOIN {FORGOTTEN_TABLE} USING (tenant, trace_id)",
            [at],
        )


def delete_worker_cases(con: duckdb.DuckDBPyConnection, keys: pa.Table) -> int:
    """Delete the cases online workers graded of the traces ``keys`` (their rows in every case table) and
    count their runs again; returns the cases deleted. A worker's run holds no report of its own, so its cases
    are all there is of it; the runs people record have a report of their own (``recorded_runs_of``)."""
    cases = _cases_of(con, keys, "c.tenant, c.run_id, c.eval_id", _WORKER)
    if cases.num_rows == 0:
        return 0
    with registered(con, _CASES_VIEW, cases):
        for table in _CASE_TABLES:
            con.execute(
                f"DELETE FROM {table} WHERE EXISTS (SELECT 1 FROM {_CASES_VIEW} x WHERE x.tenant = {table}.tenant "
                f"AND x.run_id = {table}.run_id AND x.eval_id = {table}.eval_id)"
            )
        recount_runs(con, f"SELECT DISTINCT tenant, run_id FROM {_CASES_VIEW}")
    return cases.num_rows


def recorded_runs_of(con: duckdb.DuckDBPyConnection, keys: pa.Table) -> pa.Table:
    """The runs people recorded (every kind but an online worker's) with a case that graded one of the traces
    ``keys``, in any of its turns: a table of (tenant, run_id), by run id."""
    return _cases_of(con, keys, "c.tenant, c.run_id", _RECORDED).sort_by("run_id")


def recorded_runs_sql(trace_ids: str) -> str:
    """A read-only query of the ids of the runs :func:`recorded_runs_of` finds for the traces whose ids are
    ``IN trace_ids`` (``rows.sql_string_in``'s SQL), by id, as one tenant's query sees the store."""
    return _cases_sql("c.run_id", _RECORDED, f"c.trace_id IN {trace_ids}") + " ORDER BY c.run_id"


def delete_whole_runs(con: duckdb.DuckDBPyConnection, runs: pa.Table) -> int:
    """Delete the runs ``runs`` (columns tenant, run_id) whole: their row in ``eval_runs`` and every row of their
    cases; returns the runs deleted."""
    if runs.num_rows == 0:
        return 0
    with registered(con, _RUNS_VIEW, runs):

        def delete(table: str) -> int:
            return first_count(
                con,
                f"DELETE FROM {table} WHERE EXISTS (SELECT 1 FROM {_RUNS_VIEW} x WHERE x.tenant = {table}.tenant "
                f"AND x.run_id = {table}.run_id)",
                [],
            )

        for table in _CASE_TABLES:
            delete(table)
        return delete("eval_runs")


def _cases_of(con: duckdb.DuckDBPyConnection, keys: pa.Table, columns: str, kind: str) -> pa.Table:
    """``columns`` (of ``c``, the cases' traces) of the cases that graded one of the traces ``keys``, each once,
    in runs whose ``kind`` meets the condition ``kind``."""
    with registered(con, _KEYS_VIEW, keys):
        traces = f"(c.tenant, c.trace_id) IN (SELECT tenant, trace_id FROM {_KEYS_VIEW})"  # DuckDB joins an IN by hash
        return fetch_arrow(con, _cases_sql(columns, kind, traces))


def _cases_sql(columns: str, kind: str, traces: str) -> str:
    return (
        f"SELECT DISTINCT {columns} FROM ({_CASE_TRACES}) c WHERE {traces} AND EXISTS (SELECT 1 FROM eval_runs r "
        f"WHERE r.tenant = c.tenant AND r.run_id = c.run_id AND r.kind {kind})"
    )
