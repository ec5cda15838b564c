"""The Parquet file a failed DuckLake write leaves behind, removed where the write fails.

DuckLake writes each file of a transaction (a data file of an insert, a delete file of a delete or a replacement)
under a name of its own, ``ducklake-<UUIDv7>.parquet`` or ``ducklake-<UUIDv7>-delete.parquet``: a millisecond
clock and 74 random bits, so no other process, and no other write of this one, ever writes that name. It records a
file in its transaction, and the catalog lists it, only once the file is written. A write that fails (a full disk:
``Could not write file "…": No space left on device``) leaves the file it had opened, empty or cut short, that the
rollback does not remove (it removes the files the transaction recorded) and that no snapshot lists: without this,
it stays on the data path until maintenance's orphan pass, at least ``ORPHAN_GRACE`` later, deletes it.
"""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path

__all__ = ["remove_failed_write"]

# DuckDB's message for a write the file system refused, naming the file
_FAILED_WRITE = re.compile(r'Could not write file "(?P<path>[^"]+)": ')
_DUCKLAKE_FILE = re.compile(r"ducklake-[0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12}(?:-delete)?\.parquet")


def remove_failed_write(message: str, data_path: str) -> Path | None:
    """Remove the file a DuckLake write failed to write, when ``message`` (a DuckDB I/O error's) names one of
    DuckLake's own files under ``data_path``; the file removed, or None (no such file named, or already gone)."""
    found = _FAILED_WRITE.search(message)
    if found is None:
        return None
    path = Path(os.path.normpath(found.group("path")))
    if not (path.is_relative_to(Path(data_path)) and _DUCKLAKE_FILE.fullmatch(path.name)):
        return None  # not a lake file (a spill file, say): someone else's to look after
    with contextlib.suppress(OSError):  # gone already, or not removable: then the orphan pass deletes it
        path.unlink()
        return path
    return None
