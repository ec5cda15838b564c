"""Rows that came as JSON (a server's ``POST /v1/query`` answer) as the Arrow table DuckDB gives for a file.

``tracegrade export`` and ``sql --format parquet`` write what ``query_arrow`` returns. On a file opened directly
that is DuckDB's own Arrow (``start_time`` a timestamp, ``flags`` an int32); through a server the values came as
JSON, where a timestamp is an ISO 8601 string and every integer is the same: left to Arrow's inference, the same
table exported through a server had string timestamps and int64 counts, and a reader of the Parquet files broke
on whichever it had not seen. The DuckDB type names the answer carries say what each column is.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pyarrow as pa

if TYPE_CHECKING:
    from tracegrade.store.results import QueryResult

__all__ = ["FROM_JSON_TEXT", "typed_arrow"]

# DuckDB's scalar types and the Arrow type DuckDB exports each as (``duckdb … .arrow()``)
_SCALARS: dict[str, pa.DataType] = {
    "BOOLEAN": pa.bool_(),
    "TINYINT": pa.int8(),
    "SMALLINT": pa.int16(),
    "INTEGER": pa.int32(),
    "BIGINT": pa.int64(),
    "UTINYINT": pa.uint8(),
    "USMALLINT": pa.uint16(),
    "UINTEGER": pa.uint32(),
    "UBIGINT": pa.uint64(),
    "FLOAT": pa.float32(),
    "DOUBLE": pa.float64(),
    "VARCHAR": pa.string(),
    "JSON": pa.string(),
    "BLOB": pa.binary(),
    "DATE": pa.date32(),
    "TIME": pa.time64("us"),
    "TIMESTAMP": pa.timestamp("us"),
    "TIMESTAMP_S": pa.timestamp("s"),
    "TIMESTAMP_MS": pa.timestamp("ms"),
    "TIMESTAMP_NS": pa.timestamp("ns"),
}
# how JSON carries a value of these types (ISO 8601 text), and how to read it back (``RemoteStore`` does too)
FROM_JSON_TEXT: dict[str, Callable[[str], Any]] = {
    "DATE": dt.date.fromisoformat,
    "TIME": dt.time.fromisoformat,
    "TIME WITH TIME ZONE": dt.time.fromisoformat,
    "TIMESTAMP": dt.datetime.fromisoformat,
    "TIMESTAMP_S": dt.datetime.fromisoformat,
    "TIMESTAMP_MS": dt.datetime.fromisoformat,
    "TIMESTAMP_NS": dt.datetime.fromisoformat,
    "TIMESTAMP WITH TIME ZONE": dt.datetime.fromisoformat,
}


def _typed_array(values: list[Any], kind: str) -> pa.Array | None:
    """``values`` of DuckDB type ``kind`` (a scalar, or a list of one) as DuckDB's Arrow type; None for other
    types (a STRUCT, a MAP, a DECIMAL …), or values that do not read as the type says."""
    element = kind.removesuffix("[]")
    arrow_type = _SCALARS.get(element)
    if arrow_type is None:
        return None
    parse = FROM_JSON_TEXT.get(element)

    def value(v: Any) -> Any:
        return parse(v) if parse is not None and isinstance(v, str) else v

    try:
        if element != kind:
            return pa.array([None if v is None else [value(x) for x in v] for v in values], pa.list_(arrow_type))
        return pa.array([value(v) for v in values], arrow_type)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
        return None


def typed_arrow(result: QueryResult) -> pa.Table:
    """``result``'s rows as an Arrow table of DuckDB's types; a column of a type not handled here (a STRUCT, a
    DECIMAL …) as ``QueryResult.to_arrow`` infers it."""
    types = result.types
    if types is None or len(types) != len(result.columns):
        return result.to_arrow()
    inferred: pa.Table | None = None
    arrays = []
    for index, kind in enumerate(types):
        array = _typed_array([row[index] for row in result.rows], kind)
        if array is None:
            inferred = inferred if inferred is not None else result.to_arrow()
            array = inferred.column(index)
        arrays.append(array)
    return pa.Table.from_arrays(arrays, names=list(result.columns))
