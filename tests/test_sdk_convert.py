"""span_from_readable on spans from a real TracerProvider: ids, nesting, events, links, status, resource."""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, NonRecordingSpan, SpanContext, SpanKind, StatusCode, TraceFlags, TraceState

from tracegrade.capture.sdk_convert import span_from_readable
from tracegrade.ingest.decode import decode_traces_proto


def _provider(**kwargs):
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "sdk-convert", "team": "evals"}), **kwargs)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def _finished_by_name(exporter):
    return {span.name: span for span in exporter.get_finished_spans()}


def test_nested_spans_with_events_links_error_status_and_resource():
    provider, exporter = _provider()
    tracer = provider.get_tracer("agent.lib", "0.7")
    with tracer.start_as_current_span("invoke_agent", kind=SpanKind.SERVER) as root:
        root.set_attribute("tags", ("a", "b"))
        root.set_attribute("weights", [0.5, 1.5])
        with tracer.start_as_current_span("chat", kind=SpanKind.CLIENT) as chat:
            chat.set_attribute("gen_ai.usage.input_tokens", 10)
            chat.add_event("gen_ai.choice", {"index": 0, "reasons": ("stop",)}, timestamp=1_234)
        with tracer.start_as_current_span(
            "execute_tool", links=[Link(chat.get_span_context(), {"relation": "follows"})]
        ) as tool:
            try:
                raise ValueError("tool failed")
            except ValueError as exc:
                tool.record_exception(exc)
                tool.set_status(StatusCode.ERROR, "tool failed")
    provider.shutdown()
    spans = _finished_by_name(exporter)
    root_record = span_from_readable(spans["invoke_agent"])
    chat_record = span_from_readable(spans["chat"])
    tool_record = span_from_readable(spans["execute_tool"])

    root_context = spans["invoke_agent"].context
    assert root_record.trace_id == format(root_context.trace_id, "032x") and len(root_record.trace_id) == 32
    assert root_record.span_id == format(root_context.span_id, "016x")
    assert root_record.parent_span_id is None
    assert chat_record.parent_span_id == tool_record.parent_span_id == root_record.span_id
    assert chat_record.trace_id == tool_record.trace_id == root_record.trace_id
    assert (root_record.kind, chat_record.kind, tool_record.kind) == ("SERVER", "CLIENT", "INTERNAL")
    assert root_record.attributes == {"tags": ["a", "b"], "weights": [0.5, 1.5]}
    assert (root_record.start_ns, root_record.end_ns) == (
        spans["invoke_agent"].start_time,
        spans["invoke_agent"].end_time,
    )
    assert root_record.resource["service.name"] == "sdk-convert" and root_record.resource["team"] == "evals"
    assert (root_record.scope_name, root_record.scope_version) == ("agent.lib", "0.7")
    (event,) = chat_record.events
    assert (event.name, event.time_ns, event.attributes) == ("gen_ai.choice", 1_234, {"index": 0, "reasons": ["stop"]})
    assert (tool_record.status_code, tool_record.status_message) == ("ERROR", "tool failed")
    assert chat_record.status_code == "UNSET"
    (exception_event,) = tool_record.events
    assert exception_event.name == "exception"
    assert exception_event.attributes["exception.type"] == "ValueError"
    (link,) = tool_record.links
    assert (link.trace_id, link.span_id, link.attributes) == (
        chat_record.trace_id,
        chat_record.span_id,
        {"relation": "follows"},
    )
    assert root_record.flags == int(root_context.trace_flags) | 0x100


def test_remote_parent_trace_state_and_flags():
    provider, exporter = _provider()
    remote = SpanContext(
        trace_id=0x0AF7651916CD43DD8448EB211C80319C,
        span_id=0x00F067AA0BA902B7,
        is_remote=True,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
        trace_state=TraceState([("vendor", "abc")]),
    )
    with provider.get_tracer("t").start_as_current_span(
        "child", context=trace.set_span_in_context(NonRecordingSpan(remote))
    ):
        pass
    provider.shutdown()
    record = span_from_readable(exporter.get_finished_spans()[0])
    assert record.trace_id == "0af7651916cd43dd8448eb211c80319c"
    assert record.parent_span_id == "00f067aa0ba902b7"
    assert record.trace_state == "vendor=abc"
    assert record.flags == 0x1 | 0x100 | 0x200


def test_dropped_counts_follow_the_sdk_limits():
    provider, exporter = _provider(span_limits=SpanLimits(max_span_attributes=2, max_events=1, max_links=1))
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("busy", attributes={"a": 1, "b": 2, "c": 3, "d": 4}) as busy:
        busy.add_event("one")
        busy.add_event("two")
    provider.shutdown()
    record = span_from_readable(exporter.get_finished_spans()[0])
    assert len(record.attributes) == 2 and record.dropped_attributes_count == 2
    assert len(record.events) == 1 and record.dropped_events_count == 1


def test_live_conversion_matches_the_otlp_decoder():
    """A span graded live and the same span received over OTLP must give the same record."""
    provider, exporter = _provider()
    tracer = provider.get_tracer("parity", "1.0")
    with tracer.start_as_current_span("root", attributes={"list": ("x", "y"), "n": 3}) as root:
        root.add_event("note", {"k": True})
        with tracer.start_as_current_span("child", kind=SpanKind.PRODUCER, links=[Link(root.get_span_context())]):
            pass
    provider.shutdown()
    finished = exporter.get_finished_spans()
    live = sorted((span_from_readable(span) for span in finished), key=lambda record: record.span_id)
    received = sorted(decode_traces_proto(encode_spans(finished).SerializeToString()).spans, key=lambda r: r.span_id)
    for live_record, received_record in zip(live, received, strict=True):
        assert live_record.flags & 0x300 == received_record.flags & 0x300
        live_record.flags = received_record.flags  # the SDK's encoder leaves the W3C trace flags out
        assert live_record == received_record


def test_each_record_gets_its_own_copy_of_its_own_resource():
    first_provider, first_exporter = _provider()
    second_exporter = InMemorySpanExporter()
    second_provider = TracerProvider(resource=Resource.create({"service.name": "other"}))
    second_provider.add_span_processor(SimpleSpanProcessor(second_exporter))
    for provider in (first_provider, second_provider, first_provider):
        with provider.get_tracer("t").start_as_current_span("step"):
            pass
    first_spans, (second_span,) = first_exporter.get_finished_spans(), second_exporter.get_finished_spans()
    a, b, c = (span_from_readable(span) for span in (first_spans[0], second_span, first_spans[1]))  # alternating
    assert a.resource["service.name"] == c.resource["service.name"] == "sdk-convert"
    assert b.resource["service.name"] == "other" and "team" not in b.resource
    a.resource["service.name"] = "changed"  # a record's resource is its own
    assert c.resource["service.name"] == "sdk-convert"
    assert span_from_readable(first_exporter.get_finished_spans()[0]).resource["service.name"] == "sdk-convert"


class _PublicOnly:
    """A span object with only ReadableSpan's public interface (as a wrapper or another SDK might be)."""

    def __init__(self, span):
        self._span = span

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._span, name)


def test_the_sdk_fast_path_and_the_public_interface_give_the_same_records():
    """SDK spans are read through their fields; anything else through the public properties. Both must agree,
    over spans that switch scope, trace state, resource and trace from one to the next."""
    provider, exporter = _provider(span_limits=SpanLimits(max_span_attributes=3, max_events=1, max_links=1))
    other_provider = TracerProvider(resource=Resource.create({"service.name": "other"}))
    other_provider.add_span_processor(SimpleSpanProcessor(exporter))
    remote = SpanContext(
        0x0AF7651916CD43DD8448EB211C80319C, 0x00F067AA0BA902B7, True, TraceFlags(1), TraceState([("v", "1")])
    )
    for index, (tracer_provider, scope) in enumerate([(provider, "a"), (provider, "b"), (other_provider, "a")]):
        tracer = tracer_provider.get_tracer(scope, f"0.{index}")
        parent = trace.set_span_in_context(NonRecordingSpan(remote)) if index == 1 else None
        with tracer.start_as_current_span(
            f"root-{index}", context=parent, links=[Link(remote, {"k": index}), Link(remote)], kind=SpanKind.CLIENT
        ) as root:
            root.set_attributes({"a": 1, "b": ("x", "y"), "c": 3.5, "d": True})
            root.add_event("first", {"n": index})
            root.add_event("second")
            with tracer.start_as_current_span(f"child-{index}") as child:
                child.set_status(StatusCode.ERROR, "broken")
    provider.shutdown()
    finished = exporter.get_finished_spans()
    assert len(finished) == 6 and all(type(span) is ReadableSpan for span in finished)
    fast = [span_from_readable(span) for span in finished]
    public = [span_from_readable(_PublicOnly(span)) for span in finished]
    assert fast == public
    assert [record.scope_name for record in fast] == ["a", "a", "b", "b", "a", "a"]
    assert [record.trace_state for record in fast] == ["", "", "v=1", "v=1", "", ""]
    assert fast[1].dropped_attributes_count == 1 and fast[1].dropped_events_count == fast[1].dropped_links_count == 1
    assert fast[3].parent_span_id == "00f067aa0ba902b7" and fast[3].flags & 0x200
    assert fast[0].status_code == "ERROR" and fast[4].resource["service.name"] == "other"
