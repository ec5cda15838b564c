"""Conversions between span/log records and store rows: Arrow batches in, records back out.

Filterable fields become typed columns; attribute maps, events, links, resources and log bodies become
JSON text. JSON cannot hold bytes or non-finite floats: bytes are stored as base64 text and NaN/±Infinity
as the strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"`` (documented in SCHEMA.md).
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import struct
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

import orjson
import pyarrow as pa

from tracegrade.models.span import LogRecordData, SpanEvent, SpanLink, SpanRecord, service_name_of

__all__ = [
    "ENVELOPE_COLUMNS",
    "LOG_SELECT_COLUMNS",
    "SPAN_SELECT_COLUMNS",
    "compress_json",
    "content_key",
    "decompress_json",
    "decompress_json_many",
    "dedupe_spans",
    "from_json",
    "log_from_row",
    "logs_to_arrow",
    "ns_to_datetime",
    "span_from_row",
    "spans_to_arrow",
    "sql_string_among",
    "sql_string_in",
    "sql_string_list",
    "to_json",
    "utc_now",
]


def _json_default(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return str(value)


def _finite(value: Any) -> Any:
    """Replace non-finite floats (which JSON cannot express) by their names, recursively."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


# the exact (slow) path: strings orjson refuses (lone surrogates) and values holding JSON nulls
_LENIENT_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, default=_json_default)


def to_json(value: Any) -> str:
    """Compact JSON text for a store JSON column (valid JSON even for bytes and NaN).

    orjson writes NaN and ±Infinity as ``null``; text holding a ``null`` is therefore encoded again by
    the standard library encoder, which keeps a real None as null and names the non-finite floats.
    """
    try:
        text = orjson.dumps(value, default=_json_default)
    except TypeError:  # lone surrogates, integers beyond 64 bits
        return _LENIENT_ENCODER.encode(_finite(value))
    if b"null" in text:
        return _LENIENT_ENCODER.encode(_finite(value))
    return text.decode("utf-8")


def from_json(text: str | None) -> Any:
    return None if text is None else json.loads(text)


# Compressed JSON columns (``traces.execution``): the UTF-8 length as 4 little-endian bytes, then one
# zstd frame (level 1: fast, and it already shrinks an agent trajectory several times over; bench/RESULTS.md,
# store writes).
_ZSTD = pa.Codec("zstd", compression_level=1)
_LENGTH = struct.Struct("<I")


def compress_json(text: str) -> bytes:
    """JSON text as stored in a compressed JSON column."""
    data = text.encode("utf-8")
    return _LENGTH.pack(len(data)) + _ZSTD.compress(data, asbytes=True)


def decompress_json(blob: bytes) -> bytes:
    """The UTF-8 JSON text of a compressed JSON column value (pydantic and orjson parse bytes directly)."""
    (length,) = _LENGTH.unpack_from(blob)
    return _ZSTD.decompress(memoryview(blob)[_LENGTH.size :], decompressed_size=length, asbytes=True)


def decompress_json_many(blobs: Sequence[bytes]) -> list[bytes]:
    """``[decompress_json(b) for b in blobs]`` in one zstd call: concatenated zstd frames decompress to their texts
    concatenated, and each call of the codec costs several times what decompressing a small trajectory does."""
    if not blobs:
        return []
    lengths = [_LENGTH.unpack_from(blob)[0] for blob in blobs]
    frames = b"".join(memoryview(blob)[_LENGTH.size :] for blob in blobs)
    texts = _ZSTD.decompress(frames, decompressed_size=sum(lengths), asbytes=True)
    parts, start = [], 0
    for length in lengths:
        parts.append(texts[start : start + length])
        start += length
    return parts


def utc_now() -> datetime:
    """Current UTC time as a naive datetime (DuckDB TIMESTAMP columns hold UTC)."""
    return datetime.now(timezone.utc).replace(tzinfo=None)


_EPOCH = datetime(1970, 1, 1)


def ns_to_datetime(ns: int | None) -> datetime | None:
    """Unix nanoseconds as a naive UTC datetime (microsecond precision), like the *_time columns."""
    return None if ns is None else _EPOCH + timedelta(microseconds=ns // 1000)


def _ns_to_timestamps(values: list[int]) -> pa.Array:
    return pa.array(values, pa.int64()).cast(pa.timestamp("ns")).cast(pa.timestamp("us"), safe=False)


def sql_string(value: str) -> str:
    """A SQL string literal ``'a''b'``; a NUL, which SQL text cannot hold, is written ``chr(0)`` between the
    literals of the rest (``('a' || chr(0) || 'b')``)."""
    if "\0" in value:
        return "(" + " || chr(0) || ".join(sql_string(part) for part in value.split("\0")) + ")"
    return "'" + value.replace("'", "''") + "'"


def sql_string_list(values: Iterable[str]) -> str:
    """A SQL literal list ``('a','b')`` (``(NULL)`` when empty, which matches nothing)."""
    quoted = [sql_string(v) for v in values]
    return "(" + ",".join(quoted) + ")" if quoted else "(NULL)"


LONG_STRING_LIST = 100  # values from which sql_string_in passes a list as one parameter


def sql_string_in(values: Iterable[str]) -> tuple[str, list[str]]:
    """The right side of ``x IN …`` for ``values``, and the parameters it binds.

    Up to ``LONG_STRING_LIST`` values, the literal list (DuckDB can look a few values up in an index). A longer list
    is one JSON parameter that DuckDB unnests: DuckDB joins a long list with the table either way, and parsing,
    binding and the read-only check of a literal list cost several microseconds a value.
    """
    listed = list(values)
    if len(listed) <= LONG_STRING_LIST:
        return sql_string_list(listed), []
    return "(SELECT unnest(from_json(?, '[\"VARCHAR\"]')))", [orjson.dumps(listed).decode()]


FEW_STRINGS = 50  # values up to which sql_string_among compares each row with each value (bench/bench_few_ids.py)


def sql_string_among(column: str, values: Iterable[str]) -> tuple[str, list[str]]:
    """A predicate that ``column`` holds one of ``values``, and the parameters it binds, for a query that reads
    wide columns (blobs, JSON, whole rows) of the few rows it finds.

    DuckDB joins a list of two or more values with the table, after reading every column the query asks for
    from every row: a table of 100,000 traces then costs tens of milliseconds whatever the list. ``list_contains``
    over a literal list is a filter inside the scan instead, so the other columns are read for the matching rows
    only, while the list is short (every row is compared with each value, so up to ``FEW_STRINGS`` values); one
    value, or a longer list, goes through ``IN`` (``sql_string_in``).
    """
    listed = list(values)
    if 1 < len(listed) <= FEW_STRINGS:
        return f"list_contains([{','.join(sql_string(v) for v in listed)}], {column})", []
    in_values, params = sql_string_in(listed)
    return f"{column} IN {in_values}", params


def dedupe_spans(spans: Sequence[SpanRecord]) -> list[SpanRecord]:
    """The spans with repeats of the same (trace_id, span_id) removed; the first one sent wins."""
    seen: set[tuple[str, str]] = set()
    unique = []
    for span in spans:
        key = (span.trace_id, span.span_id)
        if key not in seen:
            seen.add(key)
            unique.append(span)
    return unique


def _event_dict(event: SpanEvent) -> dict[str, Any]:
    return {
        "name": event.name,
        "time_ns": event.time_ns,
        "attributes": event.attributes,
        "dropped_attributes_count": event.dropped_attributes_count,
    }


def _link_dict(link: SpanLink) -> dict[str, Any]:
    return {
        "trace_id": link.trace_id,
        "span_id": link.span_id,
        "attributes": link.attributes,
        "trace_state": link.trace_state,
        "dropped_attributes_count": link.dropped_attributes_count,
    }


_SCALAR_TYPES = (str, int, float, bool, type(None))


def content_key(attributes: dict[str, Any]) -> Any:
    """A hashable key for an attribute map's content (a resource's, a scope's: decoders give each block its own
    dict, and records made one by one each have their own).

    Value types are part of the key: ``1``, ``1.0`` and ``True`` are equal in Python, not in JSON.
    A map holding arrays or maps is keyed by object identity only.
    """
    key = tuple((name, type(value), value) for name, value in attributes.items())
    if all(kind in _SCALAR_TYPES for _, kind, _ in key):
        return key
    return id(attributes)


def _shared_json(maps: Iterable[dict[str, Any]]) -> list[str]:
    """JSON text per attribute map, encoding each distinct map once (a batch shares a few resources and scopes)."""
    by_object: dict[int, str] = {}
    by_content: dict[Any, str] = {}
    out = []
    for attributes in maps:
        text = by_object.get(id(attributes))
        if text is None:
            key = content_key(attributes)
            text = by_content.get(key)
            if text is None:
                text = by_content[key] = to_json(attributes)
            by_object[id(attributes)] = text
        out.append(text)
    return out


def spans_to_arrow(spans: Sequence[SpanRecord]) -> pa.Table:
    """One Arrow table in the column layout of the ``spans`` table, but for ``received_at`` (stamped
    when the write commits)."""
    starts = [s.start_ns for s in spans]
    ends = [s.end_ns for s in spans]
    return pa.table(
        {
            "trace_id": [s.trace_id for s in spans],
            "span_id": [s.span_id for s in spans],
            "parent_span_id": pa.array([s.parent_span_id or None for s in spans], pa.string()),
            "name": [s.name for s in spans],
            "kind": [s.kind for s in spans],
            "service_name": [s.service_name for s in spans],
            "scope_name": [s.scope_name for s in spans],
            "scope_version": [s.scope_version for s in spans],
            "start_time": _ns_to_timestamps(starts),
            "end_time": _ns_to_timestamps(ends),
            "start_ns": pa.array(starts, pa.int64()),
            "end_ns": pa.array(ends, pa.int64()),
            "duration_ms": pa.array([s.duration_ns / 1e6 for s in spans], pa.float64()),
            "status_code": [s.status_code for s in spans],
            "status_message": [s.status_message for s in spans],
            "attributes": [to_json(s.attributes) for s in spans],
            "events": [to_json([_event_dict(e) for e in s.events]) if s.events else "[]" for s in spans],
            "links": [to_json([_link_dict(x) for x in s.links]) if s.links else "[]" for s in spans],
            "resource": _shared_json(s.resource for s in spans),
            "trace_state": [s.trace_state for s in spans],
            "flags": pa.array([s.flags for s in spans], pa.int64()),
            "dropped_attributes_count": pa.array([s.dropped_attributes_count for s in spans], pa.int32()),
            "dropped_events_count": pa.array([s.dropped_events_count for s in spans], pa.int32()),
            "dropped_links_count": pa.array([s.dropped_links_count for s in spans], pa.int32()),
            **_envelope_columns(spans),
        }
    )


def _envelope_columns(records: Sequence[SpanRecord] | Sequence[LogRecordData]) -> dict[str, pa.Array | list[str]]:
    """The columns of the records' OTLP envelope beyond the resource attributes and scope name (version 12)."""
    return {
        "resource_schema_url": pa.array([r.resource_schema_url for r in records], pa.string()),
        "resource_dropped_attributes_count": pa.array(
            [r.resource_dropped_attributes_count for r in records], pa.int32()
        ),
        "scope_attributes": _shared_json(r.scope_attributes for r in records),
        "scope_schema_url": pa.array([r.scope_schema_url for r in records], pa.string()),
        "scope_dropped_attributes_count": pa.array([r.scope_dropped_attributes_count for r in records], pa.int32()),
    }


def _log_key(record: LogRecordData, body: str, attributes: str, resource: str, envelope: str) -> str:
    """Content hash that identifies a log record, so a re-sent log batch is stored once. ``envelope`` (the scope
    version and the rest of version 12's envelope) is hashed only when it is not empty: a record without one keeps
    the key it had before, so a batch sent again across an upgrade is still stored once."""
    parts = (
        record.trace_id or "",
        record.span_id or "",
        str(record.time_ns),
        str(record.observed_time_ns),
        str(record.severity_number),
        record.severity_text,
        record.event_name,
        record.scope_name,
        body,
        attributes,
        resource,
    )
    text = "\x1f".join(parts) + ("\x1f" + envelope if envelope else "")
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def _log_envelope(record: LogRecordData) -> str:
    """The record's envelope beyond resource attributes and scope name, as text to hash; "" when all default."""
    if not (
        record.scope_version
        or record.resource_schema_url
        or record.resource_dropped_attributes_count
        or record.scope_attributes
        or record.scope_schema_url
        or record.scope_dropped_attributes_count
    ):
        return ""
    return to_json(
        [
            record.scope_version,
            record.resource_schema_url,
            record.resource_dropped_attributes_count,
            record.scope_attributes,
            record.scope_schema_url,
            record.scope_dropped_attributes_count,
        ]
    )


def logs_to_arrow(records: Sequence[LogRecordData]) -> tuple[list[LogRecordData], pa.Table]:
    """The unique log records (by content) and an Arrow table of them, row for row, in the layout of
    the ``logs`` table but for ``received_at``."""
    unique: list[LogRecordData] = []
    encoded: dict[str, tuple[str, str, str]] = {}  # log_key -> (body, attributes, resource) JSON
    for record in records:
        body, attributes, resource = to_json(record.body), to_json(record.attributes), to_json(record.resource)
        key = _log_key(record, body, attributes, resource, _log_envelope(record))
        if key not in encoded:
            encoded[key] = (body, attributes, resource)
            unique.append(record)
    bodies, attribute_maps, resources = zip(*encoded.values()) if encoded else ((), (), ())
    times = [r.time_ns or r.observed_time_ns for r in unique]
    table = pa.table(
        {
            "log_key": pa.array(list(encoded), pa.string()),
            "trace_id": pa.array([r.trace_id or None for r in unique], pa.string()),
            "span_id": pa.array([r.span_id or None for r in unique], pa.string()),
            "time": _ns_to_timestamps(times),
            "time_ns": pa.array([r.time_ns for r in unique], pa.int64()),
            "observed_time_ns": pa.array([r.observed_time_ns for r in unique], pa.int64()),
            "event_name": pa.array([r.event_name for r in unique], pa.string()),
            "severity_number": pa.array([r.severity_number for r in unique], pa.int32()),
            "severity_text": pa.array([r.severity_text for r in unique], pa.string()),
            "body": pa.array(bodies, pa.string()),
            "attributes": pa.array(attribute_maps, pa.string()),
            "resource": pa.array(resources, pa.string()),
            "service_name": pa.array([service_name_of(r.resource) for r in unique], pa.string()),
            "scope_name": pa.array([r.scope_name for r in unique], pa.string()),
            "flags": pa.array([r.flags for r in unique], pa.int64()),
            "dropped_attributes_count": pa.array([r.dropped_attributes_count for r in unique], pa.int32()),
            "scope_version": pa.array([r.scope_version for r in unique], pa.string()),
            **_envelope_columns(unique),
        }
    )
    return unique, table


ENVELOPE_COLUMNS = (
    "resource_schema_url, resource_dropped_attributes_count, scope_attributes, scope_schema_url, "
    "scope_dropped_attributes_count"
)
SPAN_SELECT_COLUMNS = (
    "trace_id, span_id, parent_span_id, name, kind, scope_name, scope_version, start_ns, end_ns, "
    "status_code, status_message, attributes, events, links, resource, trace_state, flags, "
    f"dropped_attributes_count, dropped_events_count, dropped_links_count, {ENVELOPE_COLUMNS}"
)


def _shared_map(text: str | None, shared: dict[str, dict[str, Any]] | None) -> dict[str, Any]:
    """The attribute map stored as JSON ``text`` (NULL, in a lake's rows written before version 12: none), one
    dict per distinct text when ``shared`` (a batch's cache) is given."""
    if text is None:
        return {}
    if shared is None:
        return json.loads(text)  # type: ignore[no-any-return]
    found = shared.get(text)
    if found is None:
        found = shared[text] = json.loads(text)
    return found


def _set_envelope(
    record: SpanRecord | LogRecordData, row: Sequence[Any], shared: dict[str, dict[str, Any]] | None
) -> None:
    """Fill ``record``'s envelope from the ``ENVELOPE_COLUMNS`` ending ``row`` (NULL: the default, see above)."""
    url, resource_dropped, scope_attributes, scope_url, scope_dropped = row[-5:]
    record.resource_schema_url = url or ""
    record.resource_dropped_attributes_count = resource_dropped or 0
    record.scope_attributes = _shared_map(scope_attributes, shared)
    record.scope_schema_url = scope_url or ""
    record.scope_dropped_attributes_count = scope_dropped or 0


def span_from_row(row: Sequence[Any], resources: dict[str, dict[str, Any]] | None = None) -> SpanRecord:
    """Rebuild a SpanRecord from a row selected with SPAN_SELECT_COLUMNS.

    ``resources`` (one dict per batch of rows) shares one resource dict between the spans whose resource
    JSON is the same text, as the decoders share one per resource block, and likewise one dict of scope
    attributes: read them, never modify them.
    (The standard library parses the JSON: orjson would be faster but turns integers beyond 64 bits into
    floats.)
    """
    (trace_id, span_id, parent, name, kind, scope_name, scope_version, start_ns, end_ns, status_code,
     status_message, attributes, events, links, resource, trace_state, flags, dropped_attrs, dropped_events,
     dropped_links) = row[:20]  # fmt: skip
    record = SpanRecord(
        trace_id=trace_id,
        span_id=span_id,
        name=name,
        start_ns=start_ns,
        end_ns=end_ns,
        parent_span_id=parent,
        kind=kind,
        attributes=json.loads(attributes),
        events=[SpanEvent(**e) for e in json.loads(events)] if events != "[]" else [],
        links=[SpanLink(**x) for x in json.loads(links)] if links != "[]" else [],
        status_code=status_code,
        status_message=status_message,
        resource=_shared_map(resource, resources),
        scope_name=scope_name,
        scope_version=scope_version,
        trace_state=trace_state,
        flags=flags,
        dropped_attributes_count=dropped_attrs,
        dropped_events_count=dropped_events,
        dropped_links_count=dropped_links,
    )
    _set_envelope(record, row, resources)
    return record


LOG_SELECT_COLUMNS = (
    "trace_id, span_id, time_ns, observed_time_ns, event_name, severity_number, severity_text, body, "
    f"attributes, resource, scope_name, flags, dropped_attributes_count, scope_version, {ENVELOPE_COLUMNS}"
)


def log_from_row(row: Sequence[Any], shared: dict[str, dict[str, Any]] | None = None) -> LogRecordData:
    """Rebuild a LogRecordData from a row selected with LOG_SELECT_COLUMNS; ``shared`` shares resource and scope
    attribute dicts as ``span_from_row``'s ``resources`` does."""
    (trace_id, span_id, time_ns, observed, event_name, severity_number, severity_text, body, attributes,
     resource, scope_name, flags, dropped, scope_version) = row[:14]  # fmt: skip
    record = LogRecordData(
        time_ns=time_ns,
        trace_id=trace_id,
        span_id=span_id,
        event_name=event_name,
        body=from_json(body),
        attributes=json.loads(attributes),
        severity_number=severity_number,
        severity_text=severity_text,
        resource=_shared_map(resource, shared),
        scope_name=scope_name,
        observed_time_ns=observed,
        flags=flags,
        dropped_attributes_count=dropped,
        scope_version=scope_version or "",
    )
    _set_envelope(record, row, shared)
    return record
