"""The few DuckDB Python calls that differ between DuckDB 1.x and 2.x, behind one spelling for both.

DuckDB 2 streams the result of ``execute()``: a result not read to its end keeps the connection, and any other
call on it (``sql()``, ``register()``, ``rollback()``) raises ResourceInUseException until ``complete()`` or
``abort()``; its Arrow export of such a result copies the rows (``con.sql(query).to_arrow_table()`` does not).
DuckDB 1.x reads every result whole and has neither call. DuckDB 2 also refuses to unregister a view in a
transaction a failed statement aborted (its rollback drops the view), and writes new database files in a
storage format DuckDB 1.x cannot read, unless told otherwise (``NEW_FILES``). Which one is installed is told by
the feature, once.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import duckdb
import pyarrow as pa

__all__ = ["ARROW_BATCH_ROWS", "NEW_FILES", "discard_result", "fetch_arrow", "fetch_one", "registered"]

# Rows per Arrow record batch of a result. DuckDB sizes every column's buffers for a full batch before
# filling it: at its default of 1,000,000 rows, reading a rebuild's traces back reserved far more memory
# than it used (bench/RESULTS.md, store writes).
ARROW_BATCH_ROWS = 8_192

Params = Sequence[Any] | Mapping[str, Any] | None

# DuckDB 2.x: an unread result holds its connection (see the module's docstring)
_STREAMING_RESULTS = hasattr(duckdb.DuckDBPyConnection, "complete")

# The settings of a connection that may create a database file (a store, a purged copy, the judge cache): on 2.x,
# the storage format 1.x writes by default, so that a file stays readable by every duckdb tracegrade runs on (the
# lake extra pins 1.5.5: a file store made under 2.x would otherwise be unreadable once it is installed)
NEW_FILES: dict[str, Any] = {"storage_compatibility_version": "v0.10.2"} if _STREAMING_RESULTS else {}


def fetch_one(con: duckdb.DuckDBPyConnection, sql: str, params: Params = None) -> tuple[Any, ...] | None:
    """The first row ``sql`` returns (None when none), the statement run to its end (a DELETE's count, a
    ``SELECT count(*)``), leaving ``con`` free for the next call."""
    row = con.execute(sql, params).fetchone()
    if _STREAMING_RESULTS:
        con.complete()  # type: ignore[attr-defined]
    return row


def discard_result(con: duckdb.DuckDBPyConnection) -> None:
    """Drop what is left of ``con``'s last result unread (a capped read), so that ``con`` can roll back or
    close; a statement that could write fails its transaction, which the caller rolls back."""
    if _STREAMING_RESULTS:
        con.abort()  # type: ignore[attr-defined]


@contextmanager
def registered(con: duckdb.DuckDBPyConnection, name: str, table: pa.Table) -> Iterator[None]:
    """``table`` readable as the view ``name`` on ``con`` inside the block, unregistered after it."""
    con.register(name, table)
    try:
        yield
    except BaseException:
        try:
            con.unregister(name)
        except duckdb.TransactionException:
            pass  # DuckDB 2, a transaction the failure aborted: its rollback drops the view; the failure says why
        raise
    con.unregister(name)


if _STREAMING_RESULTS:

    def fetch_arrow(con: duckdb.DuckDBPyConnection, sql: str, params: Params = None) -> pa.Table:
        """What ``sql`` (one statement) returns, as an Arrow table in record batches of ``ARROW_BATCH_ROWS``
        (DuckDB reserves a whole batch's buffers up front)."""
        table: pa.Table = con.sql(sql, params=params).to_arrow_table(ARROW_BATCH_ROWS)
        return table

else:

    def fetch_arrow(con: duckdb.DuckDBPyConnection, sql: str, params: Params = None) -> pa.Table:
        """What ``sql`` (one statement) returns, as an Arrow table in record batches of ``ARROW_BATCH_ROWS``
        (DuckDB reserves a whole batch's buffers up front)."""
        return con.execute(sql, params).fetch_arrow_table(ARROW_BATCH_ROWS)
