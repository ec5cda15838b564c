"""Plain result types of the store: what a write did and what a query returned."""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import math
import uuid
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pydantic import BaseModel

from tracegrade.errors import StoreError

__all__ = [
    "NON_FINITE",
    "CommitConflict",
    "QueryResult",
    "WriteResult",
    "decimal_json",
    "interval_text",
    "json_safe",
    "non_finite_text",
]

# How a NaN or an infinity is written in JSON, which has no number for them: as JavaScript and Python print them,
# in a string (a bare NaN would make the document invalid JSON; null would say the value is missing).
NON_FINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


class CommitConflict(StoreError):
    """A commit lost a race with another writer of the same store (after the store's own retries); the
    same write may succeed when tried again."""


@dataclass(slots=True)
class WriteResult:
    """Outcome of one committed write.

    ``trace_ids`` are the traces that gained at least one new span or log record (duplicates that
    changed nothing are left out), i.e. the traces whose trajectory rows need rebuilding; they are
    the traces of the submission's tenant.
    """

    spans_inserted: int = 0
    spans_duplicate: int = 0
    logs_inserted: int = 0
    trace_ids: set[str] = field(default_factory=set)
    logs_duplicate: int = 0
    # records dropped because their trace was forgotten (``TraceStore.forget``)
    spans_forgotten: int = 0
    logs_forgotten: int = 0


@dataclass
class QueryResult:
    """Rows of a read-only query. ``types`` are DuckDB type names when known (``JSON``, ``TIMESTAMP``…).
    ``truncated``: the query had more rows than ``max_rows``, the cap it ran with, and only the first came; or,
    with ``max_bytes`` set, the next row would have taken the rows past that many bytes (``value_bytes``)."""

    columns: list[str]
    rows: list[tuple[Any, ...]]
    types: list[str] | None = None
    arrow: pa.Table | None = field(default=None, repr=False)
    truncated: bool = False
    max_rows: int | None = None
    max_bytes: int | None = None  # set when the rows were cut at this many bytes rather than at max_rows

    def answer_json(self) -> bytes:
        """The result as ``POST /v1/query`` answers it (what ``RemoteStore`` reads): columns, types, rows as
        JSON values (NaN and the infinities as the strings "NaN", "Infinity", "-Infinity"), and ``truncated`` with
        the cap. Seconds of work for a large result: keep it off a loop."""
        document = {
            "columns": list(self.columns),
            "types": self.types,
            "rows": [json_safe(list(row)) for row in self.rows],
            "truncated": self.truncated,
            "max_rows": self.max_rows,
        }
        if self.max_bytes is not None:
            document["max_bytes"] = self.max_bytes
        return json.dumps(document).encode("utf-8")

    def to_dicts(self) -> list[dict[str, Any]]:
        return [dict(zip(self.columns, row)) for row in self.rows]

    def to_arrow(self) -> pa.Table:
        """The rows as an Arrow table (DuckDB's own types when the query ran on a local file)."""
        if self.arrow is not None:
            return self.arrow
        arrays = []
        for index in range(len(self.columns)):
            values = [row[index] for row in self.rows]
            try:
                arrays.append(pa.array(values))
            except (pa.ArrowInvalid, pa.ArrowTypeError):
                arrays.append(pa.array([None if v is None else _as_text(v) for v in values], pa.string()))
        return pa.Table.from_arrays(arrays, names=list(self.columns))

    def json_rows(self) -> list[dict[str, Any]]:
        """Rows as JSON-ready objects: JSON columns parsed, the other values as :func:`json_safe` writes them."""
        json_columns = {i for i, t in enumerate(self.types or []) if t == "JSON"}
        return [
            {
                column: _parsed_json(value) if index in json_columns else json_safe(value)
                for index, (column, value) in enumerate(zip(self.columns, row))
            }
            for row in self.rows
        ]


def _parsed_json(value: Any) -> Any:
    if not isinstance(value, str):
        return json_safe(value)
    try:
        return json.loads(value)
    except ValueError:
        return value


def json_safe(value: Any) -> Any:
    """A DuckDB result value (or a criterion's details) as JSON: timestamps in ISO 8601, intervals as DuckDB writes
    them (:func:`interval_text`), decimals as :func:`decimal_json` writes them, bytes in base64, models as their
    fields, NaN and the infinities as the strings of ``NON_FINITE``."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else non_finite_text(value)
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return interval_text(value)
    if isinstance(value, decimal.Decimal):
        return decimal_json(value)
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, BaseModel):
        return json_safe(value.model_dump(mode="json"))
    return str(value)


_MICROS_PER_DAY = 86_400_000_000


def interval_text(value: dt.timedelta) -> str:
    """An INTERVAL as DuckDB writes it (``1 day 02:03:04``, ``-00:00:00.5``, ``2 days``), which DuckDB and PostgreSQL
    read back as the same interval; ISO 8601 (``P1DT2H3M4S``) would not read back in DuckDB.

    DuckDB hands Python an interval as a ``timedelta``, its months counted as 30 days and hours past 24 as days, so
    ``INTERVAL 1 MONTH`` comes out as ``30 days`` and ``INTERVAL 36 HOURS`` as ``1 day 12:00:00`` (equal intervals to
    DuckDB). Days and time carry the sign of the whole: ``-1 day -02:00:00``."""
    micros = value // dt.timedelta(microseconds=1)
    sign = "-" if micros < 0 else ""
    days, micros = divmod(abs(micros), _MICROS_PER_DAY)
    parts = [f"{sign}{days} day{'' if days == 1 else 's'}"] if days else []
    if micros or not days:
        seconds, fraction = divmod(micros, 1_000_000)
        minutes, seconds = divmod(seconds, 60)
        hours, minutes = divmod(minutes, 60)
        clock = f"{sign}{hours:02d}:{minutes:02d}:{seconds:02d}"
        parts.append(f"{clock}.{fraction:06d}".rstrip("0") if fraction else clock)
    return " ".join(parts)


def decimal_json(value: decimal.Decimal) -> float | str:
    """A DECIMAL in JSON: a number when a float holds it exactly (``1.50`` -> ``1.5``), else its exact digits in a
    string (``DECIMAL(38,3)`` has more digits than a float keeps: as a number it would read back as another value)."""
    number = float(value)
    return number if math.isfinite(number) and decimal.Decimal(repr(number)) == value else str(value)


def non_finite_text(value: float) -> str:
    """``"NaN"``, ``"Infinity"`` or ``"-Infinity"``: how JSON answers write a float that is not finite."""
    if math.isnan(value):
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(json_safe(value))
