"""Lake maintenance: flush inlined rows, merge small Parquet files, expire old snapshots, delete old files.

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
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

import duckdb
import pyarrow.compute as pc

from tracegrade.store.database import quote_identifier
from tracegrade.store.rows import sql_string

__all__ = ["ORPHAN_GRACE", "MaintenanceResult", "live_data_files", "maintain_lake"]

ORPHAN_GRACE = timedelta(hours=1)  # far longer than any commit takes from its first written file


@dataclass(frozen=True)
class MaintenanceResult:
    """What one maintenance pass did."""

    files_before: int  # live data files (referenced by the current snapshot)
    files_after: int
    rows_flushed: int  # inlined rows written out to Parquet
    files_merged: int  # small (or mostly deleted) files replaced by rewritten ones
    snapshots_expired: int
    files_deleted: int  # old and orphaned files removed from the data path

    def summary(self) -> str:
        return (
            f"live data files {self.files_before} -> {self.files_after}; flushed {self.rows_flushed} inlined "
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
