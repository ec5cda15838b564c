"""TrajectoryCollector as a span processor: storage, attribution, bounds, failure isolation, stamping;
and the trace_node / trace_tool helpers (checked on the span records the collector keeps)."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest
from opentelemetry import context as otel_context
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider

from tracegrade.capture import (
    TrajectoryCollector,
    TurnScope,
    current_tracer,
    make_trajectory_callback,
    trace_node,
    trace_tool,
    turn_span,
)
from tracegrade.capture import semconv as tg


def _provider(collector: TrajectoryCollector, **config: str) -> TracerProvider:
    return make_trajectory_callback(collector, config or None)[1]


def _emit_trace(provider: TracerProvider, name: str, children: int) -> None:
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span(name, context=otel_context.Context()):
        for i in range(children):
            with tracer.start_as_current_span(f"{name}.{i}"):
                pass


def test_spans_are_kept_per_trace_with_stamped_ids():
    collector = TrajectoryCollector(capture_all_events=True)
    provider = _provider(collector, thread_id="thread-7", run_id="run-7")
    _emit_trace(provider, "a", 2)
    _emit_trace(provider, "b", 1)
    spans = collector.spans_for()
    assert [s.name for s in spans] == ["a.0", "a.1", "a", "b.0", "b"]
    assert len({s.trace_id for s in spans}) == 2
    assert all(s.attributes[tg.THREAD_ID] == "thread-7" and s.attributes[tg.RUN_ID] == "run-7" for s in spans)
    assert collector.spans_for_trace(spans[0].trace_id) == spans[:3]
    assert collector.events == spans
    assert collector.start_time == min(s.start_ns for s in spans) / 1e9
    assert collector.duration == pytest.approx((max(s.end_ns for s in spans) - min(s.start_ns for s in spans)) / 1e9)
    collector.reset()
    assert collector.spans_for() == [] and collector.start_time is None and collector.duration == 0.0


def test_events_are_empty_without_capture_all_events():
    collector = TrajectoryCollector()
    _emit_trace(_provider(collector), "a", 1)
    assert collector.events == [] and collector.span_count == 2


def test_memory_is_bounded_by_traces_and_spans():
    collector = TrajectoryCollector(max_spans=1000, max_traces=5)
    provider = _provider(collector)
    for i in range(10):
        _emit_trace(provider, f"t{i}", 2)
    assert [s.name for s in collector.spans_for() if "." not in s.name] == [f"t{i}" for i in range(5, 10)]
    assert (collector.dropped_traces, collector.dropped_spans, collector.span_count) == (5, 15, 15)

    small = TrajectoryCollector(max_spans=10)
    _emit_trace(_provider(small), "big", 14)
    assert small.span_count == 10 and small.dropped_spans == 5
    assert [s.name for s in small.spans_for()] == [f"big.{i}" for i in range(9)] + ["big"]  # the root is kept


def test_ended_spans_are_filed_in_batches_even_when_nobody_reads():
    from tracegrade.capture.collector import FILE_EVERY

    collector = TrajectoryCollector(max_spans=10)
    provider = _provider(collector)
    for i in range(3):
        _emit_trace(provider, f"t{i}", FILE_EVERY - 1)  # FILE_EVERY spans each, nothing read in between
        assert len(collector._ended) < FILE_EVERY  # on_end filed the queue itself: memory stays bounded
    assert collector.span_count == 10 and collector.dropped_spans == 3 * FILE_EVERY - 10


def test_a_span_that_cannot_be_converted_never_reaches_the_host(caplog):
    collector = TrajectoryCollector()
    provider = _provider(collector)
    collector.on_end(ReadableSpan(name="broken", context=None))  # no span context: conversion fails
    collector.on_end(ReadableSpan(name="broken again", context=None))
    collector.on_start(object())  # not a span at all
    _emit_trace(provider, "fine", 1)
    assert collector.failures == 3
    assert [s.name for s in collector.spans_for()] == ["fine.0", "fine"]
    assert sum("TrajectoryCollector" in r.getMessage() for r in caplog.records) == 1  # logged once
    assert collector.force_flush() is True


def test_turn_baggage_attributes_fresh_traces_and_lost_context_threads():
    collector = TrajectoryCollector()
    provider = _provider(collector)
    tracer = provider.get_tracer("framework")
    scope = TurnScope("case-1", 0, "run-1", "set-1", "thread-1")

    def lost_context_work() -> None:  # a plain thread: no context variables, no baggage, no parent
        with tracer.start_as_current_span("background"):
            pass

    with turn_span(provider, scope, "hello") as root:
        root.set_attribute(tg.TURN_OUTPUT, "bye")
        with tracer.start_as_current_span("in-turn"):
            pass
        with (
            tracer.start_as_current_span("forced-new-trace", context=otel_context.Context()),
            tracer.start_as_current_span("forced-child"),
        ):
            pass
        worker = threading.Thread(target=lost_context_work)
        worker.start()
        worker.join()
    _emit_trace(provider, "after-the-turn", 0)

    spans = {s.name: s for s in collector.spans_for()}
    turn = spans["tracegrade.turn case-1"]
    assert turn.parent_span_id is None
    assert turn.attributes[tg.TURN_INPUT] == "hello" and turn.attributes[tg.TURN_OUTPUT] == "bye"
    assert turn.attributes[tg.EVAL_SET_ID] == "set-1" and turn.attributes[tg.THREAD_ID] == "thread-1"
    assert spans["in-turn"].trace_id == turn.trace_id
    for name in ("forced-new-trace", "background"):
        assert spans[name].trace_id != turn.trace_id and spans[name].parent_span_id is None
        assert spans[name].attributes[tg.CASE_ID] == "case-1" and spans[name].attributes[tg.TURN_INDEX] == 0
    assert tg.CASE_ID not in spans["after-the-turn"].attributes
    attributed = {s.name for s in collector.spans_for("case-1", 0, "run-1")}
    assert attributed == {"tracegrade.turn case-1", "in-turn", "forced-new-trace", "forced-child", "background"}
    assert collector.spans_for("case-1", 1) == [] and collector.spans_for("case-1", run_id="other") == []
    collector.release("case-1", "run-1")
    assert [s.name for s in collector.spans_for()] == ["after-the-turn"]


async def test_concurrent_turns_keep_their_spans_apart():
    collector = TrajectoryCollector()
    provider = _provider(collector)
    tracer = provider.get_tracer("framework")

    async def case(i: int) -> None:
        with turn_span(provider, TurnScope(f"c{i}", 0, "r"), f"q{i}"):
            for step in range(3):
                await asyncio.sleep(0.001 * ((i + step) % 3))
                with tracer.start_as_current_span(f"step-{i}", context=otel_context.Context() if step else None):
                    await asyncio.sleep(0)

    await asyncio.gather(*(case(i) for i in range(20)))
    for i in range(20):
        names = sorted(s.name for s in collector.spans_for(f"c{i}"))
        assert names == [f"step-{i}"] * 3 + [f"tracegrade.turn c{i}"]


def test_trace_node_and_trace_tool_write_tracegrade_attributes():
    collector = TrajectoryCollector()
    provider = _provider(collector)

    class Opaque:
        def __str__(self) -> str:
            return "<opaque>"

    @trace_tool
    def lookup(self_like: str, *, when: Opaque) -> dict:
        return {"found": [self_like], "when": when}

    @trace_node("router")
    def route(state: dict) -> str:
        return "lookup"

    with turn_span(provider, TurnScope("c", 0, "r"), "q"):
        route({"n": 1})
        lookup("x", when=Opaque())
        with trace_tool("manual", arguments={"q": "ü"}, call_id="call-9") as manual:
            manual.set_result("plain text")
        with trace_node("writer") as writer:
            writer.set_output({"text": "done"})
    spans = {s.name: s.attributes for s in collector.spans_for()}
    assert spans["router"][tg.SPAN_KIND] == "node" and spans["router"][tg.NODE_NAME] == "router"
    assert json.loads(spans["router"][tg.NODE_INPUT]) == {"state": {"n": 1}}
    assert spans["router"][tg.NODE_OUTPUT] == "lookup"
    assert spans["lookup"][tg.SPAN_KIND] == "tool" and spans["lookup"][tg.TOOL_NAME] == "lookup"
    assert json.loads(spans["lookup"][tg.TOOL_ARGUMENTS]) == {"self_like": "x", "when": "<opaque>"}
    assert json.loads(spans["lookup"][tg.TOOL_RESULT]) == {"found": ["x"], "when": "<opaque>"}
    assert spans["manual"][tg.TOOL_CALL_ID] == "call-9"
    assert json.loads(spans["manual"][tg.TOOL_ARGUMENTS]) == {"q": "ü"}
    assert spans["manual"][tg.TOOL_RESULT] == "plain text"
    assert json.loads(spans["writer"][tg.NODE_OUTPUT]) == {"text": "done"}


async def test_helpers_record_exceptions_and_reraise_sync_and_async():
    collector = TrajectoryCollector()
    provider = _provider(collector)

    @trace_tool("failing_tool")
    async def failing_tool(x: int) -> int:
        raise KeyError(x)

    @trace_node
    def failing_node() -> None:
        raise RuntimeError("node broke")

    with turn_span(provider, TurnScope("c", 0, "r"), "q"):
        with pytest.raises(KeyError):
            await failing_tool(3)
        with pytest.raises(RuntimeError, match="node broke"):
            failing_node()
        with pytest.raises(ValueError, match="async block"):
            async with trace_node("block"):
                raise ValueError("async block")
    spans = {s.name: s for s in collector.spans_for()}
    for name, exc_type in (("failing_tool", "KeyError"), ("failing_node", "RuntimeError"), ("block", "ValueError")):
        span = spans[name]
        assert span.status_code == "ERROR", name
        assert [e.attributes.get("exception.type") for e in span.events if e.name == "exception"] == [exc_type]
    assert tg.TOOL_RESULT not in spans["failing_tool"].attributes
    assert spans["tracegrade.turn c"].status_code == "UNSET"  # the exceptions were handled inside the turn


def test_each_provider_keeps_one_tracer_and_later_processors_still_see_its_spans():
    first, second = TrajectoryCollector(), TrajectoryCollector()
    provider = _provider(first)

    class SlottedProvider:  # a provider that cannot be weakly referenced (it hands out the inner one's tracers)
        __slots__ = ("inner",)

        def __init__(self, inner: TracerProvider) -> None:
            self.inner = inner

        def get_tracer(self, *args: object, **kwargs: object) -> object:
            return self.inner.get_tracer(*args, **kwargs)

    @trace_node("step")
    def step() -> None:
        return None

    with turn_span(provider, TurnScope("c", 0, "r"), "q"):
        assert current_tracer() is current_tracer()
        step()
        provider.add_span_processor(second)  # added after the tracer was made and cached
        step()
    assert [s.name for s in first.spans_for("c") if s.name == "step"] == ["step", "step"]
    assert [s.name for s in second.spans_for("c") if s.name == "step"] == ["step"]
    other = TrajectoryCollector()
    with turn_span(_provider(other), TurnScope("d", 0, "r"), "q"):
        step()
    assert [s.name for s in other.spans_for("d")] == ["step", "tracegrade.turn d"]
    assert not any(s.name == "step" for s in first.spans_for("d"))
    with turn_span(SlottedProvider(provider), TurnScope("e", 0, "r"), "q"):  # type: ignore[arg-type]
        step()
    assert sorted(s.name for s in first.spans_for("e")) == ["step", "tracegrade.turn e"]


def test_trace_tool_needs_a_name_as_a_context_manager():
    with pytest.raises(ValueError, match="needs a name"), trace_tool():
        pass


def test_collector_mapping_is_cached_until_a_new_span_arrives():
    collector = TrajectoryCollector()
    provider = _provider(collector)
    with turn_span(provider, TurnScope("c", 0, "r"), "find it"), trace_tool("search", arguments={"q": "it"}) as tool:
        tool.set_result(["it-0"])
    first = collector.execution
    assert collector.execution is first
    assert collector.get_tool_names() == ["search"]
    assert collector.tool_calls[0].args == {"q": "it"}
    assert collector.to_dict()["tool_calls"][0]["name"] == "search"
    with turn_span(provider, TurnScope("c", 1, "r"), "again"), trace_tool("search", arguments={"q": "again"}):
        pass
    assert collector.execution is not first
    assert collector.get_tool_names() == ["search", "search"]
    assert [tc.args for tc in collector.execution_for("c", 1).tool_calls] == [{"q": "again"}]
