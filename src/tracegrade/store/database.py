"""Opening a DuckDB store file, with DuckDB's IO errors turned into clear tracegrade errors."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from tracegrade.errors import StoreError, StoreLockedError, StoreMissingError
from tracegrade.store.duckdb_api import NEW_FILES, registered
from tracegrade.store.journal import journal_directory
from tracegrade.store.rows import sql_string
from tracegrade.store.store_option import store_option

__all__ = [
    "attach_duckdb",
    "damage_error",
    "duckdb_size_bytes",
    "insert_arrow",
    "lock_holder_pid",
    "locked_error",
    "open_duckdb",
    "opening_errors",
    "quote_identifier",
    "store_not_found",
    "without_progress_bar",
]

_DUCKDB_SIZE = re.compile(r"^\s*(\d+(\.\d+)?)\s*(B|KB|MB|GB|TB|KiB|MiB|GiB|TiB)\s*$", re.IGNORECASE)
_LOCK_PID = re.compile(r"Conflicting lock is held in .*?\(PID (\d+)\)", re.S)
# DuckDB's words for a store file whose blocks fail their checksums or end before the file says they do
_DAMAGE_SIGNS = ("corrupt database file", "could not read enough bytes")


def duckdb_size_bytes(value: str) -> int:
    """``"128MB"`` (DuckDB's units: KB/MB/GB are powers of 1000, KiB/MiB/GiB of 1024) -> bytes."""
    match = _DUCKDB_SIZE.match(value)
    if not match:
        raise ValueError(f"{value!r} is not a DuckDB memory size; write e.g. 256MB, 1GB or 512MiB")
    number, unit = float(match.group(1)), match.group(3).upper()
    return int(number * (1024 if "I" in unit else 1000) ** "BKMGT".index(unit[0]))


def lock_holder_pid(message: str) -> int | None:
    """The pid DuckDB names in a "Could not set lock on file" error, if any."""
    match = _LOCK_PID.search(message)
    return int(match.group(1)) if match else None


def store_not_found(path: Path) -> StoreMissingError:
    return StoreMissingError(
        f"store not found: {path} (create one with `tracegrade serve --store {path}` or `tracegrade import`)"
    )


def locked_error(path: Path, pid: int | None) -> StoreLockedError:
    holder = f"pid {pid}" if pid is not None else "unknown pid"
    return StoreLockedError(
        f"store {path} is held by another process ({holder}); start `tracegrade serve --store {path}` "
        "or stop that process"
    )


def open_duckdb(path: Path, *, read_only: bool, config: dict[str, Any] | None = None) -> duckdb.DuckDBPyConnection:
    """Connect to the store file; a lock, a corrupt file or a missing read-only store is a StoreError."""
    if read_only and not path.exists():
        raise store_not_found(path)
    _refuse_directory(path)
    with opening_errors(path):
        con = duckdb.connect(str(path), read_only=read_only, config={**NEW_FILES, **(config or {})})
    without_progress_bar(con)
    return con


def without_progress_bar(con: duckdb.DuckDBPyConnection) -> None:
    """Keep DuckDB from drawing its progress bar, which it does on standard output for any query past two seconds
    by default: in a receiver's log, or in the middle of what `tracegrade sql` or `export` writes there. A
    connection's cursors take the setting from it (it cannot be set for the whole database)."""
    con.execute("SET enable_progress_bar = false")


# A checkpoint frees the in-memory row groups it wrote in one go. By default DuckDB's allocator keeps
# such bulk frees (up to 512 MiB) for reuse; a read-write store hands every bulk free over this size back
# to the system at once, which lowers the receiver's peak at about the same CPU time (bench/RESULTS.md,
# bench_ingest).
BULK_FREE_FLUSH = "1MB"

# What a read-write store asks of ATTACH, most wanted first; older DuckDB releases know fewer options.
ATTACH_OPTION_SETS: tuple[tuple[str, ...], ...] = (
    ("RECOVERY_MODE no_wal_writes", "ROW_GROUP_SIZE {row_group_size}"),
    ("ROW_GROUP_SIZE {row_group_size}",),
    (),
)


def attach_duckdb(
    path: Path, alias: str, *, wal: bool, row_group_size: int, config: dict[str, Any] | None = None
) -> tuple[duckdb.DuckDBPyConnection, bool]:
    """Open the store file read-write as database ``alias`` of an in-memory connection (``USE``d).

    ATTACH is the only way to pass per-database options: ``ROW_GROUP_SIZE`` and, when ``wal`` is
    False, ``RECOVERY_MODE no_wal_writes`` (commits then stay in memory until a CHECKPOINT writes them
    to the file). Returns the connection and whether DuckDB's WAL is in use: True when asked for, or
    when this DuckDB release cannot turn it off. Cursors of the connection must ``USE`` ``alias`` too.
    """
    _refuse_directory(path)
    settings = {"temp_directory": f"{path}.tmp", **NEW_FILES, **(config or {})}
    with opening_errors(path):
        con = duckdb.connect(":memory:", config=settings)
    without_progress_bar(con)
    _return_bulk_frees(con)
    for options in ATTACH_OPTION_SETS:
        if wal and any(option.startswith("RECOVERY_MODE") for option in options):
            continue
        listed = ", ".join(option.format(row_group_size=row_group_size) for option in options)
        statement = f"ATTACH {sql_string(str(path))} AS {quote_identifier(alias)}" + (f" ({listed})" if listed else "")
        try:
            with opening_errors(path):
                con.execute(statement)
        except StoreError as exc:
            if "unrecognized" in str(exc).lower() and options:
                continue  # this DuckDB does not know one of the options (or its value): try with fewer
            con.close()
            raise
        con.execute(f"USE {quote_identifier(alias)}")
        return con, not any(option.startswith("RECOVERY_MODE") for option in options)
    raise AssertionError("unreachable")  # the last option set is empty


def _return_bulk_frees(con: duckdb.DuckDBPyConnection) -> None:
    """Have DuckDB's allocator return bulk frees over ``BULK_FREE_FLUSH`` to the system (DuckDB 1.2+)."""
    try:
        con.execute(f"SET allocator_bulk_deallocation_flush_threshold = '{BULK_FREE_FLUSH}'")
    except duckdb.Error:
        pass  # an older DuckDB has no such setting and keeps its own policy


def quote_identifier(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _refuse_directory(path: Path) -> None:
    if path.is_dir():
        raise StoreError(f"store path {path} is a directory; give a file name such as {path / 'tracegrade.duckdb'}")


@contextmanager
def opening_errors(path: Path) -> Iterator[None]:
    """Turn DuckDB's errors while opening ``path`` (connecting, and readying its schema) into StoreErrors that
    say what to do."""
    try:
        yield
    except duckdb.IOException as exc:
        message = str(exc)
        lowered = message.lower()
        if "could not set lock" in lowered or "conflicting lock" in lowered:
            raise locked_error(path, lock_holder_pid(message)) from None
        if "not a valid DuckDB database file" in message:
            raise StoreError(
                f"store {path} is not a valid DuckDB database (corrupt, truncated or another kind of file); "
                f"move it aside and recreate the store, or point {store_option()} at the right file"
            ) from None
        damaged = damage_error(path, exc)
        if damaged is not None:
            raise damaged from None
        if "database does not exist" in message:
            raise store_not_found(path) from None
        raise StoreError(f"cannot open store {path}: {message}") from None
    except duckdb.Error as exc:
        raise damage_error(path, exc) or StoreError(f"cannot open store {path}: {exc}") from None


def damage_error(path: Path, exc: duckdb.Error) -> StoreError | None:
    """The StoreError saying the store file is damaged, when ``exc`` says a block of it failed its checksum or
    lay past its end; else None. DuckDB 1.x meets the damage when it opens the file, DuckDB 2 when a read or a
    write first touches the damaged block."""
    message = str(exc)
    if not any(sign in message.lower() for sign in _DAMAGE_SIGNS):
        return None
    return StoreError(
        f"store {path} is damaged ({message}); move it aside (keep it for recovery or inspection) and "
        f"start again with a new store at that path: the requests still in {journal_directory(path)} "
        "are replayed into it, but what the damaged file already held is not (keep the file to recover "
        "what DuckDB can still read from it)"
    )


def insert_arrow(
    con: duckdb.DuckDBPyConnection,
    table: str,
    batch: pa.Table,
    *,
    skip_existing_returning: str | None = None,
    replace: bool = False,
) -> list[tuple[Any, ...]]:
    """Bulk-insert an Arrow table into ``table`` (matching columns by name).

    With ``skip_existing_returning`` set (a column list), rows whose key already exists are skipped
    (ON CONFLICT DO NOTHING) and those columns of each row actually inserted are returned. With
    ``replace``, they overwrite the rows with their key instead (INSERT OR REPLACE).
    """
    view = f"_tracegrade_{table}_batch"
    columns = ", ".join(batch.column_names)
    sql = f"INSERT {'OR REPLACE ' if replace else ''}INTO {table} ({columns}) SELECT {columns} FROM {view}"
    if skip_existing_returning:
        sql += f" ON CONFLICT DO NOTHING RETURNING {skip_existing_returning}"
    with registered(con, view, batch):
        cursor = con.execute(sql)
        return cursor.fetchall() if skip_existing_returning else []
