"""Builders of OTLP protobuf requests for the decoder tests (plain Python values in, messages out)."""

from __future__ import annotations

from typing import Any

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import (
    AnyValue,
    ArrayValue,
    InstrumentationScope,
    KeyValue,
    KeyValueList,
)
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord, ResourceLogs, ScopeLogs
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

TRACE_ID = bytes.fromhex("0af7651916cd43dd8448eb211c80319c")
START = 1_700_000_000_000_000_000


def any_value(value: Any) -> AnyValue:
    """AnyValue for a Python value: None -> empty, bytes -> bytes_value, list -> array, dict -> kvlist."""
    if value is None:
        return AnyValue()
    if isinstance(value, bool):
        return AnyValue(bool_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=value)
    if isinstance(value, float):
        return AnyValue(double_value=value)
    if isinstance(value, bytes):
        return AnyValue(bytes_value=value)
    if isinstance(value, list):
        return AnyValue(array_value=ArrayValue(values=[any_value(item) for item in value]))
    if isinstance(value, dict):
        return AnyValue(kvlist_value=KeyValueList(values=key_values(value)))
    return AnyValue(string_value=value)


def key_values(attributes: dict[str, Any]) -> list[KeyValue]:
    return [KeyValue(key=key, value=any_value(value)) for key, value in attributes.items()]


def span(index: int, **fields: Any) -> Span:
    """A valid span (``span_id`` derived from ``index``) with ``fields`` overriding or adding fields."""
    attributes = fields.pop("attributes", {"index": index})
    defaults: dict[str, Any] = {
        "trace_id": TRACE_ID,
        "span_id": (index + 1).to_bytes(8, "big"),
        "name": f"span {index}",
        "kind": Span.SPAN_KIND_INTERNAL,
        "start_time_unix_nano": START + index * 1000,
        "end_time_unix_nano": START + index * 1000 + 500,
    }
    defaults.update(fields)
    return Span(attributes=key_values(attributes), **defaults)


def traces_request(
    spans: list[Span], resource: dict[str, Any] | None = None, scope: tuple[str, str] = ("test.scope", "1.2")
) -> ExportTraceServiceRequest:
    return ExportTraceServiceRequest(
        resource_spans=[
            ResourceSpans(
                resource=Resource(attributes=key_values(resource or {"service.name": "decoder-test"})),
                scope_spans=[ScopeSpans(scope=InstrumentationScope(name=scope[0], version=scope[1]), spans=spans)],
            )
        ]
    )


def logs_request(records: list[LogRecord], resource: dict[str, Any] | None = None) -> ExportLogsServiceRequest:
    return ExportLogsServiceRequest(
        resource_logs=[
            ResourceLogs(
                resource=Resource(attributes=key_values(resource or {"service.name": "decoder-test"})),
                scope_logs=[ScopeLogs(scope=InstrumentationScope(name="test.logs"), log_records=records)],
            )
        ]
    )


def _varint(number: int) -> bytes:
    out = bytearray()
    while True:
        byte = number & 0x7F
        number >>= 7
        if number:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _length_delimited(field_number: int, payload: bytes) -> bytes:
    return _varint(field_number << 3 | 2) + _varint(len(payload)) + payload


def nested_kvlist_bytes(depth: int) -> bytes:
    """Serialized AnyValue: ``depth`` kvlists nested inside each other, a string at the bottom.

    Built on the wire directly because protobuf refuses to serialize messages this deep.
    """
    value = _length_delimited(1, b"bottom")  # AnyValue.string_value
    for _ in range(depth):
        key_value = _length_delimited(1, b"k") + _length_delimited(2, value)  # KeyValue{key, value}
        value = _length_delimited(6, _length_delimited(1, key_value))  # AnyValue.kvlist_value{values}
    return value


def traces_request_with_raw_attribute(value_bytes: bytes) -> bytes:
    """A serialized one-span ExportTraceServiceRequest whose attribute ``deep`` has the given AnyValue bytes."""
    base = span(0, attributes={}).SerializeToString()
    raw_span = base + _length_delimited(9, _length_delimited(1, b"deep") + _length_delimited(2, value_bytes))
    scope_spans = _length_delimited(2, raw_span)
    resource_spans = _length_delimited(2, scope_spans)
    return _length_delimited(1, resource_spans)
