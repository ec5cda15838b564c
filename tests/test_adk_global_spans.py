"""Spans of the global tracer provider (where ADK traces) reach a run's provider through forward_global_spans."""

from __future__ import annotations

from opentelemetry import trace

from tracegrade.capture.collector import TrajectoryCollector, make_trajectory_callback
from tracegrade.capture.context import TurnScope, turn_span
from tracegrade.evaluation.adk_agent import forward_global_spans

# like ADK's module-level tracer: taken from the global provider before any provider is installed
FRAMEWORK_TRACER = trace.get_tracer("framework")


def _framework_tool(city: str) -> None:
    attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_weather"}
    with FRAMEWORK_TRACER.start_as_current_span("execute_tool get_weather", attributes=attributes) as span:
        span.set_attribute("gen_ai.tool.call.arguments", f'{{"city": "{city}"}}')


def test_global_spans_join_the_turn_and_stop_at_shutdown() -> None:
    collector, provider = make_trajectory_callback(TrajectoryCollector())
    assert forward_global_spans(provider)
    with turn_span(provider, TurnScope(case_id="c1", turn_index=0, run_id="r1"), "weather?"):
        _framework_tool("Bergen")
    [call] = collector.execution_for("c1", run_id="r1").tool_calls
    assert (call.name, call.args) == ("get_weather", {"city": "Bergen"})
    other, other_provider = make_trajectory_callback(TrajectoryCollector())
    forward_global_spans(other_provider)
    provider.shutdown()
    _framework_tool("Oslo")
    assert [c.args for c in other.tool_calls] == [{"city": "Oslo"}]
    assert [c.args for c in collector.tool_calls] == [{"city": "Bergen"}]  # shut down: nothing more forwarded
    other_provider.shutdown()
