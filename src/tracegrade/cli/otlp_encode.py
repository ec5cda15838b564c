"""SpanRecord / LogRecordData -> serialized OTLP protobuf export requests, in chunks of bounded size.

The inverse of the decoders' value mapping (``ingest.decode.proto_values``): str, bool, int, float, list,
dict and None become the matching AnyValue. ``tracegrade import`` uses it to send a decoded file through a
running `tracegrade serve`, so the server's own decoder and writer store it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from tracegrade.ingest.decode.checks import KIND_BY_NUMBER, STATUS_BY_NUMBER
from tracegrade.models.span import LogRecordData, SpanRecord
from tracegrade.store.rows import content_key

__all__ = ["bounded_chunks", "envelope_groups", "logs_requests", "traces_requests"]

T = TypeVar("T", SpanRecord, LogRecordData)

_KIND_NUMBER = {name: number for number, name in KIND_BY_NUMBER.items()}
_STATUS_NUMBER = {name: number for number, name in STATUS_BY_NUMBER.items()}
_INT64 = (-(2**63), 2**63 - 1)


def traces_requests(spans: Sequence[SpanRecord], *, max_items: int, max_bytes: int) -> Iterator[tuple[bytes, int]]:
    """(serialized ExportTraceServiceRequest, span count) chunks of at most ``max_items`` spans each."""
    return bounded_chunks(spans, _traces_request, max_items=max_items, max_bytes=max_bytes)


def logs_requests(records: Sequence[LogRecordData], *, max_items: int, max_bytes: int) -> Iterator[tuple[bytes, int]]:
    """(serialized ExportLogsServiceRequest, record count) chunks of at most ``max_items`` records each."""
    return bounded_chunks(records, _logs_request, max_items=max_items, max_bytes=max_bytes)


def bounded_chunks(
    items: Sequence[T], encode: Callable[[Sequence[T]], bytes], *, max_items: int, max_bytes: int
) -> Iterator[tuple[bytes, int]]:
    """(``encode(chunk)``, len(chunk)) for consecutive chunks of ``items``, each of at most ``max_items`` records
    and, unless it is one record, at most ``max_bytes`` encoded."""
    for start in range(0, len(items), max_items):
        yield from _bounded(items[start : start + max_items], encode, max_bytes)


def _bounded(items: Sequence[T], encode: Callable[[Sequence[T]], bytes], max_bytes: int) -> Iterator[tuple[bytes, int]]:
    """Halve a chunk until it encodes within ``max_bytes`` (one record alone is sent whatever its size)."""
    body = encode(items)
    if len(body) <= max_bytes or len(items) == 1:
        yield body, len(items)
        return
    middle = len(items) // 2
    yield from _bounded(items[:middle], encode, max_bytes)
    yield from _bounded(items[middle:], encode, max_bytes)


def envelope_groups(items: Sequence[T]) -> list[list[list[T]]]:
    """Records grouped as OTLP nests them, in order of first appearance: one group per resource (attributes,
    schema URL, dropped count), within it one per scope (name, version, attributes, schema URL, dropped count).
    Each scope group's records share its envelope: the encoders read it from the group's first record."""
    keys: dict[int, Any] = {}  # id of an attribute dict -> its content key (a batch shares a few dicts)

    def key_of(attributes: dict[str, Any]) -> Any:
        key = keys.get(id(attributes))
        if key is None:
            key = keys[id(attributes)] = content_key(attributes)
        return key

    resources: dict[Any, dict[Any, list[T]]] = {}
    for item in items:
        resource = (key_of(item.resource), item.resource_schema_url, item.resource_dropped_attributes_count)
        scope = (
            item.scope_name,
            item.scope_version,
            key_of(item.scope_attributes),
            item.scope_schema_url,
            item.scope_dropped_attributes_count,
        )
        resources.setdefault(resource, {}).setdefault(scope, []).append(item)
    return [list(scopes.values()) for scopes in resources.values()]


def _fill_resource(block: Any, first: SpanRecord | LogRecordData) -> None:
    """A ResourceSpans' or ResourceLogs' resource and schema URL, from the first record of its group."""
    _fill_attributes(block.resource.attributes, first.resource)
    block.resource.dropped_attributes_count = first.resource_dropped_attributes_count
    block.schema_url = first.resource_schema_url


def _fill_scope(block: Any, first: SpanRecord | LogRecordData) -> None:
    """A ScopeSpans' or ScopeLogs' instrumentation scope and schema URL, from the first record of its group."""
    block.scope.name = first.scope_name
    block.scope.version = first.scope_version
    _fill_attributes(block.scope.attributes, first.scope_attributes)
    block.scope.dropped_attributes_count = first.scope_dropped_attributes_count
    block.schema_url = first.scope_schema_url


def _traces_request(spans: Sequence[SpanRecord]) -> bytes:
    request = ExportTraceServiceRequest()
    for scopes in envelope_groups(spans):
        resource_spans = request.resource_spans.add()
        _fill_resource(resource_spans, scopes[0][0])
        for group in scopes:
            scope_spans = resource_spans.scope_spans.add()
            _fill_scope(scope_spans, group[0])
            for record in group:
                _fill_span(scope_spans.spans.add(), record)
    return request.SerializeToString()


def _fill_span(span: Any, record: SpanRecord) -> None:
    span.trace_id = bytes.fromhex(record.trace_id)
    span.span_id = bytes.fromhex(record.span_id)
    if record.parent_span_id:
        span.parent_span_id = bytes.fromhex(record.parent_span_id)
    span.name = record.name
    span.kind = _KIND_NUMBER.get(record.kind, 0)
    span.start_time_unix_nano = record.start_ns
    span.end_time_unix_nano = record.end_ns
    span.trace_state = record.trace_state
    span.flags = record.flags
    _fill_attributes(span.attributes, record.attributes)
    span.dropped_attributes_count = record.dropped_attributes_count
    for event in record.events:
        proto_event = span.events.add(name=event.name, time_unix_nano=event.time_ns)
        _fill_attributes(proto_event.attributes, event.attributes)
        proto_event.dropped_attributes_count = event.dropped_attributes_count
    span.dropped_events_count = record.dropped_events_count
    for link in record.links:
        proto_link = span.links.add(
            trace_id=bytes.fromhex(link.trace_id), span_id=bytes.fromhex(link.span_id), trace_state=link.trace_state
        )
        _fill_attributes(proto_link.attributes, link.attributes)
        proto_link.dropped_attributes_count = link.dropped_attributes_count
    span.dropped_links_count = record.dropped_links_count
    span.status.code = _STATUS_NUMBER.get(record.status_code, 0)
    span.status.message = record.status_message


def _logs_request(records: Sequence[LogRecordData]) -> bytes:
    request = ExportLogsServiceRequest()
    for scopes in envelope_groups(records):
        resource_logs = request.resource_logs.add()
        _fill_resource(resource_logs, scopes[0][0])
        for group in scopes:
            scope_logs = resource_logs.scope_logs.add()
            _fill_scope(scope_logs, group[0])
            for record in group:
                _fill_log(scope_logs.log_records.add(), record)
    return request.SerializeToString()


def _fill_log(proto: Any, record: LogRecordData) -> None:
    proto.time_unix_nano = record.time_ns
    proto.observed_time_unix_nano = record.observed_time_ns
    proto.severity_number = record.severity_number
    proto.severity_text = record.severity_text
    proto.flags = record.flags
    proto.event_name = record.event_name
    proto.dropped_attributes_count = record.dropped_attributes_count
    if record.trace_id:
        proto.trace_id = bytes.fromhex(record.trace_id)
    if record.span_id:
        proto.span_id = bytes.fromhex(record.span_id)
    if record.body is not None:
        _fill_value(proto.body, record.body)
    _fill_attributes(proto.attributes, record.attributes)


def _fill_attributes(key_values: Any, attributes: dict[str, Any]) -> None:
    for key, value in attributes.items():
        entry = key_values.add(key=key)
        if value is not None:
            _fill_value(entry.value, value)


def _fill_value(target: AnyValue, value: Any) -> None:
    if isinstance(value, str):
        target.string_value = value
    elif isinstance(value, bool):  # before int: bool is an int
        target.bool_value = value
    elif isinstance(value, int) and _INT64[0] <= value <= _INT64[1]:
        target.int_value = value
    elif isinstance(value, float):
        target.double_value = value
    elif isinstance(value, (list, tuple)):
        array = target.array_value
        array.SetInParent()  # an empty list stays an (empty) array, not an unset value
        for item in value:
            element = array.values.add()
            if item is not None:
                _fill_value(element, item)
    elif isinstance(value, dict):
        kvlist = target.kvlist_value
        kvlist.SetInParent()
        _fill_attributes(kvlist.values, value)
    elif value is not None:  # an integer beyond int64 or another type: keep it as text rather than lose it
        target.string_value = str(value)
