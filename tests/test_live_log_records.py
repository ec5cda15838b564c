"""Content emitted as OpenTelemetry log records reaches a live TrajectoryCollector and is joined to its spans.

The agent here is instrumented the way ADK is with ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``
(EVENT_ONLY): GenAI spans without content attributes, and the messages as ``gen_ai.*`` event log records
emitted while the LLM span is current. Real TracerProvider/LoggerProvider from the SDK throughout. Also run
against opentelemetry-sdk 1.25 (processors get ``emit(LogData)``, records carry no span ids) and 1.36
(``on_emit(LogData)``) in separate venvs; tracegrade's own venv has 1.44 (``on_emit(ReadWriteLogRecord)``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from opentelemetry import _logs
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.trace import Tracer

from tracegrade.capture.collector import TrajectoryCollector, make_trajectory_callback
from tracegrade.evaluation.evaluator import AgentEvaluator, create_eval_app
from tracegrade.models.config import CriterionConfig, EvalConfig
from tracegrade.models.dataset import EvalCase, EvalSet, Invocation, ToolCall

Emit = Callable[..., None]


def _weather_agent(tracer: Tracer, emit: Emit, city: str = "Bergen") -> str:
    """One agent turn: LLM asks for a tool, the tool runs, LLM answers; content only in log records."""
    with tracer.start_as_current_span(
        "invoke_agent weather_agent",
        attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "weather_agent"},
    ):
        with tracer.start_as_current_span(
            "chat gemini", attributes={"gen_ai.operation.name": "chat", "gen_ai.request.model": "gemini"}
        ):
            emit("gen_ai.user.message", {"role": "user", "content": f"Weather in {city}?"})
            call = {
                "id": "call-1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": json.dumps({"city": city})},
            }
            emit(
                "gen_ai.choice",
                {"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "tool_calls": [call]}},
            )
        with tracer.start_as_current_span(
            "execute_tool get_weather",
            attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "get_weather",
                "gen_ai.tool.call.id": "call-1",
            },
        ):
            pass
        with tracer.start_as_current_span(
            "chat gemini", attributes={"gen_ai.operation.name": "chat", "gen_ai.request.model": "gemini"}
        ):
            emit("gen_ai.tool.message", {"role": "tool", "id": "call-1", "content": "sunny"})
            emit(
                "gen_ai.choice",
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": f"It is sunny in {city}."},
                },
            )
    return f"It is sunny in {city}."


def _record(name: str, body: dict[str, Any]) -> Any:
    """A GenAI event record; SDKs before 1.35 have no ``event_name`` and carry the name as an attribute (nor do
    they fill in the current span's ids: the collector's processor does)."""
    attributes = {"gen_ai.system": "gcp.gemini"}
    try:
        return _logs.LogRecord(event_name=name, body=body, attributes=attributes)
    except TypeError:
        return _logs.LogRecord(body=body, attributes={**attributes, "event.name": name})


def _emitter(provider: Any) -> Emit:
    logger = provider.get_logger("test.genai")

    def emit(name: str, body: dict[str, Any]) -> None:
        logger.emit(_record(name, body))

    return emit


@pytest.fixture
def wired() -> Iterator[tuple[TrajectoryCollector, Tracer]]:
    collector, provider = make_trajectory_callback(TrajectoryCollector())
    yield collector, provider.get_tracer("test")
    provider.shutdown()


def test_records_from_the_process_global_logger_provider_fill_in_the_arguments(wired: Any) -> None:
    collector, tracer = wired
    _weather_agent(tracer, _emitter(_logs.get_logger_provider()))
    assert isinstance(_logs.get_logger_provider(), LoggerProvider)  # installed when the application set none
    [call] = collector.tool_calls
    assert call.name == "get_weather"
    assert call.args_captured and call.args == {"city": "Bergen"}
    assert collector.final_response == "It is sunny in Bergen."
    assert collector.execution.content_captured
    assert collector.log_count == 4


def test_records_from_the_collectors_own_logger_provider(wired: Any) -> None:
    collector, tracer = wired
    _weather_agent(tracer, _emitter(collector.logger_provider))
    assert [(c.name, c.args) for c in collector.tool_calls] == [("get_weather", {"city": "Bergen"})]
    assert collector.execution.user_query == "Weather in Bergen?"


def test_without_log_capture_the_arguments_are_reported_not_captured() -> None:
    collector, provider = make_trajectory_callback(TrajectoryCollector(), process_logs=False)
    _weather_agent(provider.get_tracer("test"), _emitter(_logs.get_logger_provider()))
    [call] = collector.tool_calls
    assert not call.args_captured
    assert not collector.execution.content_captured
    provider.shutdown()


def test_a_shut_down_collector_stops_receiving_process_records(wired: Any) -> None:
    collector, tracer = wired
    collector.tracer_provider.shutdown()
    _weather_agent(tracer, _emitter(_logs.get_logger_provider()))
    assert collector.log_count == 0


def test_records_outside_any_span_are_not_kept(wired: Any) -> None:
    collector, _ = wired
    _emitter(_logs.get_logger_provider())("gen_ai.user.message", {"content": "orphan"})
    assert collector.log_count == 0


def test_log_records_are_bounded_and_released_with_their_case() -> None:
    collector, provider = make_trajectory_callback(TrajectoryCollector(max_spans=3))
    _weather_agent(provider.get_tracer("test"), _emitter(collector.logger_provider))
    assert collector.log_count == 3 and collector.dropped_logs == 1
    collector.reset()
    assert collector.log_count == 0 and collector.dropped_logs == 0
    provider.shutdown()


def test_pytest_fixture_collector_has_a_logger_provider(tracegrade_collector: TrajectoryCollector) -> None:
    tracer = tracegrade_collector.tracer_provider.get_tracer("t")
    logger = tracegrade_collector.logger_provider.get_logger("t")
    with tracer.start_as_current_span("chat m", attributes={"gen_ai.operation.name": "chat"}):
        logger.emit(_record("gen_ai.user.message", {"content": "hi"}))
        logger.emit(_record("gen_ai.choice", {"message": {"content": "hello"}}))
    assert tracegrade_collector.final_response == "hello"


def test_live_evaluation_grades_arguments_found_only_in_log_records() -> None:
    """create_eval_app + AgentEvaluator: the expected city is compared against the call recorded in logs."""

    def agent(query: str) -> str:
        city = query.removeprefix("Weather in ").rstrip("?")
        return _weather_agent(trace_provider.get_tracer("agent"), _emitter(_logs.get_logger_provider()), city)

    app, collector = create_eval_app(agent)
    trace_provider = collector.tracer_provider

    def case(case_id: str, city: str) -> EvalCase:
        turn = Invocation.simple(
            f"Weather in {city}?", expected_tools=[ToolCall(name="get_weather", args={"city": "Bergen"})]
        )
        return EvalCase(eval_id=case_id, conversation=[turn])

    config = EvalConfig(criteria={"trajectory": CriterionConfig(threshold=1.0, check_args=True)})
    report = AgentEvaluator(app, collector=collector, config=config).evaluate_sync(
        EvalSet(eval_set_id="logs", eval_cases=[case("bergen", "Bergen"), case("oslo", "Oslo")])
    )
    by_case = {r.eval_id: r for r in report.results}
    assert by_case["bergen"].passed
    assert not by_case["oslo"].passed
    reason = " ".join(str(c.details) for c in by_case["oslo"].criterion_results)
    assert "Oslo" in reason and "not captured" not in reason
    trace_provider.shutdown()
