"""A lake's online grading job queue, in its catalog's PostgreSQL database (schema ``tracegrade``).

DuckLake has no keys and no row locks, and its commits conflict when two of them change the same rows, so
a queue that workers on several machines share lives beside the catalog instead: ``tracegrade.grading_jobs``
in the same database, whose primary key adds each (rule, trace) job once, and whose row locks
(``SELECT … FOR UPDATE SKIP LOCKED``) hand each pending job to one worker. Every time in it (leases, when a
job was added or changed) is PostgreSQL's clock, so workers whose clocks differ still agree on when a lease
expired. The table's columns are those of the file store's ``grading_jobs``; the lake shows it as its
``grading_jobs`` view, through a read-only attachment of the schema (``lake_schema``), which is why the
table sits in a schema of its own: queries see it and nothing else of the catalog database. A worker's id is
held by one process at a time, through a lock in the same database (``lake_worker_ids``).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from tracegrade.store.catalog_connection import PG_NOW, CatalogConnection, create_in_catalog, pg_columns
from tracegrade.store.grading_jobs import (
    EXPIRED_ERROR_SQL,
    RELEASED_SQL,
    WAITING_JOBS_SQL,
    ClaimedJob,
    job_prefix,
    orphaned_jobs,
)
from tracegrade.store.lake_worker_ids import CatalogWorkerId
from tracegrade.store.tenancy import DEFAULT_TENANT

if TYPE_CHECKING:
    from tracegrade.store.lake_schema import Column

__all__ = ["JOBS_SCHEMA", "CatalogJobQueue", "ensure_job_table"]

JOBS_SCHEMA = "tracegrade"
_TABLE = f"{JOBS_SCHEMA}.grading_jobs"


def ensure_job_table(conninfo: str, columns: Sequence[Column]) -> None:
    """Create ``tracegrade.grading_jobs`` in the catalog's database, or add the columns it lacks."""
    listed = pg_columns("grading_jobs", columns)
    create_in_catalog(
        conninfo,
        "creating the grading job queue",
        f"CREATE SCHEMA IF NOT EXISTS {JOBS_SCHEMA}",
        f"CREATE TABLE IF NOT EXISTS {_TABLE} ({', '.join(listed)}, PRIMARY KEY (job_id))",
        *(f"ALTER TABLE {_TABLE} ADD COLUMN IF NOT EXISTS {column}" for column in listed),
        # what claims look for: the jobs not finished yet, oldest first
        f"CREATE INDEX IF NOT EXISTS grading_jobs_open ON {_TABLE} (created_at, job_id) "
        "WHERE status IN ('pending', 'leased')",
    )


class CatalogJobQueue:
    """The job queue of the lake whose catalog is at ``conninfo``; ``traces`` (the lake store) answers which
    traces settled, through its ``grading_jobs`` view of this queue."""

    def __init__(self, conninfo: str, traces: Any) -> None:
        self._conninfo = conninfo
        self._catalog = CatalogConnection(conninfo)
        self._traces = traces
        self._worker_ids: dict[str, CatalogWorkerId] = {}  # the ids this process holds, until the queue closes
        self._worker_ids_lock = threading.Lock()

    def hold_worker_id(self, owner: str) -> None:
        with self._worker_ids_lock:
            held = self._worker_ids.get(owner)
            if held is None:
                held = self._worker_ids[owner] = CatalogWorkerId(self._conninfo, owner)
        held.hold()

    def enqueue(self, rule: str, where: Sequence[str], params: Sequence[Any], tenant: str = DEFAULT_TENANT) -> int:
        found = self._traces.query(
            f"SELECT trace_id FROM traces WHERE tenant = ? AND {' AND '.join(where)} AND NOT EXISTS "
            "(SELECT 1 FROM grading_jobs j WHERE j.tenant = traces.tenant AND j.rule = ? "
            "AND j.trace_id = traces.trace_id)",
            [tenant, *params, rule],
        ).rows
        if not found:
            return 0
        with self._catalog.cursor("adding grading jobs") as cursor:
            cursor.execute(
                f"INSERT INTO {_TABLE} (job_id, rule, trace_id, status, attempts, created_at, updated_at, tenant) "
                f"SELECT %(prefix)s || ':' || t, %(rule)s, t, 'pending', 0, {PG_NOW}, {PG_NOW}, %(tenant)s "
                "FROM unnest(%(ids)s::text[]) t ON CONFLICT (job_id) DO NOTHING",
                {"prefix": job_prefix(rule, tenant), "rule": rule, "tenant": tenant, "ids": [row[0] for row in found]},
            )
            return max(cursor.rowcount, 0)

    def claim(self, owner: str, limit: int, lease: timedelta, max_attempts: int) -> list[ClaimedJob]:
        with self._catalog.cursor("claiming grading jobs") as cursor:
            cursor.execute(
                f"UPDATE {_TABLE} SET status = 'failed', owner = NULL, lease_expires = NULL, updated_at = {PG_NOW}, "
                f"error = {EXPIRED_ERROR_SQL} WHERE status = 'leased' AND lease_expires < {PG_NOW} AND attempts >= %s",
                [max_attempts],
            )
            cursor.execute(
                f"UPDATE {_TABLE} g SET status = 'leased', owner = %(owner)s, attempts = g.attempts + 1, "
                f"lease_expires = {PG_NOW} + %(lease)s, updated_at = {PG_NOW} "
                f"FROM (SELECT job_id FROM {_TABLE} WHERE status IN ('pending', 'leased') AND "
                f"(status = 'pending' OR lease_expires < {PG_NOW}) AND attempts < %(max)s "
                "ORDER BY created_at, job_id LIMIT %(limit)s FOR UPDATE SKIP LOCKED) picked "
                "WHERE g.job_id = picked.job_id "
                "RETURNING g.job_id, g.rule, g.trace_id, g.created_at, g.attempts, g.tenant",
                {"owner": owner, "lease": lease, "max": max_attempts, "limit": limit},
            )
            rows = sorted(cursor.fetchall(), key=lambda row: (row[3], row[0]))
        return [ClaimedJob(*row) for row in rows]

    def renew(self, job_ids: Sequence[str], owner: str, lease: timedelta) -> None:
        self._update_held("renewing grading job leases", f"lease_expires = {PG_NOW} + %s", [lease], job_ids, owner)

    def finish(self, job_ids: Sequence[str], owner: str, status: str, run_id: str | None, error: str | None) -> int:
        assignments = "status = %s, run_id = %s, error = %s, owner = NULL, lease_expires = NULL"
        return self._update_held("finishing grading jobs", assignments, [status, run_id, error], job_ids, owner)

    def release(self, job_ids: Sequence[str], owner: str, error: str) -> None:
        self._update_held("handing grading jobs back", RELEASED_SQL.format(param="%s"), [error], job_ids, owner)

    def release_held(self, owner: str, error: str) -> int:
        doing = "handing back the grading jobs a worker held"
        return self._update_held(doing, RELEASED_SQL.format(param="%s"), [error], None, owner)

    def _update_held(
        self, doing: str, assignments: str, values: list[Any], job_ids: Sequence[str] | None, owner: str
    ) -> int:
        """Set ``assignments`` (with ``values``) on each of ``job_ids`` (None: every job) whose lease ``owner``
        holds; how many."""
        if job_ids is not None and not job_ids:
            return 0
        # every job: those leased only, which the index of the jobs not finished finds without reading the others
        among, ids = (" AND status = 'leased'", []) if job_ids is None else (" AND job_id = ANY(%s)", [list(job_ids)])
        with self._catalog.cursor(doing) as cursor:
            cursor.execute(
                f"UPDATE {_TABLE} SET {assignments}, updated_at = {PG_NOW} WHERE owner = %s{among}",
                [*values, owner, *ids],
            )
            return max(cursor.rowcount, 0)

    def counts(self) -> dict[str, int]:
        with self._catalog.cursor("counting grading jobs") as cursor:
            rows = cursor.execute(f"SELECT status, count(*) FROM {_TABLE} GROUP BY status").fetchall()
        return {str(status): int(n) for status, n in rows}

    def waiting(self) -> dict[tuple[str, str], int]:
        with self._catalog.cursor("counting the grading jobs not finished") as cursor:
            rows = cursor.execute(WAITING_JOBS_SQL.format(table=_TABLE)).fetchall()
        return {(str(tenant), str(status)): int(n) for tenant, status, n in rows}

    def forget(self, before: datetime, tenant: str | None = None) -> int:
        found = [row[0] for row in self._traces.query(*orphaned_jobs(before, tenant)).rows]
        if not found:
            return 0
        with self._catalog.cursor("deleting the grading jobs of expired traces") as cursor:
            # the time again: a job added since the lake was read is never the one read
            cursor.execute(f"DELETE FROM {_TABLE} WHERE job_id = ANY(%s) AND created_at < %s", [found, before])
            return max(cursor.rowcount, 0)

    def close(self) -> None:
        with self._worker_ids_lock:
            for held in self._worker_ids.values():
                held.close()
            self._worker_ids.clear()
        self._catalog.close()
