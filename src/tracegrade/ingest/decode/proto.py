"""OTLP protobuf (bytes or already-parsed gRPC messages) -> SpanRecord / LogRecordData.

The span loop is the receiver's hot path: fields are read once into locals and the per-attribute work
lives in ``proto_values.attributes_from_proto``.
"""

from __future__ import annotations

from typing import Any

from google.protobuf.message import Message
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tracegrade.errors import DecodeError, TracegradeError
from tracegrade.ingest.decode.checks import (
    KIND_BY_NUMBER,
    STATUS_BY_NUMBER,
    bad_id_bytes,
    guarded,
    log_times_problem,
    span_times_problem,
    stored_count,
)
from tracegrade.ingest.decode.limits import DEFAULT_LIMITS, DecodeLimits, clip_text
from tracegrade.ingest.decode.proto_diagnose import explain_parse_failure
from tracegrade.ingest.decode.proto_values import attributes_from_proto, value_from_proto
from tracegrade.ingest.decode.results import DecodedLogs, DecodedTraces, Rejection
from tracegrade.models.span import LogRecordData, SpanEvent, SpanLink, SpanRecord

__all__ = [
    "decode_logs_message",
    "decode_logs_proto",
    "decode_traces_message",
    "decode_traces_proto",
    "parse_proto",
]


def parse_proto(body: bytes | bytearray | memoryview, message_type: type[Message]) -> Any:
    """Parse ``body`` as ``message_type``; any failure becomes a DecodeError that says where and why."""
    if not isinstance(body, (bytes, bytearray, memoryview)):
        raise DecodeError(f"a protobuf body must be bytes, got {type(body).__name__}")
    data = bytes(body)
    message = message_type()
    try:
        message.ParseFromString(data)
    except Exception as exc:  # the protobuf runtime's own errors vary by implementation
        raise DecodeError(explain_parse_failure(data, message_type.DESCRIPTOR, exc)) from None
    return message


@guarded
def decode_traces_proto(body: bytes, limits: DecodeLimits = DEFAULT_LIMITS) -> DecodedTraces:
    """Decode a serialized ExportTraceServiceRequest (the body of ``POST /v1/traces``, protobuf)."""
    return decode_traces_message(parse_proto(body, ExportTraceServiceRequest), limits)


@guarded
def decode_logs_proto(body: bytes, limits: DecodeLimits = DEFAULT_LIMITS) -> DecodedLogs:
    """Decode a serialized ExportLogsServiceRequest (the body of ``POST /v1/logs``, protobuf)."""
    return decode_logs_message(parse_proto(body, ExportLogsServiceRequest), limits)


@guarded
def decode_traces_message(msg: Any, limits: DecodeLimits = DEFAULT_LIMITS) -> DecodedTraces:
    """Decode an already-parsed ExportTraceServiceRequest (what the gRPC service receives)."""
    total = sum(len(ss.spans) for rs in msg.resource_spans for ss in rs.scope_spans)
    if total > limits.max_spans_per_request:
        raise DecodeError(
            f"the request holds {total} spans, more than the limit of {limits.max_spans_per_request}; "
            "send smaller batches (for example the BatchSpanProcessor's max_export_batch_size)"
        )
    spans: list[SpanRecord] = []
    rejected: list[Rejection] = []
    max_events = limits.max_events_per_span
    max_links = limits.max_links_per_span
    max_text, quick_text = limits.max_attribute_value_bytes, limits.quick_text_chars  # names are cut as values are
    append = spans.append
    for ri, resource_spans in enumerate(msg.resource_spans):
        resource, resource_url, resource_dropped = _resource(resource_spans, limits)
        for si, scope_spans in enumerate(resource_spans.scope_spans):
            scope = scope_spans.scope
            scope_name = scope.name
            scope_version = scope.version
            scope_attributes, scope_url, scope_dropped = _scope(scope_spans, limits)
            for pi, span in enumerate(scope_spans.spans):
                trace_id = span.trace_id
                span_id = span.span_id
                parent = span.parent_span_id
                name = span.name
                start = span.start_time_unix_nano
                end = span.end_time_unix_nano
                problem = (
                    bad_id_bytes(trace_id, "traceId", 16)
                    or bad_id_bytes(span_id, "spanId", 8)
                    or (_bad_parent(parent) if parent else None)
                    or (None if name else "name is missing or empty")
                    or span_times_problem(start, end)
                )
                if problem is None:
                    try:
                        events, dropped_events = _events(span.events, max_events, limits)
                        links, dropped_links = _links(span.links, max_links, limits)
                    except _BadLink as bad:
                        problem = bad.reason
                if problem is not None:
                    rejected.append(
                        Rejection(
                            f"resourceSpans[{ri}].scopeSpans[{si}].spans[{pi}]",
                            problem,
                            span_id.hex() or None,
                        )
                    )
                    continue
                attributes, dropped = attributes_from_proto(span.attributes, limits)
                status = span.status
                message = status.message
                append(
                    SpanRecord(
                        trace_id=trace_id.hex(),
                        span_id=span_id.hex(),
                        name=name if len(name) <= quick_text else clip_text(name, max_text),
                        start_ns=start,
                        end_ns=end,
                        parent_span_id=parent.hex() if parent and parent.strip(b"\0") else None,
                        kind=KIND_BY_NUMBER.get(span.kind, "UNSPECIFIED"),
                        attributes=attributes,
                        events=events,
                        links=links,
                        status_code=STATUS_BY_NUMBER.get(status.code, "UNSET"),
                        status_message=message if len(message) <= quick_text else clip_text(message, max_text),
                        resource=resource,
                        scope_name=scope_name,
                        scope_version=scope_version,
                        trace_state=span.trace_state,
                        flags=span.flags,
                        dropped_attributes_count=stored_count(span.dropped_attributes_count + dropped),
                        dropped_events_count=stored_count(span.dropped_events_count + dropped_events),
                        dropped_links_count=stored_count(span.dropped_links_count + dropped_links),
                        resource_schema_url=resource_url,
                        resource_dropped_attributes_count=resource_dropped,
                        scope_attributes=scope_attributes,  # shared by the spans of one scope block
                        scope_schema_url=scope_url,
                        scope_dropped_attributes_count=scope_dropped,
                    )
                )
    return DecodedTraces(spans, rejected)


def _resource(block: Any, limits: DecodeLimits) -> tuple[dict[str, Any], str, int]:
    """A ResourceSpans' or ResourceLogs' resource: (attributes, schema URL, dropped attribute count, what the
    sender dropped plus what the count limit dropped)."""
    resource = block.resource
    attributes, dropped = attributes_from_proto(resource.attributes, limits)
    url = clip_text(block.schema_url, limits.max_attribute_value_bytes)
    return attributes, url, stored_count(resource.dropped_attributes_count + dropped)


def _scope(block: Any, limits: DecodeLimits) -> tuple[dict[str, Any], str, int]:
    """A ScopeSpans' or ScopeLogs' instrumentation scope: (attributes, schema URL, dropped attribute count)."""
    scope = block.scope
    attributes, dropped = attributes_from_proto(scope.attributes, limits)
    url = clip_text(block.schema_url, limits.max_attribute_value_bytes)
    return attributes, url, stored_count(scope.dropped_attributes_count + dropped)


def _bad_parent(parent: bytes) -> str | None:
    if len(parent) != 8:
        return f"parentSpanId must be 8 bytes when set, got {len(parent)}"
    return None


class _BadLink(TracegradeError):
    def __init__(self, reason: str) -> None:
        self.reason = reason


def _events(events: Any, max_events: int, limits: DecodeLimits) -> tuple[list[SpanEvent], int]:
    if not events:
        return [], 0
    dropped = max(0, len(events) - max_events)
    out = []
    for event in events[:max_events] if dropped else events:
        attributes, dropped_attributes = attributes_from_proto(event.attributes, limits)
        out.append(
            SpanEvent(
                clip_text(event.name, limits.max_attribute_value_bytes),
                event.time_unix_nano,
                attributes,
                event.dropped_attributes_count + dropped_attributes,
            )
        )
    return out, dropped


def _links(links: Any, max_links: int, limits: DecodeLimits) -> tuple[list[SpanLink], int]:
    if not links:
        return [], 0
    dropped = max(0, len(links) - max_links)
    out = []
    for index, link in enumerate(links[:max_links] if dropped else links):
        problem = bad_id_bytes(link.trace_id, f"links[{index}].traceId", 16) or bad_id_bytes(
            link.span_id, f"links[{index}].spanId", 8
        )
        if problem:
            raise _BadLink(problem)
        attributes, dropped_attributes = attributes_from_proto(link.attributes, limits)
        out.append(
            SpanLink(
                link.trace_id.hex(),
                link.span_id.hex(),
                attributes,
                link.trace_state,
                link.dropped_attributes_count + dropped_attributes,
            )
        )
    return out, dropped


@guarded
def decode_logs_message(msg: Any, limits: DecodeLimits = DEFAULT_LIMITS) -> DecodedLogs:
    """Decode an already-parsed ExportLogsServiceRequest (what the gRPC logs service receives)."""
    total = sum(len(sl.log_records) for rl in msg.resource_logs for sl in rl.scope_logs)
    if total > limits.max_log_records_per_request:
        raise DecodeError(
            f"the request holds {total} log records, more than the limit of "
            f"{limits.max_log_records_per_request}; send smaller batches"
        )
    records: list[LogRecordData] = []
    rejected: list[Rejection] = []
    for ri, resource_logs in enumerate(msg.resource_logs):
        resource, resource_url, resource_dropped = _resource(resource_logs, limits)
        for si, scope_logs in enumerate(resource_logs.scope_logs):
            scope_name = scope_logs.scope.name
            scope_version = scope_logs.scope.version
            scope_attributes, scope_url, scope_dropped = _scope(scope_logs, limits)
            for li, record in enumerate(scope_logs.log_records):
                trace_id = record.trace_id
                span_id = record.span_id
                problem = (
                    (bad_id_bytes(trace_id, "traceId", 16) if trace_id.strip(b"\0") else None)
                    or (bad_id_bytes(span_id, "spanId", 8) if span_id.strip(b"\0") else None)
                    or log_times_problem(record.time_unix_nano, record.observed_time_unix_nano)
                )
                if problem:
                    rejected.append(
                        Rejection(
                            f"resourceLogs[{ri}].scopeLogs[{si}].logRecords[{li}]", problem, span_id.hex() or None
                        )
                    )
                    continue
                attributes, dropped = attributes_from_proto(record.attributes, limits)
                event_name = getattr(record, "event_name", "") or attributes.get("event.name") or ""
                observed = record.observed_time_unix_nano
                records.append(
                    LogRecordData(
                        time_ns=record.time_unix_nano or observed,
                        trace_id=trace_id.hex() if trace_id.strip(b"\0") else None,
                        span_id=span_id.hex() if span_id.strip(b"\0") else None,
                        event_name=event_name if isinstance(event_name, str) else str(event_name),
                        body=value_from_proto(record.body, limits) if record.HasField("body") else None,
                        attributes=attributes,
                        severity_number=record.severity_number,
                        severity_text=record.severity_text,
                        resource=resource,  # shared by the spans of one resource block (records are not mutated)
                        scope_name=scope_name,
                        observed_time_ns=observed,
                        flags=record.flags,
                        dropped_attributes_count=stored_count(record.dropped_attributes_count + dropped),
                        scope_version=scope_version,
                        resource_schema_url=resource_url,
                        resource_dropped_attributes_count=resource_dropped,
                        scope_attributes=scope_attributes,  # shared by the records of one scope block
                        scope_schema_url=scope_url,
                        scope_dropped_attributes_count=scope_dropped,
                    )
                )
    return DecodedLogs(records, rejected)
