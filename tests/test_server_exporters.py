"""The receiver against the real OpenTelemetry OTLP exporters (gRPC and HTTP/protobuf), field by field."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter as GrpcLogExporter
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
from opentelemetry.exporter.otlp.proto.http import Compression as HttpCompression
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter as HttpLogExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter
from opentelemetry.sdk._logs import LoggerProvider, LoggingHandler
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags, TraceState

from tests.support.server_inprocess import running_server
from tracegrade.models.span import SpanRecord
from tracegrade.store import TraceStore

RESOURCE = Resource.create({"service.name": "receiver-test", "deployment.environment": "ci", "replicas": 3})

EVERY_ATTRIBUTE_TYPE: dict[str, Any] = {
    "text": "héllo wörld ✓",
    "empty.text": "",
    "flag": True,
    "count": 42,
    "int64.max": 2**63 - 1,
    "int64.min": -(2**63),
    "ratio": 0.125,
    "texts": ("a", "b", "ç"),
    "flags": (True, False),
    "counts": (1, -2, 3),
    "ratios": (1.5, -0.25),
}


def _exporter(protocol: str, server: Any) -> Any:
    if protocol == "grpc":
        return GrpcSpanExporter(endpoint=server.grpc_target, insecure=True, compression=None)
    if protocol == "grpc-gzip":
        from grpc import Compression

        return GrpcSpanExporter(endpoint=server.grpc_target, insecure=True, compression=Compression.Gzip)
    compression = HttpCompression.Gzip if protocol == "http-gzip" else HttpCompression.NoCompression
    return HttpSpanExporter(endpoint=f"{server.http_url}/v1/traces", compression=compression)


def _emit_spans(provider: TracerProvider) -> None:
    """A root with every attribute type and an event, a child with a link, an error and an exception."""
    tracer = provider.get_tracer("tests.receiver", "1.2.3")
    linked = SpanContext(
        trace_id=0x0AF7651916CD43DD8448EB211C80319C,
        span_id=0xB7AD6B7169203331,
        is_remote=True,
        trace_flags=TraceFlags(1),
        trace_state=TraceState([("vendor", "value")]),
    )
    with tracer.start_as_current_span("invoke_agent planner", kind=SpanKind.SERVER, attributes=EVERY_ATTRIBUTE_TYPE):
        with tracer.start_as_current_span(
            "execute_tool search",
            kind=SpanKind.CLIENT,
            links=[Link(linked, {"link.reason": "follows", "link.weight": 2})],
        ) as child:
            child.add_event("tool.started", {"query": "weather", "attempt": 1, "ids": (7, 8)})
            child.set_attribute("gen_ai.tool.name", "search")
            child.record_exception(ValueError("search backend down"))
            child.set_status(Status(StatusCode.ERROR, "tool failed"))
        for kind in (SpanKind.PRODUCER, SpanKind.CONSUMER, SpanKind.INTERNAL):
            with tracer.start_as_current_span(f"kind {kind.name}", kind=kind) as span:
                span.set_status(Status(StatusCode.OK))


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def _expected(span: ReadableSpan) -> dict[str, Any]:
    context = span.get_span_context()
    status_names = {StatusCode.UNSET: "UNSET", StatusCode.OK: "OK", StatusCode.ERROR: "ERROR"}
    return {
        "trace_id": f"{context.trace_id:032x}",
        "span_id": f"{context.span_id:016x}",
        "parent_span_id": f"{span.parent.span_id:016x}" if span.parent else None,
        "name": span.name,
        "kind": span.kind.name,
        "start_ns": span.start_time,
        "end_ns": span.end_time,
        "attributes": {k: _plain(v) for k, v in span.attributes.items()},
        "events": [(e.name, e.timestamp, {k: _plain(v) for k, v in e.attributes.items()}) for e in span.events],
        "links": [  # the OTel Python exporters do not send a link's trace_state
            (
                f"{link.context.trace_id:032x}",
                f"{link.context.span_id:016x}",
                {k: _plain(v) for k, v in link.attributes.items()},
            )
            for link in span.links
        ],
        "status": (status_names[span.status.status_code], span.status.description or ""),
        "resource": {k: _plain(v) for k, v in span.resource.attributes.items()},
        "scope": (span.instrumentation_scope.name, span.instrumentation_scope.version),
        "trace_state": context.trace_state.to_header(),
    }


def _actual(span: SpanRecord) -> dict[str, Any]:
    return {
        "trace_id": span.trace_id,
        "span_id": span.span_id,
        "parent_span_id": span.parent_span_id,
        "name": span.name,
        "kind": span.kind,
        "start_ns": span.start_ns,
        "end_ns": span.end_ns,
        "attributes": span.attributes,
        "events": [(e.name, e.time_ns, e.attributes) for e in span.events],
        "links": [(link.trace_id, link.span_id, link.attributes) for link in span.links],
        "status": (span.status_code, span.status_message),
        "resource": span.resource,
        "scope": (span.scope_name, span.scope_version),
        "trace_state": span.trace_state,
    }


def _stored_spans(store_path: Path, trace_ids: list[str]) -> dict[str, SpanRecord]:
    store = TraceStore(store_path, read_only=True)
    try:
        loaded = store.load_spans(trace_ids)
    finally:
        store.close()
    return {span.span_id: span for spans in loaded.values() for span in spans}


@pytest.mark.parametrize("protocol", ["grpc", "grpc-gzip", "http", "http-gzip"])
def test_spans_from_real_exporters_are_stored_field_by_field(tmp_path: Path, protocol: str) -> None:
    sent = InMemorySpanExporter()
    with running_server(tmp_path / "traces.duckdb") as server:
        provider = TracerProvider(resource=RESOURCE)
        provider.add_span_processor(SimpleSpanProcessor(sent))
        provider.add_span_processor(BatchSpanProcessor(_exporter(protocol, server)))
        _emit_spans(provider)
        assert provider.force_flush(30_000)
        provider.shutdown()
    expected = {f"{s.get_span_context().span_id:016x}": _expected(s) for s in sent.get_finished_spans()}
    assert len(expected) == 5
    trace_ids = sorted({e["trace_id"] for e in expected.values()})
    stored = _stored_spans(tmp_path / "traces.duckdb", trace_ids)
    assert sorted(stored) == sorted(expected)
    for span_id, fields in expected.items():
        assert _actual(stored[span_id]) == fields, f"span {fields['name']} differs"


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_log_records_from_real_exporters_are_stored_with_their_span(tmp_path: Path, protocol: str) -> None:
    with running_server(tmp_path / "logs.duckdb") as server:
        if protocol == "grpc":
            exporter = GrpcLogExporter(endpoint=server.grpc_target, insecure=True)
        else:
            exporter = HttpLogExporter(endpoint=f"{server.http_url}/v1/logs")
        logger_provider = LoggerProvider(resource=RESOURCE)
        logger_provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
        logger = logging.getLogger(f"tests.receiver.{protocol}")
        logger.propagate = False
        logger.setLevel(logging.INFO)
        handler = LoggingHandler(logger_provider=logger_provider)
        logger.addHandler(handler)
        tracer = TracerProvider(resource=RESOURCE).get_tracer("tests.receiver")
        try:
            with tracer.start_as_current_span("chat model") as span:
                logger.warning("the model said %s", "hello", extra={"gen_ai.system": "openai", "turn": 2})
                context = span.get_span_context()
        finally:
            logger.removeHandler(handler)
            logger_provider.shutdown()
    trace_id, span_id = f"{context.trace_id:032x}", f"{context.span_id:016x}"
    store = TraceStore(tmp_path / "logs.duckdb", read_only=True)
    try:
        records = store.load_logs([trace_id])[trace_id]
    finally:
        store.close()
    assert len(records) == 1
    record = records[0]
    assert (record.trace_id, record.span_id) == (trace_id, span_id)
    assert record.body == "the model said hello"
    assert record.severity_text == "WARN"
    assert record.severity_number == 13
    assert record.attributes["gen_ai.system"] == "openai"
    assert record.attributes["turn"] == 2
    assert record.resource["service.name"] == "receiver-test"
