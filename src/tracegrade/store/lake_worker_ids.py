"""One running grading worker per worker id on a lake: a PostgreSQL session lock on the id in the catalog's database.

A worker's leases are keyed by its id alone, so two processes of one id (two replicas given the same fixed
``--worker-id``) would each hand back the other's jobs when they start, finish them while the other grades them,
and grade them twice. The id's lock (a session advisory lock) is held by the connection of the process that took
it, so it goes with that process: PostgreSQL lets go of it as soon as the connection closes (the process stopped
or was killed), or once TCP keepalives find its machine gone, so a worker restarted with its id takes it over at
once and may hand back the jobs its previous process held. A second process is refused while the first runs.
"""

from __future__ import annotations

import hashlib
from datetime import timezone
from typing import Any

from tracegrade.errors import WorkerIdInUseError
from tracegrade.store.catalog_connection import CatalogConnection

__all__ = ["CatalogWorkerId"]

# how soon PostgreSQL notices that the machine of a worker holding an id is gone (no FIN ever comes): keepalives
# after 10 s idle, 3 probes 5 s apart, so the id is free again about 25 s later (ignored on a Unix socket)
_KEEPALIVES = ("SET tcp_keepalives_idle = 10", "SET tcp_keepalives_interval = 5", "SET tcp_keepalives_count = 3")
# who holds an advisory lock (bigint form: high and low 32 bits as classid and objid) in this database
_HOLDER_SQL = (
    "SELECT a.client_addr, a.client_port, a.backend_start, a.pid FROM pg_locks l JOIN pg_stat_activity a "
    "ON a.pid = l.pid WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 "
    "AND l.classid = %s::bigint::oid AND l.objid = %s::bigint::oid "
    "AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())"
)


def _lock_key(worker_id: str) -> int:
    """The advisory lock key of ``worker_id``: 64 bits of its SHA-256, so two ids never share a lock in practice."""
    digest = hashlib.sha256(f"tracegrade grading worker {worker_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


class CatalogWorkerId:
    """``worker_id`` held for this process on the lake whose catalog is at ``conninfo``, on a connection of its own."""

    def __init__(self, conninfo: str, worker_id: str) -> None:
        self.worker_id = worker_id
        self._key = _lock_key(worker_id)
        self._catalog = CatalogConnection(conninfo)
        self._held_on: Any = None  # the connection (session) that holds the lock; PostgreSQL's lock is its

    def hold(self) -> None:
        """Take the id, or check that this process still holds it: the connection that took it may have been lost
        (PostgreSQL restarted, the session ended), and the lock with it, so a new connection takes it again.
        Raises WorkerIdInUseError while another process holds it, StoreError when the catalog is out of reach."""
        with self._catalog.cursor(f"holding grading worker id {self.worker_id!r}") as cursor:
            cursor.execute("SELECT 1")  # fails on a lost connection: the next call connects and takes the lock again
            if cursor.connection is self._held_on:
                return
            for setting in _KEEPALIVES:
                cursor.execute(setting)
            taken = cursor.execute("SELECT pg_try_advisory_lock(%s)", [self._key]).fetchone()
            if not (taken and taken[0]):
                raise WorkerIdInUseError(self._in_use(cursor.execute(_HOLDER_SQL, self._key_halves()).fetchone()))
            self._held_on = cursor.connection

    def _key_halves(self) -> list[int]:
        unsigned = self._key & 0xFFFF_FFFF_FFFF_FFFF
        return [unsigned >> 32, unsigned & 0xFFFF_FFFF]

    def _in_use(self, holder: tuple[Any, ...] | None) -> str:
        """What to say when the id is taken: who holds it (as PostgreSQL shows it, when this role may see it)."""
        if holder is None or holder[2] is None:
            who = "another running worker"
        else:
            address, port, since, pid = holder
            source = "a local socket" if address is None else f"{address}:{port}"
            began = f"{since.astimezone(timezone.utc):%Y-%m-%d %H:%M:%S} UTC"
            who = f"another running worker (connected from {source} since {began}, PostgreSQL pid {pid})"
        return (
            f"grading worker id {self.worker_id!r} is in use on the lake ({self._catalog.where}): {who} holds it. "
            "Two workers of one id would hand back and finish each other's jobs and grade them twice. Give each "
            "running worker its own id (`tracegrade worker --worker-id NAME`; without it each worker gets a unique "
            "one), or stop the other worker first"
        )

    def close(self) -> None:
        """Let go of the id (closing the connection ends its session, and the lock with it)."""
        self._catalog.close()
        self._held_on = None
