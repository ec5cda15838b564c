"""The online grading job queue: what a worker asks of it, and a DuckDB file's own ``grading_jobs`` table.

Each (rule, trace) pair is one job, ``<rule>:<trace_id>``, added once; a rule belongs to one tenant,
whose traces it grades, and the job is that tenant's (a tenant other than the default one is named in the
job id too, ``<tenant>/<rule>:<trace_id>``, so two tenants' rules of one name never share a job). A
worker claims jobs by taking a lease; a job whose lease expired is claimed again (or failed, after its
last allowed attempt); the holder renews the leases of the jobs it is grading, and only the lease holder
may finish a job. Leases are keyed by the worker's id, which one running process holds at a time
(``JobQueue.hold_worker_id``). A DuckDB file has one writer, so its queue
is plain SQL on the file; a lake keeps its queue in the catalog's PostgreSQL database instead
(``lake_jobs``), whose row locks let workers on several machines share it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from tracegrade.store.rows import sql_string_in, utc_now
from tracegrade.store.tenancy import DEFAULT_TENANT

__all__ = [
    "EXPIRED_ERROR_SQL",
    "RELEASED_SQL",
    "WAITING_JOBS_SQL",
    "ClaimedJob",
    "JobQueue",
    "StoreJobQueue",
    "job_prefix",
    "orphaned_jobs",
]

# the ids of the jobs added before a time (the parameter) whose trace has no trajectory: jobs are only ever
# added for traces with one, and a trajectory goes only when its trace expires (on either database)
_ORPHANED_JOBS_SQL = (
    "SELECT job_id FROM grading_jobs j WHERE created_at < ? AND NOT EXISTS "
    "(SELECT 1 FROM traces t WHERE t.tenant = j.tenant AND t.trace_id = j.trace_id)"
)


def orphaned_jobs(before: datetime, tenant: str | None) -> tuple[str, list[Any]]:
    """The query listing the jobs ``forget`` deletes, and its parameters."""
    if tenant is None:
        return _ORPHANED_JOBS_SQL, [before]
    return f"{_ORPHANED_JOBS_SQL} AND j.tenant = ?", [before, tenant]


# the jobs not finished yet by tenant and status, in ``{table}`` (SQL for either database; a lake's catalog has an
# index on the jobs not finished, so the count reads those only)
WAITING_JOBS_SQL = (
    "SELECT tenant, status, count(*) FROM {table} WHERE status IN ('pending', 'leased') GROUP BY tenant, status"
)
# the error of a job failed for good: its lease expired after its last attempt (SQL, for either database)
EXPIRED_ERROR_SQL = "'the worker holding the lease stopped ' || attempts || ' time(s) without finishing'"
# what a job handed back is set to (``JobQueue.release``): pending, its attempt given back, its error the parameter
# ``{param}`` (the database's placeholder); SQL for either database
RELEASED_SQL = (
    "status = 'pending', error = {param}, owner = NULL, lease_expires = NULL, attempts = greatest(attempts - 1, 0)"
)


def job_prefix(rule: str, tenant: str) -> str:
    """What the ids of ``rule``'s jobs start with (``<prefix>:<trace_id>``): the rule, and its tenant unless
    it is the default one."""
    return rule if tenant == DEFAULT_TENANT else f"{tenant}/{rule}"


@dataclass(frozen=True)
class ClaimedJob:
    """A job leased to a worker: which rule grades which trace, when the job was added (its run window), how
    often it was claimed, this time included, and whose job it is (its rule's tenant)."""

    job_id: str
    rule: str
    trace_id: str
    created_at: datetime
    attempts: int
    tenant: str = DEFAULT_TENANT


class JobQueue(Protocol):
    """The jobs of online grading, shared by every worker on one store."""

    def hold_worker_id(self, owner: str) -> None:
        """Make sure no other running process grades as ``owner`` (leases are keyed by it: two processes of one id
        would hand back and finish each other's jobs), and keep it so while this queue is open; called again, check
        that it still is. Raises WorkerIdInUseError while another process holds the id."""
        ...

    def enqueue(self, rule: str, where: Sequence[str], params: Sequence[Any], tenant: str = DEFAULT_TENANT) -> int:
        """Add a pending job of ``tenant``'s ``rule`` for every trace of that tenant in ``traces`` matching all
        of ``where`` (SQL predicates with ``params``) that has none yet; how many were added."""
        ...

    def claim(self, owner: str, limit: int, lease: timedelta, max_attempts: int) -> list[ClaimedJob]:
        """Lease up to ``limit`` pending jobs, or jobs whose lease expired, to ``owner`` (oldest first); a
        job whose lease expired after its last allowed attempt is marked failed instead."""
        ...

    def renew(self, job_ids: Sequence[str], owner: str, lease: timedelta) -> None:
        """Extend to ``lease`` from now the lease of each of ``job_ids`` that ``owner`` still holds."""
        ...

    def finish(self, job_ids: Sequence[str], owner: str, status: str, run_id: str | None, error: str | None) -> int:
        """Set the final (or ``pending`` again) status of each of ``job_ids`` whose lease ``owner`` still holds;
        how many it held (the others' leases were lost: they expired, and another worker took the jobs over)."""
        ...

    def release(self, job_ids: Sequence[str], owner: str, error: str) -> None:
        """Hand back each of ``job_ids`` whose lease ``owner`` still holds: pending again, its attempt given
        back (the store was out of reach, which is no fault of the job's), ``error`` saying why."""
        ...

    def release_held(self, owner: str, error: str) -> int:
        """Hand back, as ``release`` does, every job whose lease ``owner`` holds; how many. For a worker that
        starts again under the id of one that held leases when it stopped (its store failed and was opened
        again, or its process restarted with the same id): their results were lost, and the jobs would wait for
        their leases to run out, then spend an attempt."""
        ...

    def counts(self) -> dict[str, int]:
        """Jobs by status."""
        ...

    def waiting(self) -> dict[tuple[str, str], int]:
        """The jobs not finished yet by (tenant, status): ``pending`` and ``leased`` only, which is cheap to count
        however many finished jobs the queue keeps."""
        ...

    def forget(self, before: datetime, tenant: str | None = None) -> int:
        """Delete the jobs added before ``before`` whose trace is gone (expired: see ``retention``), only
        ``tenant``'s when given (a tenant's forget); how many."""
        ...


class _SqlStore(Protocol):
    def execute_write(self, sql: str, params: Sequence[Any] | None = None) -> int: ...

    def query(self, sql: str, params: Sequence[Any] | None = None) -> Any: ...


class StoreJobQueue:
    """The job queue in a DuckDB store's own ``grading_jobs`` table (times from this machine's clock)."""

    def __init__(self, store: _SqlStore) -> None:
        self.store = store

    def hold_worker_id(self, owner: str) -> None:
        """Nothing to do: a DuckDB file has one writing process (a second ``tracegrade worker`` on it is refused,
        the file being locked), so every worker of this queue runs in this process."""

    def enqueue(self, rule: str, where: Sequence[str], params: Sequence[Any], tenant: str = DEFAULT_TENANT) -> int:
        now = utc_now()
        # the rows the INSERT added (DuckDB counts neither a trace that has the job nor a conflict it skipped):
        # counting the rule's jobs before and after would also count those another enqueue added in between
        return self.store.execute_write(
            "INSERT INTO grading_jobs (job_id, rule, trace_id, status, owner, lease_expires, attempts, created_at, "
            "updated_at, run_id, error, tenant) "
            "SELECT ? || ':' || trace_id, ?, trace_id, 'pending', NULL, NULL, 0, ?, ?, NULL, NULL, tenant FROM traces "
            f"WHERE tenant = ? AND {' AND '.join(where)} AND NOT EXISTS (SELECT 1 FROM grading_jobs j "
            "WHERE j.tenant = traces.tenant AND j.rule = ? AND j.trace_id = traces.trace_id) ON CONFLICT DO NOTHING",
            [job_prefix(rule, tenant), rule, now, now, tenant, *params, rule],
        )

    def claim(self, owner: str, limit: int, lease: timedelta, max_attempts: int) -> list[ClaimedJob]:
        now = utc_now()
        expires = now + lease
        self.store.execute_write(
            "UPDATE grading_jobs SET status = 'failed', owner = NULL, lease_expires = NULL, updated_at = ?, "
            f"error = {EXPIRED_ERROR_SQL} "
            "WHERE status = 'leased' AND lease_expires < ? AND attempts >= ?",
            [now, now, max_attempts],
        )
        self.store.execute_write(
            "UPDATE grading_jobs SET status = 'leased', owner = ?, lease_expires = ?, attempts = attempts + 1, "
            "updated_at = ? WHERE job_id IN (SELECT job_id FROM grading_jobs WHERE (status = 'pending' OR "
            "(status = 'leased' AND lease_expires < ?)) AND attempts < ? ORDER BY created_at, job_id LIMIT ?)",
            [owner, expires, now, now, max_attempts, limit],
        )
        rows = self.store.query(
            "SELECT job_id, rule, trace_id, created_at, attempts, tenant FROM grading_jobs WHERE status = 'leased' "
            "AND owner = ? AND lease_expires = ? ORDER BY created_at, job_id",
            [owner, expires],
        ).rows
        return [ClaimedJob(str(r[0]), str(r[1]), str(r[2]), r[3], int(r[4]), str(r[5])) for r in rows]

    def renew(self, job_ids: Sequence[str], owner: str, lease: timedelta) -> None:
        self._update_held("lease_expires = ?", [utc_now() + lease], job_ids, owner)

    def finish(self, job_ids: Sequence[str], owner: str, status: str, run_id: str | None, error: str | None) -> int:
        assignments = "status = ?, run_id = ?, error = ?, owner = NULL, lease_expires = NULL"
        return self._update_held(assignments, [status, run_id, error], job_ids, owner)

    def release(self, job_ids: Sequence[str], owner: str, error: str) -> None:
        self._update_held(RELEASED_SQL.format(param="?"), [error], job_ids, owner)

    def release_held(self, owner: str, error: str) -> int:
        return self._update_held(RELEASED_SQL.format(param="?"), [error], None, owner)

    def _update_held(self, assignments: str, values: list[Any], job_ids: Sequence[str] | None, owner: str) -> int:
        """Set ``assignments`` (with ``values``) on each of ``job_ids`` (None: every job) whose lease ``owner``
        holds (a job has an owner only while it is leased); how many it held."""
        ids: list[str] = []
        if job_ids is None:
            among = ""
        elif not job_ids:
            return 0
        else:
            # not a list parameter: DuckDB's Python client converts one of those value by value, at ~75 us each
            listed, ids = sql_string_in(job_ids)
            among = f" AND job_id IN {listed}"
        return self.store.execute_write(
            f"UPDATE grading_jobs SET {assignments}, updated_at = ? WHERE owner = ?{among}",
            [*values, utc_now(), owner, *ids],
        )

    def counts(self) -> dict[str, int]:
        rows = self.store.query("SELECT status, count(*) FROM grading_jobs GROUP BY status").rows
        return {str(status): int(n) for status, n in rows}

    def waiting(self) -> dict[tuple[str, str], int]:
        rows = self.store.query(WAITING_JOBS_SQL.format(table="grading_jobs")).rows
        return {(str(tenant), str(status)): int(n) for tenant, status, n in rows}

    def forget(self, before: datetime, tenant: str | None = None) -> int:
        found = self.store.query(*orphaned_jobs(before, tenant)).rows
        if found:
            among, ids = sql_string_in([row[0] for row in found])
            self.store.execute_write(f"DELETE FROM grading_jobs WHERE job_id IN {among}", ids)
        return len(found)
