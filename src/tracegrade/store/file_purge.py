"""Purging a DuckDB store file of the rows deleted from it (forgotten or expired traces), byte for byte.

DuckDB marks a deleted row deleted and keeps its bytes in the file, checkpoints included (its storage still
counts the row: ``tests/test_file_purge.py``), so a forgotten trace can still be read from the file's bytes. A
purge copies the live rows of every table, with the schema, keys and indexes, into a new file (``COPY FROM
DATABASE``), makes it durable, and renames it over the old file, whose bytes go with it.

No other process may write to the file meanwhile: the purge first opens it as a store (which a file held by a
server refuses, naming the server) and then holds it open read-only while it copies and renames, which keeps any
writer out.

A receiver that purges its own file and is told to stop interrupts the purge (``PurgeInterrupt``): the copy is
removed and the old file stays as it was, so that the receiver stops within its grace however large the file.

A purge killed before its rename leaves its copy (``<store>.purging`` and its WAL), as large as the live rows.
Whoever opens the store file for writing next removes it (``remove_stale_copy``): a purge holds the file attached
from before it creates its copy until the copy is renamed or removed, so a writer that got the file's lock knows
none is running.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
from dataclasses import dataclass
from pathlib import Path

import duckdb

from tracegrade.errors import StoreError
from tracegrade.store.duckdb_api import NEW_FILES
from tracegrade.store.journal import fsync_directory
from tracegrade.store.rows import sql_string

__all__ = ["PurgeInterrupt", "Purged", "purge_deleted_rows", "remove_stale_copy"]

_SOURCE, _TARGET = "purge_source", "purge_target"

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Purged:
    """A purge's outcome: the file's size before and after."""

    bytes_before: int
    bytes_after: int

    def summary(self) -> str:
        return f"purged the deleted rows: the file went from {self.bytes_before:,} to {self.bytes_after:,} bytes"


class PurgeInterrupt:
    """Lets another thread abandon a purge under way (``interrupt``): it stops copying and leaves the old file."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._copying: duckdb.DuckDBPyConnection | None = None
        self.requested = False

    def interrupt(self) -> None:
        with self._lock:
            self.requested = True
            if self._copying is not None:
                self._copying.interrupt()

    def going_on(self, copying: duckdb.DuckDBPyConnection | None) -> None:
        """Raise StoreError when interrupted; else ``copying`` is what an interrupt stops from now on (None:
        nothing, the copy is whole)."""
        with self._lock:
            if self.requested:
                raise StoreError("interrupted")
            self._copying = copying

    def closing(self) -> None:
        """The purge closes its connection: an interrupt from now on has nothing to stop (DuckDB raises on a
        closed connection's interrupt, which would fail the stop that sent it)."""
        with self._lock:
            self._copying = None


def purge_deleted_rows(path: Path, interrupt: PurgeInterrupt | None = None) -> Purged:
    """Rewrite the store file ``path`` with its live rows only; StoreError (StoreLockedError when another process
    holds it) if it cannot, or once ``interrupt`` was interrupted (before the rename: the old file stays)."""
    from tracegrade.store.database import store_not_found
    from tracegrade.store.trace_store import TraceStore

    if not path.exists():
        raise store_not_found(path)
    path = path.resolve()  # a link to the store: the file it names is the one replaced
    # a store at the current schema version, its WAL checkpointed, a copy left by a killed purge removed; a held
    # file refuses
    TraceStore(path).close()
    copy = purge_copy(path)
    before = path.stat().st_size
    interrupt = interrupt or PurgeInterrupt()
    con = duckdb.connect(config=dict(NEW_FILES))
    try:
        try:
            interrupt.going_on(con)
            con.execute(f"ATTACH {sql_string(str(path))} AS {_SOURCE} (READ_ONLY)")
            con.execute(f"ATTACH {sql_string(str(copy))} AS {_TARGET}")
            con.execute(f"COPY FROM DATABASE {_SOURCE} TO {_TARGET}")
            con.execute(f"DETACH {_TARGET}")  # checkpointed: the copy is whole, with no WAL beside it
            shutil.copymode(path, copy)  # a file kept private stays private
            with open(copy, "rb") as written:
                os.fsync(written.fileno())
            interrupt.going_on(None)  # from here the rename goes through
            os.replace(copy, path)  # while the old file is still attached: no writer got in between
            fsync_directory(path.parent)
        finally:
            interrupt.closing()
            con.close()  # before the copy is removed: a copy still attached could be written to again
    except (duckdb.Error, OSError, StoreError) as exc:
        _remove_copy(copy)
        if interrupt.requested:
            raise StoreError(f"purging {path} of its deleted rows was interrupted; the file is as it was") from None
        raise StoreError(f"purging {path} of its deleted rows failed: {str(exc).splitlines()[0]}") from None
    return Purged(before, path.stat().st_size)


def purge_copy(path: Path) -> Path:
    """Where a purge of the store file ``path`` (resolved: a link's target is what is purged) writes its copy."""
    return path.with_name(path.name + ".purging")


def remove_stale_copy(path: Path) -> None:
    """Remove the copy a killed purge of the store file ``path`` left (and its WAL), if any; call it only while
    ``path`` is open for writing (its lock keeps every purge out, so a copy there is no running purge's). A copy
    that cannot be removed is logged: the store opens all the same, and the next purge removes it."""
    copy = purge_copy(path.resolve())
    try:
        size = sum(left.stat().st_size for left in _copy_files(copy) if left.exists())
        if not _remove_copy(copy):
            return
    except OSError as exc:
        log.warning("cannot remove %s, the copy a purge of the store file left when it died: %s", copy, exc)
        return
    log.warning("removed %s (%s bytes), the copy a purge of the store file left when it died", copy, f"{size:,}")


def _copy_files(copy: Path) -> tuple[Path, Path]:
    """The files of a purge's copy: the database, and the WAL DuckDB writes the copied rows to first."""
    return copy, copy.with_name(copy.name + ".wal")


def _remove_copy(copy: Path) -> bool:
    """Remove the files of a purge's copy; whether there were any."""
    removed = False
    for left in _copy_files(copy):
        try:
            left.unlink()
            removed = True
        except FileNotFoundError:
            pass
    return removed
