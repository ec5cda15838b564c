"""Lake maintenance: finish interrupted forgets, flush inlined rows, merge small Parquet files, expire old
snapshots, delete old files.

Every receiver commit writes its own Parquet file (or, for a few rows, inlines them in the catalog), so a
lake fed for a day holds thousands of small files and queries slow down. Each step below is one DuckLake
commit, retried like any other when it races a receiver's commit, so maintenance runs while receivers
write. Readers are kept safe by ``keep``: a snapshot is expired only once it is older than ``keep``, and the
files it alone referenced are deleted only ``keep`` after that, so any query shorter than ``keep`` still
finds every file of the snapshot it started on. Files no snapshot ever referenced (a writer killed
between writing Parquet and committing) are deleted only when at least ``ORPHAN_GRACE`` old, never while a
live writer may still be about to commit them.

A deleted row (an expired or forgotten trace's) leaves the lake's tables at once, yet DuckLake only marks it
deleted: its bytes stay in the Parquet file that holds it, beside the rows that stay, until that file is
rewritten, and a file is rewritten only once most of it is deleted. ``purge_deleted`` rewrites every file that
holds a deleted row; the files it replaces are deleted ``keep`` later, like any other, and then no file holds
those rows.

A forget that died between its two commits (the traces listed as forgotten in the catalog's database, their rows
not yet deleted from the lake: ``lake_forgotten``) is finished first, by the store (``LakeStore.maintain``): the
files rewritten next then no longer hold those rows, and with ``purge_deleted`` none does once ``keep`` is past.

One pass runs at a time on a lake: two would rewrite and expire the same files, and one of them fail with
DuckLake's serialisation error. A pass holds ``MAINTENANCE_KEY``, a PostgreSQL advisory lock in the catalog's
database, on a session of its own (``maintenance_lock``); another pass finds it taken and stops at once with a
StoreLockedError naming the holder. Ending the session releases the lock, so a process that dies mid-pass
holds no lake back. PostgreSQL may end that session under a live pass too (``pg_terminate_backend``, a restart):
the lock goes with it and another pass may start, so before each step the pass asks the session whether it still
holds the lock (``MaintenanceLock.confirm``), and stops with a StoreError if not.

A step's catalog transaction can also lose to another commit in PostgreSQL itself rather than in DuckLake's
conflict check: a forget that marks inlined rows deleted while the flush deletes them fails the flush with
PostgreSQL's serialisation error. Such a step is tried again, after a short pause, up to ``STEP_ATTEMPTS`` times;
a failed CALL left no transaction open (autocommit rolled it back), and the Parquet files a failed attempt wrote
are orphans, deleted by a later pass's last step.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

import duckdb
import pyarrow.compute as pc

from tracegrade.errors import StoreError, StoreLockedError
from tracegrade.store.catalog_connection import CatalogConnection
from tracegrade.store.database import quote_identifier
from tracegrade.store.duckdb_api import fetch_arrow
from tracegrade.store.lake_location import redacted
from tracegrade.store.rows import sql_string
from tracegrade.store.trace_deletion import Deleted

__all__ = [
    "MAINTENANCE_KEY",
    "ORPHAN_GRACE",
    "STEP_ATTEMPTS",
    "TRY_LATER",
    "MaintenanceLock",
    "MaintenanceResult",
    "live_data_files",
    "maintain_lake",
    "maintenance_lock",
]

log = logging.getLogger("tracegrade.lake")

ORPHAN_GRACE = timedelta(hours=1)  # far longer than any commit takes from its first written file
MAINTENANCE_KEY = 0x74726163656D6E74  # "tracemnt": one advisory lock per catalog database, which is one lake
TRY_LATER = "try again later"  # how the message of a pass that found the lock taken ends
_HOLDER_LABEL = "tracegrade maintain "  # the holder's application_name starts so: the rest is its pid and host
# PostgreSQL stores a bigint advisory key as its high and low 32 bits (classid, objid), with objsubid 1
_KEY_PARTS = [MAINTENANCE_KEY >> 32, MAINTENANCE_KEY & 0xFFFFFFFF]
STEP_ATTEMPTS = 5  # a step that loses this many races in a row fails the pass (the next pass tries again)
_FIRST_PAUSE = 0.1  # seconds before a step's second attempt, doubled before each later one
# PostgreSQL's serialisation failure (40001) and deadlock (40P01), as DuckDB passes them on in its message
_POSTGRES_CONFLICTS = ("could not serialize access", "deadlock detected")
# whether this session holds the lock: one that PostgreSQL ended, and the connection made again, holds none
_STILL_HELD_SQL = (
    "SELECT EXISTS (SELECT FROM pg_locks WHERE locktype = 'advisory' AND granted AND pid = pg_backend_pid() "
    "AND objsubid = 1 AND classid::bigint = %s AND objid::bigint = %s)"
)
# the session holding the lock: who it is and when it connected, which PostgreSQL shows other roles' sessions
# only in part
_HOLDER_SQL = (
    "SELECT l.pid, a.application_name, a.backend_start FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid "
    "WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 AND l.classid::bigint = %s "
    "AND l.objid::bigint = %s AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())"
)


@dataclass(frozen=True)
class MaintenanceResult:
    """What one maintenance pass did."""

    files_before: int  # live data files (referenced by the current snapshot)
    files_after: int
    rows_flushed: int  # inlined rows written out to Parquet
    files_merged: int  # small (or mostly deleted) files replaced by rewritten ones
    snapshots_expired: int
    files_deleted: int  # old and orphaned files removed from the data path
    # what was left of the traces of forgets that died before their deletions committed, deleted by this pass
    forgets_finished: Deleted = field(default_factory=Deleted)

    def summary(self) -> str:
        done = self.forgets_finished
        return (
            f"finished interrupted forgets of {done.traces} trace(s) ({done.spans} span(s), {done.logs} log "
            f"record(s), {done.trajectory_rows} trajectory row(s)); live data files {self.files_before} -> "
            f"{self.files_after}; flushed {self.rows_flushed} inlined "
            f"row(s); merged {self.files_merged} file(s); expired {self.snapshots_expired} snapshot(s); "
            f"deleted {self.files_deleted} unreferenced file(s)"
        )


def live_data_files(con: duckdb.DuckDBPyConnection, catalog: str) -> int:
    """How many data files the lake's current snapshot references (read from its catalog)."""
    metadata = quote_identifier(f"__ducklake_metadata_{catalog}")
    row = con.execute(f"SELECT count(*) FROM {metadata}.ducklake_data_file WHERE end_snapshot IS NULL").fetchone()
    return int(row[0])  # type: ignore[index]


def _older_than(age: timedelta) -> str:
    return f"now() - to_microseconds({int(age.total_seconds() * 1_000_000)})"


class MaintenanceLock:
    """The lake's maintenance lock, held by one pass on a session of its own (``maintenance_lock``)."""

    def __init__(self, catalog: CatalogConnection) -> None:
        self._catalog = catalog

    def confirm(self, doing: str) -> None:
        """Return if the lock's session still holds it; else StoreError: PostgreSQL ended that session (terminated
        it, or restarted), the lock went with it and another pass may have started, so this one stops before
        ``doing``. A session out of reach counts as gone: nothing vouches for its lock."""
        try:
            with self._catalog.cursor("checking the lake's maintenance lock") as cursor:
                (held,) = cursor.execute(_STILL_HELD_SQL, _KEY_PARTS).fetchone() or (False,)
            why = "its session no longer holds it"
        except StoreError as exc:  # the connection's own reason, without the catalog's address
            held = False
            why = f"its session is gone: {str(exc.__context__ or exc).strip().splitlines()[0]}"
        if not held:
            raise StoreError(
                f"lost the lake's maintenance lock before {doing} ({why}); another pass may be running, so this pass "
                "stopped there, keeping the steps it finished"
            )


def maintain_lake(
    con: duckdb.DuckDBPyConnection,
    catalog: str,
    lock: MaintenanceLock,
    *,
    keep: timedelta,
    purge_deleted: bool = False,
) -> MaintenanceResult:
    """One maintenance pass over the lake attached as ``catalog`` (read-write), while holding ``lock``; duckdb.Error
    if a step fails, StoreError if the lock was lost or a step kept losing races with other commits. With
    ``purge_deleted``, every file holding a deleted row is rewritten without it."""

    def step(doing: str, function: str, options: str = "", total: str | None = None) -> int:
        return _step(con, lock, doing, function, f"{sql_string(catalog)}{options}", total)

    before = live_data_files(con, catalog)
    flushed = step("flushing inlined rows", "ducklake_flush_inlined_data", total="rows_flushed")
    merged = step("merging adjacent files", "ducklake_merge_adjacent_files", total="files_processed")
    # trajectory tables are replaced row by row: files mostly deleted are rewritten without their dead rows
    threshold = ", delete_threshold => 0" if purge_deleted else ""  # 0: a file with any deleted row
    merged += step("rewriting files of deleted rows", "ducklake_rewrite_data_files", threshold, "files_processed")
    older = f", older_than => {_older_than(keep)}"
    expired = step("expiring snapshots", "ducklake_expire_snapshots", older)
    deleted = step("deleting old files", "ducklake_cleanup_old_files", older)
    orphans = f", older_than => {_older_than(max(keep, ORPHAN_GRACE))}"
    deleted += step("deleting orphaned files", "ducklake_delete_orphaned_files", orphans)
    return MaintenanceResult(
        files_before=before,
        files_after=live_data_files(con, catalog),
        rows_flushed=flushed,
        files_merged=merged,
        snapshots_expired=expired,
        files_deleted=deleted,
    )


def _step(
    con: duckdb.DuckDBPyConnection, lock: MaintenanceLock, doing: str, function: str, arguments: str, total: str | None
) -> int:
    """One step: ``CALL function(arguments)``, tried again while it loses races (``_lost_race``); the sum of its
    result's ``total`` column, or its rows when None."""
    attempt = 1
    while True:
        lock.confirm(doing)
        try:
            # CALL, not SELECT ... FROM: DuckLake commits these steps only when run as CALL; Arrow results
            # need no time-zone module for the snapshot times some of them return
            rows = fetch_arrow(con, f"CALL {function}({arguments})")
            return rows.num_rows if total is None else int(pc.sum(rows.column(total)).as_py() or 0)
        except duckdb.Error as exc:
            if not _lost_race(exc):
                raise
            why = redacted(str(exc).splitlines()[0])
            if attempt == STEP_ATTEMPTS:
                raise StoreError(
                    f"{doing} ({function}) lost its race with other commits {STEP_ATTEMPTS} times in a row: {why}"
                ) from None
            log.warning("%s lost a race with another commit, trying again: %s", doing, why)
        time.sleep(_FIRST_PAUSE * 2 ** (attempt - 1))
        attempt += 1


def _lost_race(exc: duckdb.Error) -> bool:
    """Whether a step failed for another commit's sake (DuckLake's conflict, after its own retries, or PostgreSQL's
    serialisation failure or deadlock in the catalog), so that it may pass when tried again."""
    return isinstance(exc, duckdb.TransactionException) or any(text in str(exc) for text in _POSTGRES_CONFLICTS)


@contextmanager
def maintenance_lock(conninfo: str, lake: str) -> Iterator[MaintenanceLock]:
    """Held around one maintenance pass of the lake whose catalog is at ``conninfo`` (``lake`` names it in
    messages), on a session of its own that the block's end closes. StoreLockedError at once, naming the holder
    as far as PostgreSQL shows it, while another pass holds it; StoreError when the catalog is out of reach."""
    catalog = CatalogConnection(conninfo)
    try:
        with catalog.cursor("taking the lake's maintenance lock") as cursor:
            (taken,) = cursor.execute("SELECT pg_try_advisory_lock(%s)", [MAINTENANCE_KEY]).fetchone() or (False,)
            if taken:  # who holds it, for the message of the pass that finds it taken
                label = f"{_HOLDER_LABEL}pid {os.getpid()} on {socket.gethostname()}"[:63]  # PostgreSQL's limit
                cursor.execute("SELECT set_config('application_name', %s, false)", [label])
            else:
                holder = cursor.execute(_HOLDER_SQL, _KEY_PARTS).fetchone()
        if not taken:
            raise StoreLockedError(
                f"another maintain is running on lake {lake}{_described(holder)}: one pass runs at a time, as two "
                f"would rewrite the same files; {TRY_LATER}"
            )
        yield MaintenanceLock(catalog)
    finally:
        catalog.close()  # ends the session, which releases the lock


def _described(holder: tuple[Any, ...] | None) -> str:
    """`` (pid 123 on host, started …)``: the holder of the maintenance lock, as far as it is known."""
    if holder is None:  # released since: the next try takes it
        return ""
    backend_pid, application, started = holder
    if isinstance(application, str) and application.startswith(_HOLDER_LABEL):
        parts = [application.removeprefix(_HOLDER_LABEL)]
    else:  # not a maintain pass (someone took the lock by hand), or a session PostgreSQL shows us little of
        parts = [f"PostgreSQL backend pid {backend_pid}" + (f", application {application!r}" if application else "")]
    if isinstance(started, datetime):
        parts.append(f"started {started.astimezone(timezone.utc):%Y-%m-%d %H:%M:%S} UTC")
    return f" ({', '.join(parts)})"
