"""ReadCursors: the per-read cursors of one store connection, ended so that a failed database cannot abort
the process.

DuckDB (1.5) invalidates a database whose checkpoint or write failed (a full disk, an I/O error). A cursor
whose open transaction had read that database then ends the whole process (a C++ ``terminate``, not a
Python error) when it is closed or garbage-collected, or when its connection is closed under it: the
implicit rollback of closing throws from a destructor. An explicit ``rollback()`` of the same transaction
raises a Python error instead and leaves nothing for closing to roll back. So every read cursor is ended
here, rollback first, and the store's connection is closed only once no read cursor is left.

A receiver met this when a query or a trajectory rebuild was reading while a checkpoint failed on a full
disk; a disk that stays full makes each reopen attempt fail the same way, so over a long outage it came
sooner or later.

A store may also replace its connection while it runs (``renew``: a lake's, whose DuckDB keeps memory per commit
until its database closes): cursors are spawned from the new one at once, reads already running finish on the old
one, which is closed when the last of them ended.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import duckdb

from tracegrade.errors import StoreError
from tracegrade.store.duckdb_api import discard_result

__all__ = ["ReadCursors", "end_cursor"]


def end_cursor(cursor: duckdb.DuckDBPyConnection) -> None:
    """Roll back the cursor's transaction, if any, then close it (see the module's docstring for why)."""
    try:
        discard_result(cursor)  # a capped read leaves rows unread, which would keep DuckDB 2 from rolling back
        cursor.rollback()
    except duckdb.Error:
        pass  # no transaction was open, or the database is invalidated: either way none is left to roll back
    cursor.close()


@dataclass
class _Replaced:
    """A source that ``renew`` replaced, closed (with ``release``) once the cursors spawned from it ended."""

    source: duckdb.DuckDBPyConnection
    release: Callable[[], None]
    reading: set[duckdb.DuckDBPyConnection] = field(default_factory=set)

    def close(self) -> None:
        self.source.close()
        self.release()


class ReadCursors:
    """Cursors spawned from ``source`` (a cursor of the store's connection that never runs a query itself),
    each running ``use`` (a USE statement, or None) first; ``close`` interrupts those still reading, waits
    for them to end and closes ``source``."""

    def __init__(self, source: duckdb.DuckDBPyConnection, use: str | None, describe: Callable[[], str]) -> None:
        self._source = source
        self._use = use
        self._describe = describe  # what the store is, for the error of a read after close
        self._active: set[duckdb.DuckDBPyConnection] = set()  # every cursor still reading, whatever its source
        self._replaced: list[_Replaced] = []  # sources ``renew`` replaced whose cursors are still reading
        self._cond = threading.Condition()
        self._closed = False

    def open(self, *, use: bool = True) -> duckdb.DuckDBPyConnection:
        """A new cursor (end it with ``end``); StoreError once the store is closing or when the USE fails."""
        with self._cond:
            if self._closed:
                raise StoreError(f"{self._describe()} is closed")
            cursor = self._source.cursor()
            self._active.add(cursor)
        if self._use and use:
            try:
                cursor.execute(self._use)
            except duckdb.Error as exc:  # a lake reads its catalog here: PostgreSQL may be out of reach
                self.end(cursor)
                raise StoreError(f"query failed: {str(exc).splitlines()[0]}") from None
        return cursor

    def end(self, cursor: duckdb.DuckDBPyConnection) -> None:
        """End a cursor ``open`` gave (its transaction rolled back first)."""
        try:
            end_cursor(cursor)
        finally:
            with self._cond:
                self._active.discard(cursor)
                for replaced in self._replaced:
                    replaced.reading.discard(cursor)
                drained = [replaced for replaced in self._replaced if not replaced.reading]
                self._replaced = [replaced for replaced in self._replaced if replaced.reading]
                self._cond.notify_all()
            for replaced in drained:  # outside the lock: closing a DuckDB connection can take a while
                replaced.close()

    def renew(self, source: duckdb.DuckDBPyConnection, release: Callable[[], None]) -> None:
        """Spawn cursors from ``source`` from now on. The old source is closed, then ``release`` (which closes
        its connection) called, once every cursor spawned from it ended: at once if none is reading, else by
        the read that ends last. No read is interrupted or waited for. Not after ``close``."""
        with self._cond:
            replaced = _Replaced(self._source, release, set(self._active) - self._still_replaced())
            self._source = source
            if replaced.reading:
                self._replaced.append(replaced)
        if not replaced.reading:
            replaced.close()

    def _still_replaced(self) -> set[duckdb.DuckDBPyConnection]:
        """The cursors of sources replaced earlier (call under the lock)."""
        return {cursor for replaced in self._replaced for cursor in replaced.reading}

    def close(self) -> None:
        """Refuse new cursors, interrupt the reads still running, wait until they ended, close the source."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            for cursor in list(self._active):
                try:
                    cursor.interrupt()
                except duckdb.Error:
                    pass  # between statements: its read ends by itself
            self._cond.wait_for(lambda: not self._active)  # each replaced source is closed by its last read
        self._source.close()
