"""CatalogBuildQueue: a lake's build queue, a table in its catalog's PostgreSQL database.

Any process may build any trace: receivers (after their commits) and ``tracegrade build`` processes claim
due traces from ``tracegrade_build_queue`` (``FOR UPDATE SKIP LOCKED``: two claims never take the same
trace), each under a lease, so one builder maps a settled trace at a time and a builder that died
leaves its traces to another once ``LEASE_SECONDS`` pass.

Every time here is PostgreSQL's own clock: when a trace is due, when a lease runs out, and the
``updated_at`` a claim's rows get, so the receivers' and builders' clocks need not agree. Why a claim's
build holds every span committed before it: a writer marks a trace only after its DuckLake commit
returned, and a claim reads the lake only after it took the trace, so a claim that saw a mark reads the
commit behind it. A mark that comes while the trace is built (a late span, another receiver's half)
bumps ``marks``, so finishing that claim keeps the trace queued: it is built again once due. Two builds of
one trace are ordered by their claims, and the lake's views show the newest ``updated_at``. A trace is
one tenant's: the queue is keyed by (tenant, trace_id).
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Sequence
from datetime import datetime

from tracegrade.store.build_queue import BuildClaim
from tracegrade.store.catalog_connection import CatalogConnection
from tracegrade.store.tenancy import DEFAULT_TENANT, TraceKey

__all__ = ["LEASE_SECONDS", "QUEUE_TABLE", "CatalogBuildQueue"]

QUEUE_TABLE = "tracegrade_build_queue"
LEASE_SECONDS = 30.0  # far longer than one claim takes to build (a few hundred traces)
_UTC_NOW = "(clock_timestamp() AT TIME ZONE 'UTC')"
_CREATE = f"""
CREATE TABLE IF NOT EXISTS {QUEUE_TABLE} (
    tenant text NOT NULL,
    trace_id text NOT NULL,
    due_at timestamptz NOT NULL,
    marks bigint NOT NULL DEFAULT 1,
    claimed_by text,
    claimed_marks bigint,
    lease_until timestamptz,
    PRIMARY KEY (tenant, trace_id)
);
CREATE INDEX IF NOT EXISTS {QUEUE_TABLE}_due ON {QUEUE_TABLE} (due_at)
"""
# a queue made before tenants (keyed by trace_id alone): its traces are the default tenant's
_ADD_TENANT = f"""
DO $$ BEGIN
    IF NOT EXISTS (SELECT 1 FROM information_schema.columns WHERE table_name = '{QUEUE_TABLE}'
                   AND column_name = 'tenant' AND table_schema = current_schema()) THEN
        ALTER TABLE {QUEUE_TABLE} ADD COLUMN tenant text NOT NULL DEFAULT '{DEFAULT_TENANT}';
        ALTER TABLE {QUEUE_TABLE} ALTER COLUMN tenant DROP DEFAULT;
        ALTER TABLE {QUEUE_TABLE} DROP CONSTRAINT {QUEUE_TABLE}_pkey, ADD PRIMARY KEY (tenant, trace_id);
    END IF;
END $$
"""
_UNLEASED = "(lease_until IS NULL OR lease_until < clock_timestamp())"


class CatalogBuildQueue:
    """The build queue of the lake whose catalog is at ``conninfo`` (one connection, used under a lock)."""

    def __init__(self, conninfo: str, *, create: bool) -> None:
        self._catalog = CatalogConnection(conninfo)
        self.builder = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.settle_seconds = 1.0
        self.root_settle_seconds = 0.1
        self.lease_seconds = LEASE_SECONDS
        if create:
            self._create()

    def configure(self, *, settle_seconds: float, root_settle_seconds: float, capacity: int) -> None:
        self.settle_seconds = settle_seconds
        self.root_settle_seconds = min(root_settle_seconds, settle_seconds)

    def _create(self) -> None:
        self._catalog.create("creating the build queue", _CREATE, _ADD_TENANT)

    def close(self) -> None:
        self._catalog.close()

    # -- the queue -----------------------------------------------------------------------------------------

    def now(self) -> datetime:
        """PostgreSQL's clock, as a UTC timestamp without zone (the store's ``updated_at`` type)."""
        with self._catalog.cursor("reading the time") as cursor:
            row = cursor.execute(f"SELECT {_UTC_NOW}").fetchone()
        assert row is not None
        return row[0]  # type: ignore[no-any-return]

    def mark(self, keys: Sequence[TraceKey], rooted: set[TraceKey]) -> None:
        if not keys:
            return
        ordered = sorted(set(keys))  # one lock order for every writer: concurrent marks never deadlock
        delays = [self.root_settle_seconds if key in rooted else self.settle_seconds for key in ordered]
        with self._catalog.cursor("marking traces for a build") as cursor:
            cursor.execute(
                f"INSERT INTO {QUEUE_TABLE} AS q (tenant, trace_id, due_at) "
                "SELECT n, t, clock_timestamp() + make_interval(secs => d) "
                "FROM unnest(%s::text[], %s::text[], %s::float8[]) u(n, t, d) "
                "ON CONFLICT (tenant, trace_id) DO UPDATE SET due_at = EXCLUDED.due_at, marks = q.marks + 1",
                [*_columns(ordered), delays],
            )

    def claim(self, limit: int, *, due_only: bool = True) -> BuildClaim | None:
        due = "due_at <= clock_timestamp() AND " if due_only else ""
        with self._catalog.cursor("claiming traces to build") as cursor:
            rows = cursor.execute(
                f"WITH due AS (SELECT tenant, trace_id FROM {QUEUE_TABLE} WHERE {due}{_UNLEASED} "
                f"ORDER BY due_at LIMIT %s FOR UPDATE SKIP LOCKED) "
                f"UPDATE {QUEUE_TABLE} q SET claimed_by = %s, claimed_marks = q.marks, "
                "lease_until = clock_timestamp() + make_interval(secs => %s) "
                "FROM due WHERE q.tenant = due.tenant AND q.trace_id = due.trace_id RETURNING q.tenant, q.trace_id",
                [limit, self.builder, self.lease_seconds],
            ).fetchall()
            if not rows:
                return None
            stamp = cursor.execute(f"SELECT {_UTC_NOW}").fetchone()
        assert stamp is not None
        return BuildClaim(sorted((row[0], row[1]) for row in rows), stamp[0])

    def claim_traces(self, keys: Sequence[TraceKey]) -> BuildClaim:
        ordered = sorted(set(keys))
        with self._catalog.cursor("claiming traces to build") as cursor:
            cursor.execute(
                f"INSERT INTO {QUEUE_TABLE} AS q (tenant, trace_id, due_at, claimed_by, claimed_marks, lease_until) "
                "SELECT n, t, clock_timestamp(), %s, 1, clock_timestamp() + make_interval(secs => %s) "
                "FROM unnest(%s::text[], %s::text[]) u(n, t) ON CONFLICT (tenant, trace_id) DO UPDATE SET "
                "claimed_by = EXCLUDED.claimed_by, claimed_marks = q.marks, lease_until = EXCLUDED.lease_until",
                [self.builder, self.lease_seconds, *_columns(ordered)],
            )
            stamp = cursor.execute(f"SELECT {_UTC_NOW}").fetchone()
        assert stamp is not None
        return BuildClaim(ordered, stamp[0])

    def finish(self, claim: BuildClaim, *, built: bool) -> None:
        claimed = "(tenant, trace_id) IN (SELECT * FROM unnest(%s::text[], %s::text[])) AND claimed_by = %s"
        with self._catalog.cursor("finishing a build") as cursor:
            if built:  # done, unless marked again meanwhile: then due again (at the time its mark set)
                cursor.execute(
                    f"DELETE FROM {QUEUE_TABLE} WHERE {claimed} AND marks = claimed_marks",
                    [*_columns(claim.keys), self.builder],
                )
                retry = ""
            else:
                retry = f", due_at = clock_timestamp() + make_interval(secs => {float(self.settle_seconds)})"
            cursor.execute(
                f"UPDATE {QUEUE_TABLE} SET claimed_by = NULL, claimed_marks = NULL, lease_until = NULL{retry} "
                f"WHERE {claimed}",
                [*_columns(claim.keys), self.builder],
            )

    def seconds_until_due(self) -> float | None:
        with self._catalog.cursor("reading the build queue") as cursor:
            row = cursor.execute(
                f"SELECT extract(epoch FROM min(due_at) - clock_timestamp()) FROM {QUEUE_TABLE} WHERE {_UNLEASED}"
            ).fetchone()
        return None if row is None or row[0] is None else max(0.0, float(row[0]))

    def pending(self) -> int:
        with self._catalog.cursor("reading the build queue") as cursor:
            if cursor.execute("SELECT to_regclass(%s)", [QUEUE_TABLE]).fetchone() == (None,):
                return 0
            row = cursor.execute(f"SELECT count(*) FROM {QUEUE_TABLE}").fetchone()
        return int(row[0]) if row else 0

    def waiting(self, limit: int | None = None, *, tenant: str | None = None) -> list[TraceKey]:
        """The traces waiting for a build (claimed or not; ``tenant``'s only, when given), the longest-due first
        (none before a read-write open created the queue)."""
        of_tenant = "" if tenant is None else " WHERE tenant = %s"
        sql = f"SELECT tenant, trace_id FROM {QUEUE_TABLE}{of_tenant} ORDER BY due_at, tenant, trace_id"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        with self._catalog.cursor("reading the build queue") as cursor:
            if cursor.execute("SELECT to_regclass(%s)", [QUEUE_TABLE]).fetchone() == (None,):
                return []
            return [(row[0], row[1]) for row in cursor.execute(sql, None if tenant is None else [tenant]).fetchall()]

    def recover(self) -> None:
        """Nothing to do: the queue outlives every process."""


def _columns(keys: Sequence[TraceKey]) -> tuple[list[str], list[str]]:
    """The tenants and the trace ids of ``keys``, as two arrays for ``unnest``."""
    return [tenant for tenant, _ in keys], [trace_id for _, trace_id in keys]
