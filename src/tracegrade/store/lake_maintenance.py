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
holds no lake back.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

import duckdb
import pyarrow.compute as pc

from tracegrade.errors import StoreLockedError
from tracegrade.store.catalog_connection import CatalogConnection
from tracegrade.store.database import quote_identifier
from tracegrade.store.rows import sql_string
from tracegrade.store.trace_deletion import Deleted

__all__ = [
    "MAINTENANCE_KEY",
    "ORPHAN_GRACE",
    "TRY_LATER",
    "MaintenanceResult",
    "live_data_files",
    "maintain_lake",
    "maintenance_lock",
]

ORPHAN_GRACE = timedelta(hours=1)  # far longer than any commit takes from its first written file
MAINTENANCE_KEY = 0x74726163656D6E74  # "tracemnt": one advisory lock per catalog database, which is one lake
TRY_LATER = "try again later"  # how the message of a pass that found the lock taken ends
_HOLDER_LABEL = "tracegrade maintain "  # the holder's application_name starts so: the rest is its pid and host
# the session holding the lock (PostgreSQL stores a bigint key as its high and low 32 bits, objsubid 1); who
# it is and when it connected, which PostgreSQL shows other roles' sessions only in part
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


def maintain_lake(
    con: duckdb.DuckDBPyConnection, catalog: str, *, keep: timedelta, purge_deleted: bool = False
) -> MaintenanceResult:
    """One maintenance pass over the lake attached as ``catalog`` (read-write); duckdb.Error if a step fails.
    With ``purge_deleted``, every file holding a deleted row is rewritten without it."""
    name = sql_string(catalog)

    def call(function: str, total: str | None = None) -> int:
        # CALL, not SELECT ... FROM: DuckLake commits these steps only when run as CALL; Arrow results
        # need no time-zone module for the snapshot times some of them return
        rows = con.execute(f"CALL {function}").fetch_arrow_table()
        return rows.num_rows if total is None else int(pc.sum(rows.column(total)).as_py() or 0)

    before = live_data_files(con, catalog)
    flushed = call(f"ducklake_flush_inlined_data({name})", "rows_flushed")
    merged = call(f"ducklake_merge_adjacent_files({name})", "files_processed")
    # trajectory tables are replaced row by row: files mostly deleted are rewritten without their dead rows
    threshold = ", delete_threshold => 0" if purge_deleted else ""  # 0: a file with any deleted row
    merged += call(f"ducklake_rewrite_data_files({name}{threshold})", "files_processed")
    expired = call(f"ducklake_expire_snapshots({name}, older_than => {_older_than(keep)})")
    deleted = call(f"ducklake_cleanup_old_files({name}, older_than => {_older_than(keep)})")
    deleted += call(f"ducklake_delete_orphaned_files({name}, older_than => {_older_than(max(keep, ORPHAN_GRACE))})")
    return MaintenanceResult(
        files_before=before,
        files_after=live_data_files(con, catalog),
        rows_flushed=flushed,
        files_merged=merged,
        snapshots_expired=expired,
        files_deleted=deleted,
    )


@contextmanager
def maintenance_lock(conninfo: str, lake: str) -> Iterator[None]:
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
                holder = cursor.execute(_HOLDER_SQL, [MAINTENANCE_KEY >> 32, MAINTENANCE_KEY & 0xFFFFFFFF]).fetchone()
        if not taken:
            raise StoreLockedError(
                f"another maintain is running on lake {lake}{_described(holder)}: one pass runs at a time, as two "
                f"would rewrite the same files; {TRY_LATER}"
            )
        yield
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
