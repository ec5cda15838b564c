"""Traffic for the OTLP export tests: spans and log records holding every field a store keeps, sent through the
real OpenTelemetry SDK and its OTLP exporters (gRPC and HTTP/protobuf) to a running ``tracegrade serve``.

What it covers: every span kind and status, events and links with attributes (and a link's trace state), a
span's trace state (inherited from a remote parent), every attribute value type the SDK sends (str, bool, int,
float, homogeneous arrays; log records add bytes, maps, nested and empty arrays and empty values), unicode
(CJK, emoji, right-to-left, combining marks, newlines), two resources and three scopes (one with attributes,
which a store does not keep), and the dropped counts of attributes, events and links the SDK's limits produce.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from opentelemetry._logs import LogRecord, SeverityNumber
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import (
    Link,
    NonRecordingSpan,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
    TraceState,
    set_span_in_context,
)

__all__ = ["SPANS_PER_SEND", "Sent", "send_rich_traffic"]

SPANS_PER_SEND = 9
UNICODE = "日本語 🚀 שלום e\u0301 tab\tline\nend"


@dataclass
class Sent:
    """The trace ids of what one ``send_rich_traffic`` sent, and its number of spans and log records."""

    trace_ids: list[str] = field(default_factory=list)
    spans: int = 0
    logs: int = 0


def send_rich_traffic(http_url: str, grpc_target: str, *, token: str | None = None, marker: str = "") -> Sent:
    """Send ``SPANS_PER_SEND`` spans (three traces) and four log records; ``marker`` goes into every service
    name, so two tenants' traffic can be told apart."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    sent = Sent()
    limits = SpanLimits(
        max_span_attributes=16, max_events=3, max_links=2, max_event_attributes=2, max_link_attributes=2
    )
    first = TracerProvider(
        resource=Resource.create(
            {
                "service.name": f"export-α{marker}",
                "deployment.environment": UNICODE,
                "host.cpus": 8,
                "sample.rate": 0.25,
                "feature.on": True,
                "region.list": ["eu", "us"],
            }
        ),
        span_limits=limits,
    )
    grpc = GrpcSpanExporter(
        endpoint=grpc_target, insecure=True, headers=tuple((k.lower(), v) for k, v in headers.items())
    )
    first.add_span_processor(SimpleSpanProcessor(grpc))
    second = TracerProvider(resource=Resource.create({"service.name": f"export-β{marker}", "pod.ordinal": -3}))
    second.add_span_processor(SimpleSpanProcessor(HttpSpanExporter(endpoint=f"{http_url}/v1/traces", headers=headers)))

    tracer = first.get_tracer("tests.export.α", "1.2.3", attributes={"scope.attr": "kept"})
    other_scope = first.get_tracer("tests.export.other")
    remote = SpanContext(
        trace_id=0x0AF7651916CD43DD8448EB211C80319C,
        span_id=0xB7AD6B7169203331,
        is_remote=True,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
        trace_state=TraceState([("vendor", "v1"), ("other", "ü2".encode().hex())]),
    )
    linked = SpanContext(
        trace_id=0x11111111111111112222222222222222,
        span_id=0x3333333333333333,
        is_remote=True,
        trace_state=TraceState([("linked", "yes")]),
    )
    every_type = {
        "text": UNICODE,
        "empty.text": "",
        "flag": False,
        "count": -(2**63),
        "big": 2**63 - 1,
        "ratio": 3.5,
        "whole.float": 2.0,
        "tiny": 5e-324,
        "texts": ["a", UNICODE, ""],
        "flags": [True, False],
        "counts": [1, -2, 3],
        "ratios": [0.5, -1.25],
        "empty.list": [],
    }
    with tracer.start_as_current_span(
        f"root {UNICODE}", context=set_span_in_context(NonRecordingSpan(remote)), kind=SpanKind.SERVER
    ) as root:
        root.set_attributes(every_type)
        for number in range(8):  # 13 + 8 = 21 attributes, 16 kept: 5 dropped
            root.set_attribute(f"extra.{number}", number)
        for number in range(5):  # 3 kept, 2 dropped; each event's third attribute dropped
            root.add_event(f"event {number} ✓", {"a": number, "b": UNICODE, "c": [1.5]}, timestamp=None)
        root.set_status(Status(StatusCode.ERROR, f"failed: {UNICODE}"))
        sent.trace_ids.append(f"{root.get_span_context().trace_id:032x}")
        links = [Link(linked, {"link.kind": "follows", "link.n": 1, "link.x": 3}) for _ in range(3)]  # 2 kept
        with tracer.start_as_current_span("client call", kind=SpanKind.CLIENT, links=links) as client:
            client.set_status(Status(StatusCode.OK))
        with other_scope.start_as_current_span("producer", kind=SpanKind.PRODUCER):
            pass
        with tracer.start_as_current_span("consumer", kind=SpanKind.CONSUMER):
            pass
        with tracer.start_as_current_span("internal"):
            pass
    with tracer.start_as_current_span("plain root") as plain:
        sent.trace_ids.append(f"{plain.get_span_context().trace_id:032x}")
        with tracer.start_as_current_span("child"):
            pass
    beta = second.get_tracer("tests.export.β", "0.1")
    with beta.start_as_current_span("β root", attributes={"β": "βeta", "n": 7}) as beta_root:
        sent.trace_ids.append(f"{beta_root.get_span_context().trace_id:032x}")
        with beta.start_as_current_span("β child", kind=SpanKind.SERVER):
            pass
    first.shutdown()
    second.shutdown()
    sent.spans = SPANS_PER_SEND
    sent.logs = _send_logs(http_url, headers, sent.trace_ids[0], marker)
    return sent


def _send_logs(http_url: str, headers: dict[str, str], trace_id: str, marker: str) -> int:
    provider = LoggerProvider(resource=Resource.create({"service.name": f"export-logs{marker}", "ordinal": 1}))
    provider.add_log_record_processor(
        SimpleLogRecordProcessor(OTLPLogExporter(endpoint=f"{http_url}/v1/logs", headers=headers))
    )
    logger = provider.get_logger("tests.export.logs", "9.9")
    correlated = SpanContext(trace_id=int(trace_id, 16), span_id=0x00F067AA0BA902B7, is_remote=True)
    context = set_span_in_context(NonRecordingSpan(correlated))
    records: list[dict[str, Any]] = [
        {"body": f"hello {UNICODE}", "severity_number": SeverityNumber.INFO, "severity_text": "INFO"},
        {
            "body": {
                "role": "user",
                "parts": [{"text": UNICODE}, [1, 2.5, True, None]],
                "empty": {},
                "raw": b"\x00\xff",
            },
            "attributes": {"blob": b"\x01\x02", "map": {"k": [1, 2]}, "nested": [[1], []], "nothing": None},
            "event_name": "gen_ai.user.message",
            "context": context,
        },
        {"body": [UNICODE, 3, -1.5], "severity_number": SeverityNumber.ERROR, "context": context},
        {"body": None, "attributes": {"only": "attributes"}, "timestamp": 1_767_225_600_123_456_789},
    ]
    logger_records = [LogRecord(**record) for record in records]
    for record in logger_records:
        logger.emit(record)
    provider.shutdown()
    return len(records)
