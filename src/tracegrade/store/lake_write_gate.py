"""A lake's write gate: lets deletions (retention's expiry batches, forgetting) commit while receivers insert.

DuckLake checks conflicts per table: a transaction that deleted rows of a table fails to commit if any other
transaction inserted into that table since it began. Receivers insert into ``raw.spans`` every second or so,
so a deletion from the same tables would lose that race again and again. The gate is a PostgreSQL advisory
lock in the catalog's database: every lake write transaction holds it shared (taken before the transaction
begins, released after it ends), and a deletion holds it exclusive, so its transaction begins once every write
in flight on any machine has committed, and none begins until it has. Writers wait for the length of one
deletion. A process that dies releases what it held with its session.

A deletion's process that stops without dying (stopped by a signal, its machine frozen or cut off from the
network) would hold every writer back for as long as its session lasts, hours when nothing closes the
connection. So while it holds the gate exclusive its session carries PostgreSQL's ``idle_session_timeout``
(``STALL_TIMEOUT``) and a thread of its own keeps it busy (``_KeepAlive``): PostgreSQL ends a session that
went quiet that long, releasing the gate. The deletion, if it resumes, commits only if no write came in
meanwhile (DuckLake's conflict check above), so losing the gate costs it a retry and loses no row.

Locks a session holds never conflict with each other, so within one process the gate does not order
writes: the store's write lock does.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from tracegrade.errors import StoreError
from tracegrade.store.catalog_connection import CatalogConnection

__all__ = ["GATE_KEY", "STALL_TIMEOUT", "WriteGate"]

GATE_KEY = 0x7472616365677264  # "tracegrd": one advisory lock per catalog database, which is one lake
STALL_TIMEOUT = 60.0  # seconds a quiet session may hold the gate exclusive before PostgreSQL ends it
# set on PostgreSQL 14 and later; older releases lack the setting (and a stalled holder keeps the gate)
_BOUNDED = (
    "SELECT set_config('idle_session_timeout', %s, false) "
    "WHERE current_setting('idle_session_timeout', true) IS NOT NULL"
)

log = logging.getLogger("tracegrade.lake")


class WriteGate:
    """The gate of the lake whose catalog is at ``conninfo``, on a connection of its own; ``out_of_reach`` hears
    why the gate could not be entered (the catalog is away: the store must be reopened)."""

    def __init__(self, conninfo: str, out_of_reach: Callable[[str], None]) -> None:
        self._catalog = CatalogConnection(conninfo)
        self._out_of_reach = out_of_reach

    @contextmanager
    def shared(self) -> Iterator[None]:
        """Held around one write transaction: waits while a deletion holds the gate."""
        with self._held("pg_advisory_lock_shared", "pg_advisory_unlock_shared", "entering the lake's write gate"):
            yield

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        """Held around one deletion: waits for the writes in flight, holds back new ones; released by PostgreSQL
        if this process stops answering for ``STALL_TIMEOUT`` seconds."""
        with self._held("pg_advisory_lock", "pg_advisory_unlock", "closing the lake's write gate", STALL_TIMEOUT):
            keep_alive = _KeepAlive(self._catalog, STALL_TIMEOUT / 4)
            try:
                yield
            finally:
                keep_alive.stop()

    @contextmanager
    def _held(self, lock: str, unlock: str, doing: str, stall_timeout: float = 0) -> Iterator[None]:
        """The gate, taken with ``lock``; a ``stall_timeout`` bounds how long the session may stay quiet meanwhile
        (0: for ever)."""
        bound = f"{int(stall_timeout * 1000)}ms"
        try:
            with self._catalog.cursor(doing) as cursor:
                if stall_timeout:
                    cursor.execute(_BOUNDED, [bound])
                cursor.execute(f"SELECT {lock}(%s)", [GATE_KEY])
        except StoreError as exc:
            self._out_of_reach(str(exc))
            raise
        try:
            yield
        finally:
            try:
                with self._catalog.cursor(doing) as cursor:
                    cursor.execute(f"SELECT {unlock}(%s)", [GATE_KEY])
                    if stall_timeout:
                        cursor.execute(_BOUNDED, ["0"])  # the shared holds of writes may stay quiet for ever
            except StoreError:  # the transaction's outcome stands; ending the session releases what it held
                self._catalog.close()

    def close(self) -> None:
        self._catalog.close()


class _KeepAlive:
    """Keeps a gate's session busy every ``every`` seconds from a thread of its own, until stopped: a session
    that stays quiet is one whose process stopped."""

    def __init__(self, catalog: CatalogConnection, every: float) -> None:
        self._catalog = catalog
        self._every = every
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tracegrade-lake-gate", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stopped.wait(self._every):
            try:
                with self._catalog.cursor("keeping the lake's write gate") as cursor:
                    cursor.execute("SELECT 1")
            except StoreError as exc:
                log.warning("%s; the deletion holding the gate commits only if no write came in meanwhile", exc)
                return

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join()
