"""OpenTelemetry log records into a :class:`~tracegrade.capture.collector.TrajectoryCollector`.

Instrumentations that follow the GenAI event form (and ADK with ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``
set to ``true``/``EVENT_ONLY``) put message content in *log records*, which a span processor never sees. A
:class:`CollectorLogProcessor` on a ``LoggerProvider`` hands each record to the collector, which joins it to
its span by trace/span id exactly as the receiver does with ``/v1/logs``.

The SDK's processor interface changed twice between the versions tracegrade supports: 1.25-1.34 call
``emit(LogData)``, 1.35-1.38 ``on_emit(LogData)`` and 1.39+ ``on_emit(ReadWriteLogRecord)``. ``LogData`` and
``ReadWriteLogRecord`` both carry ``log_record`` and ``instrumentation_scope``; the resource sits on the record
in the first and beside it in the second. The processor implements both methods and reads either shape.

**The process's records.** Code that logs through the global API (``opentelemetry._logs.get_logger``) reaches
only the global ``LoggerProvider``. :func:`subscribe_process_logs` registers one shared processor there (an SDK
provider the application installed, or, when none is installed, an SDK provider tracegrade installs as the
global one) that fans records out to every subscribed collector; collectors are held weakly and unsubscribed
when their tracer provider shuts down.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable
from typing import Any

from opentelemetry import trace
from opentelemetry._logs import get_logger_provider, set_logger_provider
from opentelemetry.sdk._logs import LoggerProvider, LogRecordProcessor

from tracegrade.models.span import LogRecordData

__all__ = ["CollectorLogProcessor", "log_record_data", "subscribe_process_logs", "unsubscribe_process_logs"]

log = logging.getLogger("tracegrade.capture")

LogSink = Callable[[LogRecordData], None]


def _plain(value: Any) -> Any:
    """An attribute or body value as plain JSON-like data (the SDK hands out bounded mappings and tuples)."""
    if isinstance(value, dict) or hasattr(value, "items"):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, bytes):
        return value.hex()
    return value


def log_record_data(emitted: Any) -> LogRecordData | None:
    """The :class:`LogRecordData` of an SDK ``LogData`` or ``ReadWriteLogRecord``; None for a record that belongs
    to no span (it could never be joined). A record without ids takes the span current while it is emitted:
    processors run synchronously in the emitting thread, and SDKs before 1.35 never filled the ids in."""
    record = emitted.log_record
    trace_id = getattr(record, "trace_id", None) or 0
    span_id = getattr(record, "span_id", None) or 0
    if not trace_id or not span_id:
        current = trace.get_current_span().get_span_context()
        trace_id, span_id = current.trace_id, current.span_id
    if not trace_id or not span_id:
        return None
    resource = getattr(emitted, "resource", None) or getattr(record, "resource", None)
    scope = getattr(emitted, "instrumentation_scope", None)
    attributes = _plain(record.attributes or {})
    severity = getattr(record, "severity_number", None)
    return LogRecordData(
        time_ns=int(record.timestamp or record.observed_timestamp or 0),
        trace_id=f"{trace_id:032x}",
        span_id=f"{span_id:016x}",
        event_name=str(getattr(record, "event_name", None) or attributes.get("event.name") or ""),
        body=_plain(record.body),
        attributes=attributes,
        severity_number=int(severity.value) if severity is not None else 0,
        severity_text=str(record.severity_text or ""),
        resource=_plain(resource.attributes) if resource is not None else {},
        scope_name=str(scope.name) if scope is not None else "",
        observed_time_ns=int(record.observed_timestamp or 0),
        flags=int(getattr(record, "trace_flags", None) or 0),
        # the rest of the envelope, as the SDK's OTLP exporter sends it (scope attributes from SDK 1.27)
        scope_version=str(getattr(scope, "version", None) or ""),
        resource_schema_url=str(getattr(resource, "schema_url", None) or ""),
        scope_attributes=_plain(getattr(scope, "attributes", None) or {}),
        scope_schema_url=str(getattr(scope, "schema_url", None) or ""),
    )


class CollectorLogProcessor(LogRecordProcessor):
    """Hands every emitted log record to ``sink`` (a collector's :meth:`add_log`); never raises into the host."""

    def __init__(self, sink: LogSink) -> None:
        self._sink = sink

    def on_emit(self, log_record: Any) -> None:  # SDK 1.35+
        try:
            data = log_record_data(log_record)
            if data is not None:
                self._sink(data)
        except Exception as exc:
            log.debug("a log record could not be collected: %s", exc)

    emit = on_emit  # SDK 1.25-1.34 call emit(LogData)

    def shutdown(self) -> None:
        return None

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


class _ProcessFanOut:
    """The one processor on the global provider: forwards each record to every live subscribed sink."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.sinks: weakref.WeakSet[Any] = weakref.WeakSet()
        self.providers: weakref.WeakSet[Any] = weakref.WeakSet()  # global providers the processor is on
        self.processor = CollectorLogProcessor(self._forward)

    def _forward(self, data: LogRecordData) -> None:
        with self.lock:
            sinks = list(self.sinks)
        for sink in sinks:
            sink.add_log(data)


_FAN_OUT = _ProcessFanOut()


def _global_sdk_provider() -> LoggerProvider | None:
    """The global SDK ``LoggerProvider``, installing one when the application set none; None when the global
    provider is some other implementation (its records cannot be observed)."""
    provider = get_logger_provider()
    if isinstance(provider, LoggerProvider):
        return provider
    if type(provider).__name__ not in ("ProxyLoggerProvider", "NoOpLoggerProvider"):
        return None
    set_logger_provider(LoggerProvider())
    provider = get_logger_provider()
    return provider if isinstance(provider, LoggerProvider) else None


def subscribe_process_logs(collector: Any) -> bool:
    """Send the records emitted through the global logger provider to ``collector.add_log``; False when the
    global provider is not the SDK's (then attach a :class:`CollectorLogProcessor` to it yourself)."""
    with _FAN_OUT.lock:
        provider = _global_sdk_provider()
        if provider is None:
            log.warning("the global LoggerProvider is not the OpenTelemetry SDK's; log records are not collected")
            return False
        if provider not in _FAN_OUT.providers:
            provider.add_log_record_processor(_FAN_OUT.processor)
            _FAN_OUT.providers.add(provider)
        _FAN_OUT.sinks.add(collector)
    return True


def unsubscribe_process_logs(collector: Any) -> None:
    with _FAN_OUT.lock:
        _FAN_OUT.sinks.discard(collector)
