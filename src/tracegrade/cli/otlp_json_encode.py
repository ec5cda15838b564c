"""SpanRecord / LogRecordData -> OTLP/JSON export requests (one compact JSON text each), in chunks of bounded size.

The OTLP/JSON encoding as the OTLP specification defines it (and the Collector's ``file`` exporter writes it):
lowerCamelCase field names, trace and span ids as lower-case hex (not protobuf JSON's base64), 64-bit integers
(``intValue``, the ``*UnixNano`` times) as decimal strings, enums (``kind``, ``status.code``,
``severityNumber``) as integers, fields at their default value left out (an empty array or map is
``{"arrayValue": {}}``): the form protobuf's own JSON printer gives, ids aside. Values map as in ``otlp_encode``:
str, bool, int, float, list, dict and None become the matching AnyValue; an integer beyond int64 is kept as
text. The text is UTF-8 (``ensure_ascii=False``): the Collector writes it so, and every OTLP/JSON reader takes it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Sequence
from typing import Any

from tracegrade.cli.otlp_encode import bounded_chunks, envelope_groups
from tracegrade.ingest.decode.checks import KIND_BY_NUMBER, STATUS_BY_NUMBER
from tracegrade.models.span import LogRecordData, SpanRecord

__all__ = ["logs_json_requests", "traces_json_requests"]

_KIND_NUMBER = {name: number for number, name in KIND_BY_NUMBER.items()}
_STATUS_NUMBER = {name: number for number, name in STATUS_BY_NUMBER.items()}
_INT64 = (-(2**63), 2**63 - 1)
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def traces_json_requests(spans: Sequence[SpanRecord], *, max_items: int, max_bytes: int) -> Iterator[tuple[bytes, int]]:
    """(UTF-8 OTLP/JSON ExportTraceServiceRequest, span count) chunks of at most ``max_items`` spans each."""
    return bounded_chunks(spans, _traces_request, max_items=max_items, max_bytes=max_bytes)


def logs_json_requests(
    records: Sequence[LogRecordData], *, max_items: int, max_bytes: int
) -> Iterator[tuple[bytes, int]]:
    """(UTF-8 OTLP/JSON ExportLogsServiceRequest, record count) chunks of at most ``max_items`` records each."""
    return bounded_chunks(records, _logs_request, max_items=max_items, max_bytes=max_bytes)


def _text(request: dict[str, Any]) -> bytes:
    return _ENCODER.encode(request).encode("utf-8")


def _traces_request(spans: Sequence[SpanRecord]) -> bytes:
    blocks = []
    for scopes in envelope_groups(spans):
        blocks.append(
            _resource_block(
                scopes[0][0], "scopeSpans", [_scope_block(g[0], "spans", [_span(r) for r in g]) for g in scopes]
            )
        )
    return _text({"resourceSpans": blocks})


def _resource_block(first: SpanRecord | LogRecordData, key: str, scope_blocks: list[dict[str, Any]]) -> dict[str, Any]:
    """A ResourceSpans or ResourceLogs object, its resource from the first record of its group."""
    resource = {
        "attributes": _attributes(first.resource),
        "droppedAttributesCount": first.resource_dropped_attributes_count,
    }
    block = {"resource": _without_defaults(resource), key: scope_blocks}
    return {**block, "schemaUrl": first.resource_schema_url} if first.resource_schema_url else block


def _scope_block(first: SpanRecord | LogRecordData, key: str, items: list[dict[str, Any]]) -> dict[str, Any]:
    """A ScopeSpans or ScopeLogs object, its scope from the first record of its group."""
    scope = {
        "name": first.scope_name,
        "version": first.scope_version,
        "attributes": _attributes(first.scope_attributes),
        "droppedAttributesCount": first.scope_dropped_attributes_count,
    }
    block = {"scope": _without_defaults(scope), key: items}
    return {**block, "schemaUrl": first.scope_schema_url} if first.scope_schema_url else block


def _span(record: SpanRecord) -> dict[str, Any]:
    span = {
        "traceId": record.trace_id,
        "spanId": record.span_id,
        "traceState": record.trace_state,
        "parentSpanId": record.parent_span_id or "",
        "flags": record.flags,
        "name": record.name,
        "kind": _KIND_NUMBER.get(record.kind, 0),
        "startTimeUnixNano": str(record.start_ns),
        "endTimeUnixNano": str(record.end_ns),
        "attributes": _attributes(record.attributes),
        "droppedAttributesCount": record.dropped_attributes_count,
        "events": [
            _without_defaults(
                {
                    "timeUnixNano": str(event.time_ns),
                    "name": event.name,
                    "attributes": _attributes(event.attributes),
                    "droppedAttributesCount": event.dropped_attributes_count,
                }
            )
            for event in record.events
        ],
        "droppedEventsCount": record.dropped_events_count,
        "links": [
            _without_defaults(
                {
                    "traceId": link.trace_id,
                    "spanId": link.span_id,
                    "traceState": link.trace_state,
                    "attributes": _attributes(link.attributes),
                    "droppedAttributesCount": link.dropped_attributes_count,
                }
            )
            for link in record.links
        ],
        "droppedLinksCount": record.dropped_links_count,
        "status": _without_defaults(
            {"message": record.status_message, "code": _STATUS_NUMBER.get(record.status_code, 0)}
        ),
    }
    return _without_defaults(span)


def _logs_request(records: Sequence[LogRecordData]) -> bytes:
    blocks = []
    for scopes in envelope_groups(records):
        blocks.append(
            _resource_block(
                scopes[0][0], "scopeLogs", [_scope_block(g[0], "logRecords", [_log(r) for r in g]) for g in scopes]
            )
        )
    return _text({"resourceLogs": blocks})


def _log(record: LogRecordData) -> dict[str, Any]:
    log = {
        "timeUnixNano": str(record.time_ns),
        "observedTimeUnixNano": str(record.observed_time_ns),
        "severityNumber": record.severity_number,
        "severityText": record.severity_text,
        "body": None if record.body is None else _value(record.body),
        "attributes": _attributes(record.attributes),
        "droppedAttributesCount": record.dropped_attributes_count,
        "flags": record.flags,
        "traceId": record.trace_id or "",
        "spanId": record.span_id or "",
        "eventName": record.event_name,
    }
    return _without_defaults(log)


def _without_defaults(message: dict[str, Any]) -> dict[str, Any]:
    """``message`` without the fields at their default (proto3 JSON leaves them out; "0" is a zero fixed64)."""
    return {key: value for key, value in message.items() if value not in ("", 0, "0", None, [], {})}


def _attributes(attributes: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"key": key, "value": _value(value)} for key, value in attributes.items()]


def _value(value: Any) -> dict[str, Any]:
    """One AnyValue; None is the empty AnyValue ``{}`` (no value set)."""
    if isinstance(value, str):
        return {"stringValue": value}
    if isinstance(value, bool):  # before int: bool is an int
        return {"boolValue": value}
    if isinstance(value, int) and _INT64[0] <= value <= _INT64[1]:
        return {"intValue": str(value)}
    if isinstance(value, float):
        if math.isfinite(value):
            return {"doubleValue": value}
        return {"doubleValue": "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")}
    if isinstance(value, (list, tuple)):
        return {"arrayValue": _without_defaults({"values": [_value(item) for item in value]})}
    if isinstance(value, dict):
        return {"kvlistValue": _without_defaults({"values": _attributes(value)})}
    if value is None:
        return {}
    return {"stringValue": str(value)}  # an integer beyond int64 or another type: kept as text rather than lost
