"""The neutral span record every source (SDK, OTLP protobuf, OTLP/JSON) decodes into.

Plain slotted dataclasses rather than pydantic models: millions of these pass through the receiver
and the mapper, and they are never validated from user input directly (decoders do that).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

__all__ = ["LogRecordData", "SpanEvent", "SpanLink", "SpanRecord", "service_name_of"]


def service_name_of(resource: dict[str, Any]) -> str:
    """A resource's ``service.name`` as text: a string as it is; '' when absent or empty (an AnyValue that holds
    nothing decodes to None, which ``str()`` made the name "None"); any other value (OpenTelemetry says it is a
    string, a sender may not) as compact JSON, the same text whether read from a decoded or a stored record."""
    name = resource.get("service.name")
    if type(name) is str:
        return name
    return "" if name is None else json.dumps(name, ensure_ascii=False, separators=(",", ":"), default=str)


@dataclass(slots=True)
class SpanEvent:
    name: str
    time_ns: int = 0
    attributes: dict[str, Any] = field(default_factory=dict)
    dropped_attributes_count: int = 0


@dataclass(slots=True)
class SpanLink:
    trace_id: str
    span_id: str
    attributes: dict[str, Any] = field(default_factory=dict)
    trace_state: str = ""
    dropped_attributes_count: int = 0


@dataclass(slots=True)
class SpanRecord:
    """One finished span: ids as lower-case hex, times in Unix nanoseconds, attributes as plain values.

    ``kind`` is the OTLP name without prefix (``INTERNAL``, ``SERVER``, ``CLIENT``, ``PRODUCER``,
    ``CONSUMER``, ``UNSPECIFIED``); ``status_code`` is ``UNSET``, ``OK`` or ``ERROR``.
    """

    trace_id: str
    span_id: str
    name: str
    start_ns: int
    end_ns: int
    parent_span_id: str | None = None
    kind: str = "INTERNAL"
    attributes: dict[str, Any] = field(default_factory=dict)
    events: list[SpanEvent] = field(default_factory=list)
    links: list[SpanLink] = field(default_factory=list)
    status_code: str = "UNSET"
    status_message: str = ""
    resource: dict[str, Any] = field(default_factory=dict)
    scope_name: str = ""
    scope_version: str = ""
    trace_state: str = ""
    flags: int = 0
    dropped_attributes_count: int = 0
    dropped_events_count: int = 0
    dropped_links_count: int = 0
    # the rest of the OTLP envelope the span came in (``Resource`` and ``InstrumentationScope``), kept so an
    # export gives it back whole; decoders share one dict of scope attributes between a scope block's records
    resource_schema_url: str = ""
    resource_dropped_attributes_count: int = 0
    scope_attributes: dict[str, Any] = field(default_factory=dict)
    scope_schema_url: str = ""
    scope_dropped_attributes_count: int = 0

    @property
    def service_name(self) -> str:
        return service_name_of(self.resource)

    @property
    def duration_ns(self) -> int:
        return max(0, self.end_ns - self.start_ns)


@dataclass(slots=True)
class LogRecordData:
    """One OTLP log record, kept for the content instrumentations put in logs (joined by trace/span id)."""

    time_ns: int
    trace_id: str | None = None
    span_id: str | None = None
    event_name: str = ""
    body: Any = None
    attributes: dict[str, Any] = field(default_factory=dict)
    severity_number: int = 0
    severity_text: str = ""
    resource: dict[str, Any] = field(default_factory=dict)
    scope_name: str = ""
    observed_time_ns: int = 0
    flags: int = 0
    dropped_attributes_count: int = 0
    # the rest of the OTLP envelope, as on SpanRecord
    scope_version: str = ""
    resource_schema_url: str = ""
    resource_dropped_attributes_count: int = 0
    scope_attributes: dict[str, Any] = field(default_factory=dict)
    scope_schema_url: str = ""
    scope_dropped_attributes_count: int = 0
