"""A lake's write gate: lets deletions (retention's expiry batches, forgetting) commit while receivers insert.

DuckLake checks conflicts per table: a transaction that deleted rows of a table fails to commit if any other
transaction inserted into that table since it began. Receivers insert into ``raw.spans`` every second or so,
so a deletion from the same tables would lose that race again and again. The gate is a PostgreSQL advisory
lock in the catalog's database: every lake write transaction holds it shared (taken before the transaction
begins, released after it ends), and a deletion holds it exclusive, so its transaction begins once every write
in flight on any machine has committed, and none begins until it has. Writers wait for the length of one
deletion. A process that dies releases what it held with its session.

Locks a session holds never conflict with each other, so within one process the gate does not order
writes: the store's write lock does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from tracegrade.errors import StoreError
from tracegrade.store.catalog_connection import CatalogConnection

__all__ = ["GATE_KEY", "WriteGate"]

GATE_KEY = 0x7472616365677264  # "tracegrd": one advisory lock per catalog database, which is one lake


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
        """Held around one deletion: waits for the writes in flight, holds back new ones."""
        with self._held("pg_advisory_lock", "pg_advisory_unlock", "closing the lake's write gate"):
            yield

    @contextmanager
    def _held(self, lock: str, unlock: str, doing: str) -> Iterator[None]:
        try:
            with self._catalog.cursor(doing) as cursor:
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
            except StoreError:  # the transaction's outcome stands; ending the session releases what it held
                self._catalog.close()

    def close(self) -> None:
        self._catalog.close()
