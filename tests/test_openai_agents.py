"""An OpenAI Agents SDK ``agents.Agent`` graded live with a scripted model: the SDK's own traces become
OpenTelemetry spans through tracegrade's bridge. Needs openai-agents (not a tracegrade dependency): skipped
unless it is installed; CI runs it in its agents venv (``.venv-agents``, see .ci/run)."""

from __future__ import annotations

import json
from typing import Any

import pytest

agents = pytest.importorskip("agents")

from agents import Agent, ModelResponse, function_tool  # noqa: E402
from agents.models.interface import Model  # noqa: E402
from agents.usage import Usage  # noqa: E402
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText  # noqa: E402

from tracegrade.evaluation.evaluator import AgentEvaluator, create_eval_app  # noqa: E402
from tracegrade.evaluation.openai_agents import OpenAIAgentsAdapter  # noqa: E402
from tracegrade.models.config import CriterionConfig, EvalConfig  # noqa: E402
from tracegrade.models.dataset import EvalSet  # noqa: E402

agents.set_trace_processors([])  # no export to OpenAI from the tests (tracegrade's bridge is added after)


class ScriptedWeatherModel(Model):
    """Calls get_weather with the city ending the last user message, then answers with the tool's output."""

    async def get_response(self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any) -> ModelResponse:
        items = [input] if isinstance(input, str) else list(input)
        last = items[-1]
        if isinstance(last, dict) and last.get("type") == "function_call_output":
            text = f"It is {json.loads(last['output'])['sky']}."
            content = [ResponseOutputText(annotations=[], text=text, type="output_text")]
            output: list[Any] = [
                ResponseOutputMessage(id="m1", content=content, role="assistant", status="completed", type="message")
            ]
        else:
            city = str(last["content"] if isinstance(last, dict) else last).rsplit(" ", 1)[-1].rstrip("?")
            arguments = json.dumps({"city": city})
            output = [
                ResponseFunctionToolCall(
                    arguments=arguments, call_id=f"c-{len(items)}", name="get_weather", type="function_call"
                )
            ]
        return ModelResponse(output=output, usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return json.dumps({"city": city, "sky": "rainy" if city == "Bergen" else "sunny"})


def test_agents_sdk_agent_graded_live_with_its_tool_arguments() -> None:
    agent = Agent(name="weather", instructions="Help.", model=ScriptedWeatherModel(), tools=[get_weather])
    app, collector = create_eval_app(agent)
    config = EvalConfig(criteria={"trajectory": CriterionConfig(threshold=1.0, check_args=True)})
    evaluator = AgentEvaluator(app, collector=collector, config=config)
    assert isinstance(evaluator.adapter, OpenAIAgentsAdapter)
    turn = {
        "user_content": {"role": "user", "content": "Weather in {city}?"},
        "expected_tool_trajectory": [{"name": "get_weather", "args": {"city": "Bergen"}}],
    }
    cases = [
        {"eval_id": c.lower(), "conversation": [json.loads(json.dumps(turn).replace("{city}", c))]}
        for c in ("Bergen", "Oslo")
    ]
    report = evaluator.evaluate_sync(EvalSet.model_validate({"eval_set_id": "agents_sdk", "eval_cases": cases}))
    by_case = {r.eval_id: r for r in report.results}
    assert by_case["bergen"].passed, by_case["bergen"].criterion_results
    assert by_case["bergen"].actual_tool_calls[0].args == {"city": "Bergen"}
    assert by_case["bergen"].actual_response == "It is rainy."
    assert not by_case["oslo"].passed
    assert by_case["oslo"].actual_tool_calls[0].args == {"city": "Oslo"}
    collector.tracer_provider.shutdown()


def test_a_multi_turn_case_carries_the_conversation() -> None:
    agent = Agent(name="weather", instructions="Help.", model=ScriptedWeatherModel(), tools=[get_weather])
    app, collector = create_eval_app(agent)
    turns = [{"user_content": {"role": "user", "content": f"Weather in {c}?"}} for c in ("Bergen", "Oslo")]
    eval_set = EvalSet.model_validate({"eval_cases": [{"eval_id": "two", "conversation": turns}]})
    config = EvalConfig(criteria={"tool_name_match": CriterionConfig(threshold=0.0)})
    [result] = AgentEvaluator(app, collector=collector, config=config).evaluate_sync(eval_set).results
    assert [c.args for c in result.actual_tool_calls] == [{"city": "Bergen"}, {"city": "Oslo"}]
    assert result.actual_response == "It is sunny."
    collector.tracer_provider.shutdown()
