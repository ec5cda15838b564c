"""Retention: delete the traces that have been quiet for longer than a store keeps them.

A trace's age is the time since the store last received anything of it: its newest span or log record
(``received_at``, the receiver's clock, never the sender's) or its newest trajectory build (``updated_at``).
A trace is expired when all of them are older than the cutoff; its spans, log records, evaluation events and
trajectory rows go in one transaction, so no reader ever sees half a trace. Log records that belong to no
trace expire by their own ``received_at``. An online worker's runs (``kind = 'worker'``: a case per trace it
graded, so they grow with the traffic) expire once the newest case recorded in them is older than the cutoff.
The runs that people record (``grade``, CI, live runs) stay: they are the history that ``diff`` and ``gate``
compare, and they hold their own copy of what they graded.

A ``RetentionPolicy`` may keep one tenant's traces for longer or shorter than the others': each expiry then
covers the tenants of one ``TenantScope``.

What arrives after the cutoff is never deleted: the candidates are read in the same transaction as the
deletes, which only touch rows received before the cutoff. A span of an expired trace that arrives later
starts the trace again (and is rebuilt into a trajectory of its own).

The SQL runs on a writing connection whose tables have the store's names: a DuckDB file's, or a lake's
``raw`` tables (every copy and build of a row goes; each batch inside the lake's write gate, ``lake_write_gate``,
since DuckLake fails a delete that races an insert into the same table).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol

import duckdb
import pyarrow as pa

from tracegrade.errors import InvalidValueError
from tracegrade.store.duckdb_api import fetch_arrow, registered
from tracegrade.store.tenancy import TraceKey, check_tenant_name
from tracegrade.store.trace_deletion import Deleted, delete_traces, first_count
from tracegrade.timespec import parse_duration

__all__ = [
    "EXPIRE_BATCH",
    "RetentionPolicy",
    "TenantScope",
    "expire_quiet_traces",
    "expire_traceless_logs",
    "expire_worker_runs",
    "older_rows_sql",
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
_FOREVER = "forever"  # what --retain-tenants takes for a tenant whose traces never expire


@dataclass(frozen=True)
class TenantScope:
    """The tenants an expiry covers: every one (the default), one (``only``), or every one but ``others``."""

    only: str | None = None
    others: tuple[str, ...] = ()

    def condition(self, placeholder: str) -> str:
        """`` AND …`` on a ``tenant`` column, the scope's value bound to ``placeholder`` (``bound``); or nothing."""
        if self.only is not None:
            return f" AND tenant = {placeholder}"
        return f" AND NOT list_contains({placeholder}, tenant)" if self.others else ""

    @property
    def bound(self) -> list[object]:
        """The parameter ``condition`` takes: none, for every tenant."""
        if self.only is not None:
            return [self.only]
        return [list(self.others)] if self.others else []


@dataclass(frozen=True)
class RetentionPolicy:
    """How long a store keeps traces: ``tenants`` maps a tenant to its own retention (None: forever), ``default``
    is every other tenant's (None: forever)."""

    default: timedelta | None = None
    tenants: Mapping[str, timedelta | None] = field(default_factory=dict)

    def passes(self, now: datetime) -> list[tuple[datetime, TenantScope]]:
        """The expiries one pass makes at ``now``: a cutoff and the tenants it covers."""
        kept = sorted(self.tenants.items())
        steps = [(now - keep, TenantScope(only=tenant)) for tenant, keep in kept if keep is not None]
        if self.default is not None:
            steps.append((now - self.default, TenantScope(others=tuple(tenant for tenant, _ in kept))))
        return steps

    @property
    def shortest(self) -> timedelta | None:
        """The shortest retention in force (None: nothing ever expires)."""
        spans = [keep for keep in (self.default, *self.tenants.values()) if keep is not None]
        return min(spans) if spans else None

    def describe(self) -> str:
        own = "; ".join(
            f"{tenant}'s after {keep}" if keep else f"{tenant}'s kept" for tenant, keep in sorted(self.tenants.items())
        )
        default = f"traces quiet for {self.default} are deleted" if self.default else "traces are kept"
        return default + (f" ({own})" if own else "")

    @staticmethod
    def parse_tenants(text: str, option: str) -> dict[str, timedelta | None]:
        """``acme=7d,umbrella=forever`` as a tenant's retention each; InvalidValueError naming ``option`` and
        the pair at fault for anything else."""
        tenants: dict[str, timedelta | None] = {}
        for pair in filter(None, (part.strip() for part in text.split(","))):
            tenant, equals, keep = (part.strip() for part in pair.partition("="))
            if not equals or not keep:
                raise InvalidValueError(
                    f"{option}: {pair!r} is not TENANT=DURATION; give pairs separated by commas, "
                    f"e.g. acme=7d,umbrella={_FOREVER}"
                )
            check_tenant_name(tenant, option)
            if tenant in tenants:
                raise InvalidValueError(f"{option}: tenant {tenant!r} is given twice")
            try:
                tenants[tenant] = None if keep == _FOREVER else parse_duration(keep, f"{tenant}'s retention")
            except InvalidValueError as exc:
                raise InvalidValueError(f"{option}: {exc} (or {_FOREVER})") from None
        if not tenants and text.strip():
            raise InvalidValueError(f"{option}: {text!r} names no tenant; give TENANT=DURATION pairs, e.g. acme=7d")
        return tenants

    def apply(self, store: _Expiring, now: datetime) -> Deleted:
        """One pass on ``store`` at ``now`` (naive UTC): every expiry of ``passes``."""
        deleted = Deleted()
        for cutoff, scope in self.passes(now):
            deleted += store.expire(cutoff, scope=scope)
        return deleted


class _Expiring(Protocol):
    def expire(self, cutoff: datetime, *, scope: TenantScope = ...) -> Deleted: ...


def older_rows_sql(scope: TenantScope) -> str:
    """Whether anything could expire: a row of ``scope`` written before the cutoff (``$1``; the scope's value is
    ``$2``), read on a reading cursor."""
    where = scope.condition("$2")
    return "SELECT " + " OR ".join(
        [f"EXISTS (SELECT 1 FROM {table} WHERE {column} < $1{where})" for table, column in _RECEIVED]
        + [f"EXISTS (SELECT 1 FROM eval_runs WHERE kind = 'worker' AND created_at < $1{where})"]
    )


def _candidates(
    con: duckdb.DuckDBPyConnection, cutoff: datetime, after: TraceKey | None, limit: int, scope: TenantScope
) -> pa.Table:
    """The first ``limit`` traces of ``scope`` after ``after`` (in key order) with a row written before the
    cutoff."""
    past = "" if after is None else " AND (tenant > $tenant OR (tenant = $tenant AND trace_id > $trace_id))"
    older = " UNION ".join(
        f"SELECT tenant, trace_id FROM {table} WHERE {column} < $cutoff AND trace_id IS NOT NULL{past}"
        f"{scope.condition('$scope')}"
        for table, column in _RECEIVED
    )
    params: dict[str, object] = {"cutoff": cutoff, "limit": limit}
    if after is not None:
        params |= {"tenant": after[0], "trace_id": after[1]}
    if scope.bound:
        params["scope"] = scope.bound[0]
    return fetch_arrow(con, f"SELECT tenant, trace_id FROM ({older}) ORDER BY ALL LIMIT $limit", params)


def _quiet(con: duckdb.DuckDBPyConnection, cutoff: datetime) -> pa.Table:
    """Those of the registered candidates with no row written at or after the cutoff."""
    # a semi join builds on the (few) candidates and streams the newer rows past them
    newer = " UNION ALL ".join(
        f"SELECT tenant, trace_id FROM {table} SEMI JOIN {_EXPIRED_VIEW} USING (tenant, trace_id) "
        f"WHERE {column} >= $cutoff"
        for table, column in _RECEIVED
    )
    sql = f"SELECT tenant, trace_id FROM {_EXPIRED_VIEW} EXCEPT SELECT tenant, trace_id FROM ({newer})"
    return fetch_arrow(con, sql, {"cutoff": cutoff})


def expire_quiet_traces(
    con: duckdb.DuckDBPyConnection,
    cutoff: datetime,
    after: TraceKey | None = None,
    limit: int = EXPIRE_BATCH,
    scope: TenantScope = TenantScope(),
) -> tuple[Deleted, TraceKey | None]:
    """Look at the next ``limit`` traces of ``scope`` (by key, after ``after``) with rows written before
    ``cutoff`` (naive UTC) and delete every row of those quiet since; the caller holds the transaction. Returns what was
    deleted and where the next batch starts (None: no trace is left to look at).

    Batches go by key rather than by age, so a trace that is not quiet (old spans, and new ones) is looked at
    once per pass, never again and again by every batch."""
    candidates = _candidates(con, cutoff, after, limit, scope)
    if candidates.num_rows == 0:
        return Deleted(), None
    last = candidates.slice(candidates.num_rows - 1).to_pylist()[0]
    following = (str(last["tenant"]), str(last["trace_id"])) if candidates.num_rows == limit else None
    with registered(con, _EXPIRED_VIEW, candidates):
        quiet = _quiet(con, cutoff)
    if quiet.num_rows == 0:
        return Deleted(), following
    return delete_traces(con, quiet, cutoff), following


def expire_worker_runs(con: duckdb.DuckDBPyConnection, cutoff: datetime, scope: TenantScope = TenantScope()) -> Deleted:
    """Delete the online worker's runs of ``scope`` whose newest recording is older than ``cutoff``, every row of
    them (every write of them, in a lake); the caller holds the transaction."""
    runs = fetch_arrow(
        con,
        f"SELECT tenant, run_id FROM eval_runs WHERE kind = 'worker'{scope.condition('?')} GROUP BY ALL "
        "HAVING max(created_at) < ?",
        [*scope.bound, cutoff],
    )
    if runs.num_rows == 0:
        return Deleted()
    with registered(con, _EXPIRED_RUNS_VIEW, runs):
        for table in _RUN_TABLES:
            con.execute(
                f"DELETE FROM {table} WHERE EXISTS (SELECT 1 FROM {_EXPIRED_RUNS_VIEW} r "
                f"WHERE r.tenant = {table}.tenant AND r.run_id = {table}.run_id)"
            )
    return Deleted(worker_runs=runs.num_rows)


def expire_traceless_logs(
    con: duckdb.DuckDBPyConnection, cutoff: datetime, scope: TenantScope = TenantScope()
) -> Deleted:
    """Delete the log records of no trace (and their evaluation events) of ``scope`` received before ``cutoff``."""
    where = f"trace_id IS NULL AND received_at < ?{scope.condition('?')}"
    params = [cutoff, *scope.bound]
    return Deleted(
        logs=first_count(con, f"DELETE FROM logs WHERE {where}", params),
        evaluations=first_count(con, f"DELETE FROM evaluations WHERE {where}", params),
    )
