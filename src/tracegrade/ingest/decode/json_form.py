"""OTLP/JSON requests (``POST /v1/traces`` / ``/v1/logs`` with application/json) -> records.

Parsed with the standard library's ``json`` and walked by hand, because protobuf's generic JSON mapping
reads trace and span ids as base64 while OTLP/JSON sends them as hex. Field names are lowerCamelCase;
the proto's snake_case names are accepted too. Enums (``kind``, ``status.code``) may be integers or
their names (``SPAN_KIND_SERVER``); 64-bit integers may be numbers or decimal strings.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, NamedTuple, TypeVar

from tracegrade.errors import DecodeError
from tracegrade.ingest.decode.checks import (
    KIND_BY_NAME,
    KIND_BY_NUMBER,
    STATUS_BY_NAME,
    STATUS_BY_NUMBER,
    WIDEST_INT_DIGITS,
    Invalid,
    WideInteger,
    guarded,
    hex_id,
    log_times_problem,
    short_value,
    span_times_problem,
    stored_count,
    type_name,
)
from tracegrade.ingest.decode.json_values import attributes_from_json, json_int, value_from_json
from tracegrade.ingest.decode.limits import DEFAULT_LIMITS, DecodeLimits, clip_text
from tracegrade.ingest.decode.results import DecodedLogs, DecodedTraces, Rejection
from tracegrade.models.span import LogRecordData, SpanEvent, SpanLink, SpanRecord

__all__ = ["decode_logs_json", "decode_traces_json", "load_json"]

_MISSING = object()
Record = TypeVar("Record", SpanRecord, LogRecordData)


def load_json(body: bytes | bytearray | memoryview | str) -> Any:
    """Parse a JSON body (UTF-8), raising DecodeError with the position of any problem."""
    if isinstance(body, (bytes, bytearray, memoryview)):
        raw = bytes(body)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DecodeError(
                f"body is not valid UTF-8: byte 0x{raw[exc.start]:02x} at offset {exc.start} (OTLP/JSON must be UTF-8)"
            ) from None
    elif isinstance(body, str):
        text = body
    else:
        raise DecodeError(f"an OTLP/JSON body must be bytes or str, got {type(body).__name__}")
    if text.startswith("\ufeff"):
        text = text[1:]
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DecodeError(f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
    except RecursionError:
        raise DecodeError(f"JSON is nested too deeply for the parser{_where_too_deep(text)}") from None
    except ValueError:  # an integer of more digits than Python converts: the field that holds it refuses it
        parsed = json.loads(text, parse_int=_integer)
    if "\\ud" in text or "\\uD" in text:
        _refuse_lone_surrogates(parsed)
    return parsed


def _integer(literal: str) -> int | WideInteger:
    """A JSON integer literal as an int, or, past any protobuf integer's width, only its number of digits."""
    digits = len(literal) - literal.startswith("-")
    return WideInteger(digits) if digits > WIDEST_INT_DIGITS else int(literal)


# the tokens that open or close a level, and whole strings (skipped: a bracket inside one is text)
_LEVEL_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)
_DEEPEST_SHOWN = 500  # Python's parser gives up somewhere under its recursion limit (1000 by default)


def _where_too_deep(text: str) -> str:
    """Where ``text`` first opens its ``_DEEPEST_SHOWN``-th nested level, as ``" (… at line L, column C)"``."""
    depth = 0
    for token in _LEVEL_TOKENS.finditer(text):
        mark = token.group()
        if mark in "[{":
            depth += 1
            if depth == _DEEPEST_SHOWN:
                line = text.count("\n", 0, token.start()) + 1
                column = token.start() - (text.rfind("\n", 0, token.start()) + 1) + 1
                return f" ({_DEEPEST_SHOWN} levels of arrays or objects open at line {line}, column {column})"
        elif mark in "]}":
            depth -= 1
    return " (hundreds of levels of arrays or objects)"


def _refuse_lone_surrogates(parsed: Any) -> None:
    try:
        json.dumps(parsed, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as exc:
        raise DecodeError(
            "JSON contains an unpaired surrogate escape (\\ud800-\\udfff), which is not valid Unicode: "
            f"{exc.object[max(0, exc.start - 20) : exc.end + 20]!r}"
        ) from None


def _field(obj: dict, camel: str, snake: str, default: Any = None) -> Any:
    value = obj.get(camel, _MISSING)
    return obj.get(snake, default) if value is _MISSING else value


class _Signal(NamedTuple):
    """The JSON names of one signal's request levels, and where the other signal belongs."""

    top: str
    top_snake: str
    scope: str
    scope_snake: str
    items: str
    items_snake: str
    noun: str
    other_top: str
    other_endpoint: str


_TRACES = _Signal(
    "resourceSpans",
    "resource_spans",
    "scopeSpans",
    "scope_spans",
    "spans",
    "spans",
    "spans",
    "resourceLogs",
    "/v1/logs",
)
_LOGS = _Signal(
    "resourceLogs",
    "resource_logs",
    "scopeLogs",
    "scope_logs",
    "logRecords",
    "log_records",
    "log records",
    "resourceSpans",
    "/v1/traces",
)


def _top_blocks(body: Any, signal: _Signal) -> list:
    parsed = body if isinstance(body, dict) else load_json(body)
    if type(parsed) is not dict:
        raise DecodeError(
            f"an OTLP/JSON request must be a JSON object with a '{signal.top}' array, got {type_name(parsed)}"
        )
    blocks = _field(parsed, signal.top, signal.top_snake)
    if blocks is None:
        if signal.other_top in parsed:
            raise DecodeError(
                f"this request holds '{signal.other_top}', not '{signal.top}': send it to {signal.other_endpoint}"
            )
        return []
    if type(blocks) is not list:
        raise DecodeError(f"'{signal.top}' must be an array, got {type_name(blocks)}")
    return blocks


def _list_at(obj: dict, camel: str, snake: str, where: str) -> list:
    items = _field(obj, camel, snake)
    if items is None:
        return []
    if type(items) is not list:
        raise DecodeError(f"{where}.{camel} must be an array, got {type_name(items)}")
    return items


def _object_at(obj: Any, where: str) -> dict:
    if type(obj) is not dict:
        raise DecodeError(f"{where} must be an object, got {type_name(obj)}")
    return obj


class _Scope(NamedTuple):
    """What the spans or log records of one scope block share: their resource and instrumentation scope."""

    resource: dict[str, Any]  # the resource's attributes
    name: str
    version: str
    resource_schema_url: str
    resource_dropped: int  # the resource's dropped attribute count, with what the count limit dropped
    attributes: dict[str, Any]  # the scope's attributes
    schema_url: str
    dropped: int  # the scope's dropped attribute count, likewise


def _map_and_count(obj: dict, where: str, limits: DecodeLimits) -> tuple[dict[str, Any], int]:
    """A resource's or scope's attributes and dropped attribute count (what the count limit dropped added)."""
    try:
        attributes, dropped = attributes_from_json(obj.get("attributes"), "attributes", limits)
        return attributes, _count(obj, "droppedAttributesCount", "dropped_attributes_count", dropped)
    except Invalid as bad:
        raise DecodeError(f"{where}.{bad.reason}") from None


def _schema_url(block: dict, where: str, limits: DecodeLimits) -> str:
    url = _field(block, "schemaUrl", "schema_url")
    if url is not None and type(url) is not str:
        raise DecodeError(f"{where}.schemaUrl must be a string, got {type_name(url)}")
    return clip_text(url or "", limits.max_attribute_value_bytes)


def _scope_blocks(body: Any, signal: _Signal, limits: DecodeLimits, limit: int) -> list[tuple[_Scope, list, str]]:
    """(scope, items, items path) for each scope block.

    Malformed structure above the span/record level is a whole-request DecodeError naming its path.
    """
    walked = []
    total = 0
    for ri, block in enumerate(_top_blocks(body, signal)):
        where = f"{signal.top}[{ri}]"
        block = _object_at(block, where)
        resource = _object_at(block.get("resource") or {}, f"{where}.resource")
        attributes, resource_dropped = _map_and_count(resource, f"{where}.resource", limits)
        resource_url = _schema_url(block, where, limits)
        for si, scope_block in enumerate(_list_at(block, signal.scope, signal.scope_snake, where)):
            scope_where = f"{signal.top}[{ri}].{signal.scope}[{si}]"
            scope_block = _object_at(scope_block, scope_where)
            scope = _object_at(scope_block.get("scope") or {}, f"{scope_where}.scope")
            name, version = scope.get("name") or "", scope.get("version") or ""
            if type(name) is not str or type(version) is not str:
                raise DecodeError(f"{scope_where}.scope name and version must be strings")
            scope_attributes, scope_dropped = _map_and_count(scope, f"{scope_where}.scope", limits)
            shared = _Scope(
                attributes,
                name,
                version,
                resource_url,
                resource_dropped,
                scope_attributes,
                _schema_url(scope_block, scope_where, limits),
                scope_dropped,
            )
            items = _list_at(scope_block, signal.items, signal.items_snake, scope_where)
            total += len(items)
            walked.append((shared, items, f"{scope_where}.{signal.items}"))
    if total > limit:
        raise DecodeError(
            f"the request holds {total} {signal.noun}, more than the limit of {limit}; send smaller batches"
        )
    return walked


def _rejection(item: Any, where: str, bad: Invalid) -> Rejection:
    """The Rejection of one refused span or log record, naming its span id when it has a readable one."""
    span_id = _field(item, "spanId", "span_id") if type(item) is dict else None
    return Rejection(where, bad.reason, span_id if type(span_id) is str else None)


def _decode_items(
    body: Any, signal: _Signal, limits: DecodeLimits, limit: int, decode: Callable[[Any, _Scope, DecodeLimits], Record]
) -> tuple[list[Record], list[Rejection]]:
    """Every span or log record of the request (``decode`` of each), and a Rejection for each refused one."""
    records: list[Record] = []
    rejected: list[Rejection] = []
    for scope, items, items_where in _scope_blocks(body, signal, limits, limit):
        for index, item in enumerate(items):
            try:
                records.append(decode(item, scope, limits))
            except Invalid as bad:
                rejected.append(_rejection(item, f"{items_where}[{index}]", bad))
    return records, rejected


@guarded
def decode_traces_json(body: bytes | str | dict, limits: DecodeLimits = DEFAULT_LIMITS) -> DecodedTraces:
    """Decode an OTLP/JSON ExportTraceServiceRequest (bytes, text, or an already-parsed dict)."""
    return DecodedTraces(*_decode_items(body, _TRACES, limits, limits.max_spans_per_request, _span))


@guarded
def decode_logs_json(body: bytes | str | dict, limits: DecodeLimits = DEFAULT_LIMITS) -> DecodedLogs:
    """Decode an OTLP/JSON ExportLogsServiceRequest (bytes, text, or an already-parsed dict)."""
    return DecodedLogs(*_decode_items(body, _LOGS, limits, limits.max_log_records_per_request, _log_record))


def _span(item: Any, scope: _Scope, limits: DecodeLimits) -> SpanRecord:
    if type(item) is not dict:
        raise Invalid(f"a span must be an object, got {type_name(item)}")
    trace_id = hex_id(_field(item, "traceId", "trace_id"), "traceId", 16)
    span_id = hex_id(_field(item, "spanId", "span_id"), "spanId", 8)
    parent = _optional_id(_field(item, "parentSpanId", "parent_span_id"), "parentSpanId", 8)
    name = item.get("name")
    if not name or type(name) is not str:
        raise Invalid("name is missing or empty" if not name else f"name must be a string, got {type_name(name)}")
    start = json_int(_field(item, "startTimeUnixNano", "start_time_unix_nano", 0), "startTimeUnixNano", unsigned=True)
    end = json_int(_field(item, "endTimeUnixNano", "end_time_unix_nano", 0), "endTimeUnixNano", unsigned=True)
    problem = span_times_problem(start, end)
    if problem:
        raise Invalid(problem)
    attributes, dropped = attributes_from_json(item.get("attributes"), "attributes", limits)
    events, dropped_events = _events(item.get("events"), limits)
    links, dropped_links = _links(item.get("links"), limits)
    status = item.get("status") or {}
    if type(status) is not dict:
        raise Invalid(f"status must be an object, got {type_name(status)}")
    message = status.get("message") or ""
    if type(message) is not str:
        raise Invalid(f"status.message must be a string, got {type_name(message)}")
    return SpanRecord(
        trace_id=trace_id,
        span_id=span_id,
        name=clip_text(name, limits.max_attribute_value_bytes),
        start_ns=start,
        end_ns=end,
        parent_span_id=parent,
        kind=_enum(item.get("kind"), KIND_BY_NUMBER, KIND_BY_NAME, "kind", "SPAN_KIND_SERVER"),
        attributes=attributes,
        events=events,
        links=links,
        status_code=_enum(status.get("code"), STATUS_BY_NUMBER, STATUS_BY_NAME, "status.code", "STATUS_CODE_ERROR"),
        status_message=clip_text(message, limits.max_attribute_value_bytes),
        trace_state=_string(_field(item, "traceState", "trace_state"), "traceState"),
        flags=json_int(item.get("flags") or 0, "flags", unsigned=True, bits=32),
        dropped_attributes_count=_count(item, "droppedAttributesCount", "dropped_attributes_count", dropped),
        dropped_events_count=_count(item, "droppedEventsCount", "dropped_events_count", dropped_events),
        dropped_links_count=_count(item, "droppedLinksCount", "dropped_links_count", dropped_links),
        resource=scope.resource,  # shared by the spans of one resource block
        scope_name=scope.name,
        scope_version=scope.version,
        resource_schema_url=scope.resource_schema_url,
        resource_dropped_attributes_count=scope.resource_dropped,
        scope_attributes=scope.attributes,  # shared by the spans of one scope block
        scope_schema_url=scope.schema_url,
        scope_dropped_attributes_count=scope.dropped,
    )


def _string(value: Any, field: str) -> str:
    if value is None:
        return ""
    if type(value) is not str:
        raise Invalid(f"{field} must be a string, got {type_name(value)}")
    return value


def _count(obj: dict, camel: str, snake: str, dropped_here: int = 0) -> int:
    """A dropped-items count as sent (a uint32), plus what decoding dropped, as the store keeps it."""
    value = _field(obj, camel, snake)
    sent = 0 if value is None else json_int(value, camel, unsigned=True, bits=32)
    return stored_count(sent + dropped_here)


def _enum(value: Any, by_number: dict, by_name: dict, field: str, example: str) -> str:
    """An enum given as its number or its name; unknown numbers read as the enum's zero value."""
    if value is None:
        return by_number[0]
    if type(value) is int:
        return by_number.get(value, by_number[0])
    if type(value) is str:
        name = by_name.get(value.upper())
        if name is not None:
            return name
        if value.isascii() and value.isdigit():
            return by_number.get(int(value), by_number[0])
    raise Invalid(f"{field} must be an integer or an enum name such as {example!r}, got {short_value(value)}")


def _sequence(items: Any, field: str, limit: int) -> tuple[list, int]:
    if items is None:
        return [], 0
    if type(items) is not list:
        raise Invalid(f"{field} must be an array, got {type_name(items)}")
    dropped = len(items) - limit
    return (items[:limit], dropped) if dropped > 0 else (items, 0)


def _events(items: Any, limits: DecodeLimits) -> tuple[list[SpanEvent], int]:
    items, dropped = _sequence(items, "events", limits.max_events_per_span)
    out = []
    for index, event in enumerate(items):
        where = f"events[{index}]"
        if type(event) is not dict:
            raise Invalid(f"{where} must be an object, got {type_name(event)}")
        attributes, dropped_attributes = attributes_from_json(event.get("attributes"), f"{where}.attributes", limits)
        out.append(
            SpanEvent(
                name=clip_text(_string(event.get("name"), f"{where}.name"), limits.max_attribute_value_bytes),
                time_ns=json_int(
                    _field(event, "timeUnixNano", "time_unix_nano", 0), f"{where}.timeUnixNano", unsigned=True
                ),
                attributes=attributes,
                dropped_attributes_count=_count(
                    event, "droppedAttributesCount", "dropped_attributes_count", dropped_attributes
                ),
            )
        )
    return out, dropped


def _links(items: Any, limits: DecodeLimits) -> tuple[list[SpanLink], int]:
    items, dropped = _sequence(items, "links", limits.max_links_per_span)
    out = []
    for index, link in enumerate(items):
        where = f"links[{index}]"
        if type(link) is not dict:
            raise Invalid(f"{where} must be an object, got {type_name(link)}")
        attributes, dropped_attributes = attributes_from_json(link.get("attributes"), f"{where}.attributes", limits)
        out.append(
            SpanLink(
                trace_id=hex_id(_field(link, "traceId", "trace_id"), f"{where}.traceId", 16),
                span_id=hex_id(_field(link, "spanId", "span_id"), f"{where}.spanId", 8),
                attributes=attributes,
                trace_state=_string(_field(link, "traceState", "trace_state"), f"{where}.traceState"),
                dropped_attributes_count=_count(
                    link, "droppedAttributesCount", "dropped_attributes_count", dropped_attributes
                ),
            )
        )
    return out, dropped


def _optional_id(value: Any, field: str, size: int) -> str | None:
    """Ids that may be absent (parent span id, log record ids): empty or all zeros mean absent."""
    if value is None or value == "" or (type(value) is str and not value.strip("0")):
        return None
    return hex_id(value, field, size)


def _log_record(item: Any, scope: _Scope, limits: DecodeLimits) -> LogRecordData:
    if type(item) is not dict:
        raise Invalid(f"a log record must be an object, got {type_name(item)}")
    trace_id = _optional_id(_field(item, "traceId", "trace_id"), "traceId", 16)
    span_id = _optional_id(_field(item, "spanId", "span_id"), "spanId", 8)
    attributes, dropped = attributes_from_json(item.get("attributes"), "attributes", limits)
    time_ns = json_int(_field(item, "timeUnixNano", "time_unix_nano", 0), "timeUnixNano", unsigned=True)
    observed = json_int(
        _field(item, "observedTimeUnixNano", "observed_time_unix_nano", 0), "observedTimeUnixNano", unsigned=True
    )
    problem = log_times_problem(time_ns, observed)
    if problem:
        raise Invalid(problem)
    event_name = _string(_field(item, "eventName", "event_name"), "eventName") or attributes.get("event.name") or ""
    severity = _field(item, "severityNumber", "severity_number")
    return LogRecordData(
        time_ns=time_ns or observed,
        trace_id=trace_id,
        span_id=span_id,
        event_name=event_name if type(event_name) is str else str(event_name),
        body=value_from_json(item.get("body"), "body", limits),
        attributes=attributes,
        severity_number=_severity(severity),
        severity_text=_string(_field(item, "severityText", "severity_text"), "severityText"),
        observed_time_ns=observed,
        flags=json_int(item.get("flags") or 0, "flags", unsigned=True, bits=32),
        dropped_attributes_count=_count(item, "droppedAttributesCount", "dropped_attributes_count", dropped),
        resource=scope.resource,  # shared by the records of one resource block
        scope_name=scope.name,
        scope_version=scope.version,
        resource_schema_url=scope.resource_schema_url,
        resource_dropped_attributes_count=scope.resource_dropped,
        scope_attributes=scope.attributes,  # shared by the records of one scope block
        scope_schema_url=scope.schema_url,
        scope_dropped_attributes_count=scope.dropped,
    )


def _severity(value: Any) -> int:
    """severityNumber: an integer or its enum name (``SEVERITY_NUMBER_INFO`` ...)."""
    if value is None:
        return 0
    if type(value) is str and value.upper().startswith("SEVERITY_NUMBER_"):
        number = _SEVERITY_BY_NAME.get(value.upper()[16:])
        if number is None:
            raise Invalid(f"severityNumber {value!r} is not a known severity")
        return number
    return json_int(value, "severityNumber", bits=32)


def _severity_names() -> dict[str, int]:
    names: dict[str, int] = {"UNSPECIFIED": 0}
    for offset, level in enumerate(("TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL")):
        for step in range(4):
            names[level if step == 0 else f"{level}{step + 1}"] = 1 + offset * 4 + step
    return names


_SEVERITY_BY_NAME = _severity_names()
