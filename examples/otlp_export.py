"""Export an example's spans over OTLP when the standard OpenTelemetry environment asks for it.

With ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) set, as the README shows
next to ``tracegrade serve``, every span the example's agent emits (or, with ``export_recorded``, every
recorded span it grades) also goes to that endpoint through the standard OTLP exporter: http/protobuf
unless ``OTEL_EXPORTER_OTLP_PROTOCOL`` (or ``..._TRACES_PROTOCOL``) says ``grpc``. The exporters read the
endpoint, headers (``OTEL_EXPORTER_OTLP_HEADERS``, e.g. a bearer token) and TLS settings themselves.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from tracegrade import SpanRecord

__all__ = ["export_recorded", "exporting"]

_PROTOCOLS = ("http/protobuf", "grpc")


def _setting(name: str) -> str:
    """The traces-specific variable wins over the general one, as in the OpenTelemetry specification."""
    return os.environ.get(f"OTEL_EXPORTER_OTLP_TRACES_{name}") or os.environ.get(f"OTEL_EXPORTER_OTLP_{name}") or ""


def _exporter(protocol: str) -> Any:
    try:
        if protocol == "grpc":
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
        else:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    except ImportError:
        package = "opentelemetry-exporter-otlp-proto-" + ("grpc" if protocol == "grpc" else "http")
        raise SystemExit(
            f"OTEL_EXPORTER_OTLP_ENDPOINT is set, but {package} is not installed: pip install {package}"
        ) from None
    return OTLPSpanExporter()


def _configured_exporter() -> Any | None:
    """The OTLP span exporter the environment asks for, or None when no endpoint is set."""
    if not _setting("ENDPOINT"):
        return None
    protocol = _setting("PROTOCOL") or "http/protobuf"
    if protocol not in _PROTOCOLS:
        raise SystemExit(f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol!r} is not supported here; use one of {_PROTOCOLS}")
    return _exporter(protocol)


@contextmanager
def exporting(collector: Any) -> Iterator[None]:
    """Within the block, the collector's tracer provider also exports to the configured OTLP endpoint.

    On leaving, every exported span has been sent (the processor is flushed and shut down).
    """
    exporter = _configured_exporter()
    if exporter is None:
        yield
        return
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    processor = BatchSpanProcessor(exporter)
    collector.tracer_provider.add_span_processor(processor)
    try:
        yield
    finally:
        processor.shutdown()  # flushes what is still queued


def export_recorded(spans: Sequence[SpanRecord]) -> None:
    """Send already-recorded spans to the configured OTLP endpoint (nothing when none is set)."""
    exporter = _configured_exporter()
    if exporter is None:
        return
    try:
        exporter.export([_readable(span) for span in spans])
    finally:
        exporter.shutdown()


def _readable(record: SpanRecord) -> Any:
    """A SpanRecord as the SDK's ReadableSpan, the form the standard exporters encode."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import Event, ReadableSpan
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope
    from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags

    def context(trace_id: str, span_id: str) -> SpanContext:
        return SpanContext(int(trace_id, 16), int(span_id, 16), is_remote=False, trace_flags=TraceFlags(1))

    code = StatusCode[record.status_code] if record.status_code in StatusCode.__members__ else StatusCode.UNSET
    return ReadableSpan(
        name=record.name,
        context=context(record.trace_id, record.span_id),
        parent=context(record.trace_id, record.parent_span_id) if record.parent_span_id else None,
        resource=Resource(record.resource),
        attributes=record.attributes,
        events=[Event(event.name, event.attributes, event.time_ns) for event in record.events],
        links=[Link(context(link.trace_id, link.span_id), link.attributes) for link in record.links],
        kind=SpanKind[record.kind] if record.kind in SpanKind.__members__ else SpanKind.INTERNAL,
        status=Status(code, record.status_message if code is StatusCode.ERROR else None),
        start_time=record.start_ns,
        end_time=record.end_ns,
        instrumentation_scope=InstrumentationScope(record.scope_name, record.scope_version or None),
    )
