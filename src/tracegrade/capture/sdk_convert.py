"""The OpenTelemetry SDK's ``ReadableSpan`` -> the neutral ``SpanRecord`` (pure, called for every span).

Ids become lower-case hex, attribute tuples become lists, kind and status become their names, and
``flags`` holds the OTLP span flags (trace flags plus the parent-is-remote bits); the resource's and the scope's
schema URLs and the scope's attributes come along, as the SDK's OTLP exporters send them. Works
across SDK versions: ``instrumentation_scope`` falls back to ``instrumentation_info``, and the dropped
counts (``dropped_attributes`` ...) read as 0 where the SDK does not have them.

This runs inside the host application for every span it ends, so it avoids Python-level calls where it
can. For the SDK's own span classes it reads the fields the public properties return (``_context``,
``_attributes`` ...) and the deques inside the ``BoundedList`` of events and links directly: each property
is a Python call, and ``attributes``/``events``/``links`` copy under a lock. Finished spans no longer
change, so this is safe. Whether a class has those fields is checked once per class; any other span object
(a subclass, a stand-in) takes the public properties. A ``SpanContext`` is read as the tuple the API
declares it to be, and the conversions of the resource, scope and trace state last seen are reused.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, Span
from opentelemetry.trace import SpanContext

from tracegrade.models.span import SpanEvent, SpanLink, SpanRecord

__all__ = ["span_from_readable"]

_HAS_IS_REMOTE = 0x100
_IS_REMOTE = 0x200

# the fields behind ReadableSpan's properties, in every SDK release we support (1.25 on)
_FIELDS = (
    "_name",
    "_context",
    "_kind",
    "_parent",
    "_start_time",
    "_end_time",
    "_attributes",
    "_events",
    "_links",
    "_resource",
    "_status",
    "_instrumentation_scope",
    "_instrumentation_info",
)
_SDK_CLASSES = (ReadableSpan, Span)
_reads_fields: dict[type, bool] = {}  # span class -> are its fields read directly (decided on its first span)


def span_from_readable(span: Any) -> SpanRecord:
    """Convert one finished SDK span (``opentelemetry.sdk.trace.ReadableSpan``)."""
    direct = _reads_fields.get(type(span))
    if direct is None:
        direct = _reads_fields[type(span)] = type(span) in _SDK_CLASSES and all(hasattr(span, f) for f in _FIELDS)
    if direct:
        attributes = span._attributes
        events = span._events
        links = span._links
        return _record(
            span._name,
            span._context,
            span._kind,
            span._parent,
            span._start_time,
            span._end_time,
            attributes,
            getattr(events, "_dq", events),  # a BoundedList's deque: its len and iteration are Python calls
            getattr(links, "_dq", links),
            span._resource,
            span._status,
            span._instrumentation_scope or span._instrumentation_info,
            getattr(attributes, "dropped", 0),
            getattr(events, "dropped", 0),
            getattr(links, "dropped", 0),
        )
    return _record(
        span.name,
        span.context,
        span.kind,
        span.parent,
        span.start_time,
        span.end_time,
        _backing(span, "_attributes", "attributes"),
        _backing(span, "_events", "events"),
        _backing(span, "_links", "links"),
        span.resource,
        span.status,
        getattr(span, "instrumentation_scope", None) or getattr(span, "instrumentation_info", None),
        getattr(span, "dropped_attributes", 0),
        getattr(span, "dropped_events", 0),
        getattr(span, "dropped_links", 0),
    )


def _record(
    name: str,
    context: Any,
    kind: Any,
    parent: Any,
    start_time: int | None,
    end_time: int | None,
    attributes: Any,
    events: Any,
    links: Any,
    resource: Any,
    status: Any,
    scope: Any,
    dropped_attributes: int,
    dropped_events: int,
    dropped_links: int,
) -> SpanRecord:
    trace_id, span_id, _, trace_flags, trace_state = _context_fields(context)
    start = start_time or 0
    flags = trace_flags | _HAS_IS_REMOTE
    parent_span_id = None
    if parent is not None:
        _, parent_id, parent_is_remote, _, _ = _context_fields(parent)
        if parent_is_remote:
            flags |= _IS_REMOTE
        if parent_id:
            # %-formatting: compiled, it takes under half the time of a format spec (bench/RESULTS.md)
            parent_span_id = "%016x" % parent_id  # noqa: UP031
    scope_name, scope_version, scope_attributes, scope_url = _scope_fields(scope)
    resource_attributes, resource_url = _resource_fields(resource)
    return SpanRecord(
        trace_id=_trace_hex(trace_id),
        span_id="%016x" % span_id,  # noqa: UP031
        name=name,
        start_ns=start,
        end_ns=end_time or start,
        parent_span_id=parent_span_id,
        kind=kind._name_,
        attributes=_plain(attributes),
        events=[_event(event) for event in events] if events else [],
        links=[_link(link) for link in links] if links else [],
        status_code=status.status_code._name_,
        status_message=status.description or "",
        resource=resource_attributes,
        scope_name=scope_name,
        scope_version=scope_version,
        trace_state=_trace_state_header(trace_state),
        flags=int(flags),
        dropped_attributes_count=dropped_attributes,
        dropped_events_count=dropped_events,
        dropped_links_count=dropped_links,
        resource_schema_url=resource_url,
        scope_attributes=scope_attributes,
        scope_schema_url=scope_url,
    )


def _context_fields(context: Any) -> tuple[Any, Any, Any, Any, Any]:
    """``(trace_id, span_id, is_remote, trace_flags, trace_state)`` of a ``SpanContext``: the API declares it a
    tuple of those (and ``is_valid``), read here by position rather than through a property each."""
    if type(context) is SpanContext:
        fields: tuple[Any, ...] = context
        return fields[0], fields[1], fields[2], fields[3], fields[4]
    return context.trace_id, context.span_id, context.is_remote, context.trace_flags, context.trace_state


_last_trace: tuple[int, str] = (0, "0" * 32)  # the last trace id converted and its hex: a trace's spans end together


def _trace_hex(trace_id: int) -> str:
    global _last_trace
    last, text = _last_trace
    if last != trace_id:
        text = "%032x" % trace_id  # noqa: UP031
        _last_trace = (trace_id, text)
    return text


# Resources, scopes and trace states are immutable and shared: by a provider's spans, a tracer's spans and a
# trace's spans. The last one of each converted is kept with its conversion. (Their dropped attribute counts stay
# 0: the SDK bounds neither map, and its OTLP exporters send no count for them.)
_last_resource: tuple[Any, dict[str, Any], str] = (None, {}, "")
_last_scope: tuple[Any, str, str, dict[str, Any], str] = (None, "", "", {}, "")
_last_trace_state: tuple[Any, str] = (None, "")


def _scope_fields(scope: Any) -> tuple[str, str, dict[str, Any], str]:
    """The instrumentation scope's ``(name, version, attributes, schema_url)``; the attributes are the record's
    own copy (records may be changed). SDKs before 1.27 have no scope attributes."""
    global _last_scope
    if scope is None:
        return "", "", {}, ""
    last, name, version, attributes, url = _last_scope
    if last is not scope:
        name, version = scope.name or "", scope.version or ""
        attributes = _plain(getattr(scope, "attributes", None))
        url = getattr(scope, "schema_url", None) or ""
        _last_scope = (scope, name, version, attributes, url)
    return name, version, dict(attributes) if attributes else {}, url


def _trace_state_header(trace_state: Any) -> str:
    global _last_trace_state
    if trace_state is None:
        return ""
    last, header = _last_trace_state
    if last is not trace_state:
        header = trace_state.to_header() if trace_state else ""
        _last_trace_state = (trace_state, header)
    return header


def _resource_fields(resource: Any) -> tuple[dict[str, Any], str]:
    """A copy of the resource's attributes (each record's own: records may be changed), and its schema URL."""
    global _last_resource
    if resource is None:
        return {}, ""
    last, attributes, url = _last_resource
    if last is not resource:
        attributes = _plain(resource.attributes)
        url = getattr(resource, "schema_url", None) or ""
        _last_resource = (resource, attributes, url)
    return dict(attributes), url


def _backing(span: Any, private: str, public: str) -> Any:
    """The span's own container ``private`` when it has one, else its public (copying) property."""
    value = getattr(span, private, None)
    return value if value is not None else getattr(span, public)


def _plain(attributes: Mapping[str, Any] | None) -> dict[str, Any]:
    """Attributes as a plain dict; the SDK stores sequences as tuples, the record keeps lists.

    The SDK's ``BoundedAttributes`` copies key by key under a lock through its public mapping interface
    (many times slower; bench/RESULTS.md, SDK span converter); its backing ``_dict`` is read directly when
    present. Other mappings take the public path.
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
    trace_id, span_id, _, _, trace_state = _context_fields(link.context)
    return SpanLink(
        trace_id=_trace_hex(trace_id),
        span_id="%016x" % span_id,  # noqa: UP031
        attributes=_plain(link.attributes),
        trace_state=_trace_state_header(trace_state),
        dropped_attributes_count=getattr(link, "dropped_attributes", 0),
    )
