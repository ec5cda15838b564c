"""The files on a lake's data path that its catalog does not list: what a failed write left behind.

DuckLake names each file it writes with a UUID of its own, so a file is listed when any row of the catalog's file
tables (data files, delete files, files scheduled for deletion; of any snapshot) ends with its name.
"""

from __future__ import annotations

from pathlib import Path

import psycopg

from tracegrade.store.lake_location import catalog_conninfo

__all__ = ["unlisted_files"]

_FILE_TABLES = ("ducklake_data_file", "ducklake_delete_file", "ducklake_files_scheduled_for_deletion")


def unlisted_files(location: str, data: Path) -> list[str]:
    """The files under ``data`` (the lake's data path; relative, sorted, with their size) that the catalog of the
    lake at ``location`` lists nowhere."""
    with psycopg.connect(catalog_conninfo(location)) as con:
        listed = {Path(str(row[0])).name for table in _FILE_TABLES for row in con.execute(f"SELECT path FROM {table}")}
    return sorted(
        f"{path.relative_to(data)} ({path.stat().st_size} bytes)"
        for path in data.rglob("*")
        if path.is_file() and path.name not in listed
    )
