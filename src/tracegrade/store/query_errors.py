"""What a query's DuckDB error tells whoever sent the query.

DuckDB's own errors (a binder error with the query's line and a caret, a conversion error) are the caller's
to read and are passed on whole. An INTERNAL error is DuckDB failing, not the query: its message carries a C++
stack trace naming the files DuckDB is installed in (seen on a lake with ``SELECT txid_current()``). The caller
gets its first line; the whole error is logged for the operator.
"""

from __future__ import annotations

import logging

import duckdb

__all__ = ["query_error_text"]

log = logging.getLogger(__name__)

_STACK_TRACE = "Stack Trace:"


def query_error_text(exc: duckdb.Error) -> str:
    """The text of a query's DuckDB error to show its caller (an internal failure's first line only)."""
    text = str(exc)
    if not isinstance(exc, duckdb.InternalException) and _STACK_TRACE not in text:
        return text
    log.error("DuckDB failed internally on a query: %s", text)
    first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    return f"{first} (a failure inside DuckDB, not in the query; the full error is in the log)"
