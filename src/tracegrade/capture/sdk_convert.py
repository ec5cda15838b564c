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
    trace_state = context.trace_state
    start = span.start_time or 0
    flags = int(context.trace_flags) | _HAS_IS_REMOTE
    if parent is not None and parent.is_remote:
        flags |= _IS_REMOTE
    events = _backing(span, "_events", "events")
    links = _backing(span, "_links", "links")
    # positional, in field order: a keyword call with all twenty fields costs twice as much
    return SpanRecord(
        f"{context.trace_id:032x}",  # trace_id
        f"{context.span_id:016x}",  # span_id
        span.name,
        start,  # start_ns
        span.end_time or start,  # end_ns
        f"{parent.span_id:016x}" if parent is not None and parent.span_id else None,  # parent_span_id
        span.kind._name_,  # kind
        _plain(_backing(span, "_attributes", "attributes")),  # attributes
        [_event(event) for event in events] if events else [],  # events
        [_link(link) for link in links] if links else [],  # links
        status.status_code._name_,  # status_code
        status.description or "",  # status_message
        _resource_attributes(span.resource),  # resource
        (scope.name or "") if scope is not None else "",  # scope_name
        (scope.version or "") if scope is not None else "",  # scope_version
        trace_state.to_header() if trace_state else "",  # trace_state
        flags,
        getattr(span, "dropped_attributes", 0),  # dropped_attributes_count
        getattr(span, "dropped_events", 0),  # dropped_events_count
        getattr(span, "dropped_links", 0),  # dropped_links_count
    )


_last_resource: tuple[Any, dict[str, Any]] = (None, {})  # the last resource converted and its attributes


def _resource_attributes(resource: Any) -> dict[str, Any]:
    """A copy of the resource's attributes. Resources are immutable and one provider's spans share one, so
    the last one's conversion is kept and copied."""
    global _last_resource
    if resource is None:
        return {}
    last, attributes = _last_resource
    if last is not resource:
        attributes = _plain(resource.attributes)
        _last_resource = (resource, attributes)
    return dict(attributes)


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
