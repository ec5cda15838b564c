"""The OpenTelemetry SDK's ``ReadableSpan`` -> the neutral ``SpanRecord`` (pure, called for every span).

Ids become lower-case hex, attribute tuples become lists, kind and status become their names, and
``flags`` holds the OTLP span flags (trace flags plus the parent-is-remote bits). Works
across SDK versions: ``instrumentation_scope`` falls back to ``instrumentation_info``, and the dropped
counts (``dropped_attributes`` ...) read as 0 where the SDK does not have them.

This runs inside the host application for every span it ends, so it reads the SDK's backing
containers where they exist (``_attributes``, ``_events``, ``_links``): the public properties copy them
under a lock on every access. Finished spans no longer change, so this is safe; spans without those
attributes take the public path.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tracegrade.models.span import SpanEvent, SpanLink, SpanRecord

__all__ = ["span_from_readable"]

_HAS_IS_REMOTE = 0x100
_IS_REMOTE = 0x200


def span_from_readable(span: Any) -> SpanRecord:
    """Convert one finished SDK span (``opentelemetry.sdk.trace.ReadableSpan``)."""
    context = span.context
    parent = span.parent
    status = span.status
    scope = getattr(span, "instrumentation_scope", None) or getattr(span, "instrumentation_info", None)
    resource = span.resource
    trace_state = context.trace_state
    start = span.start_time or 0
    flags = int(context.trace_flags) | _HAS_IS_REMOTE
    if parent is not None and parent.is_remote:
        flags |= _IS_REMOTE
    events = _backing(span, "_events", "events")
    links = _backing(span, "_links", "links")
    return SpanRecord(
        trace_id=f"{context.trace_id:032x}",
        span_id=f"{context.span_id:016x}",
        name=span.name,
        start_ns=start,
        end_ns=span.end_time or start,
        parent_span_id=f"{parent.span_id:016x}" if parent is not None and parent.span_id else None,
        kind=span.kind._name_,
        attributes=_plain(_backing(span, "_attributes", "attributes")),
        events=[_event(event) for event in events] if events else [],
        links=[_link(link) for link in links] if links else [],
        status_code=status.status_code._name_,
        status_message=status.description or "",
        resource=_plain(resource.attributes) if resource is not None else {},
        scope_name=(scope.name or "") if scope is not None else "",
        scope_version=(scope.version or "") if scope is not None else "",
        trace_state=trace_state.to_header() if trace_state else "",
        flags=flags,
        dropped_attributes_count=getattr(span, "dropped_attributes", 0),
        dropped_events_count=getattr(span, "dropped_events", 0),
        dropped_links_count=getattr(span, "dropped_links", 0),
    )


def _backing(span: Any, private: str, public: str) -> Any:
    """The span's own container ``private`` when it has one, else its public (copying) property."""
    value = getattr(span, private, None)
    return value if value is not None else getattr(span, public)


def _plain(attributes: Mapping[str, Any] | None) -> dict[str, Any]:
    """Attributes as a plain dict; the SDK stores sequences as tuples, the record keeps lists.

    The SDK's ``BoundedAttributes`` copies key by key under a lock through its public mapping interface
    (about 40 times slower); its backing ``_dict`` is read directly when present. Other mappings take
    the public path.
    """
    backing = getattr(attributes, "_dict", None)
    source = backing if isinstance(backing, dict) else attributes
    if not source:
        return {}
    out = dict(source)
    for key, value in out.items():
        if type(value) is tuple:
            out[key] = list(value)
    return out


def _event(event: Any) -> SpanEvent:
    return SpanEvent(
        name=event.name,
        time_ns=event.timestamp or 0,
        attributes=_plain(event.attributes),
        dropped_attributes_count=getattr(event, "dropped_attributes", 0),
    )


def _link(link: Any) -> SpanLink:
    context = link.context
    trace_state = context.trace_state
    return SpanLink(
        trace_id=f"{context.trace_id:032x}",
        span_id=f"{context.span_id:016x}",
        attributes=_plain(link.attributes),
        trace_state=trace_state.to_header() if trace_state else "",
        dropped_attributes_count=getattr(link, "dropped_attributes", 0),
    )

