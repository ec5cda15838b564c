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


# ---- the SDK's own OpenAI models over HTTP (a scripted server on 127.0.0.1): model calls keep their content ----

_BATCH = [("c1", "lookup", {"sku": "b"}), ("c2", "lookup", {"sku": "a"})]


def _scripted_openai(api: str, request: Any) -> Any:
    """A Responses or Chat Completions reply: the two lookups at once, then the answer once both returned."""
    import time

    from tests.support.llm_server import Reply

    usage = {"input_tokens": 11, "output_tokens": 4, "total_tokens": 15}
    body = request.body
    if api == "responses":
        answered = any(isinstance(i, dict) and i.get("type") == "function_call_output" for i in body["input"])
        text = {"type": "output_text", "text": "both in stock ✓", "annotations": []}
        output = (
            [{"type": "message", "id": "m1", "status": "completed", "role": "assistant", "content": [text]}]
            if answered
            else [
                {"type": "function_call", "id": f"fc_{c}", "call_id": c, "name": n, "arguments": json.dumps(a)}
                for c, n, a in _BATCH
            ]
        )
        payload: dict[str, Any] = {"id": "resp_1", "object": "response", "created_at": int(time.time())}
        payload |= {"status": "completed", "model": "gpt-scripted", "output": output, "tools": []}
        payload |= {"parallel_tool_calls": True, "tool_choice": "auto", "instructions": "Be brief.", "usage": usage}
        return Reply(raw_body=json.dumps(payload))
    answered = any(m.get("role") == "tool" for m in body["messages"])
    calls = [{"id": c, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}} for c, n, a in _BATCH]
    message = (
        {"role": "assistant", "content": "both in stock ✓"} if answered else {"role": "assistant", "tool_calls": calls}
    )
    choice = {"index": 0, "message": message, "finish_reason": "stop" if answered else "tool_calls"}
    chat_usage = {"prompt_tokens": 11, "completion_tokens": 4, "total_tokens": 15}
    payload = {"id": "chat-1", "object": "chat.completion", "created": int(time.time()), "model": "gpt-scripted"}
    return Reply(raw_body=json.dumps(payload | {"choices": [choice], "usage": chat_usage}))


@function_tool
def lookup(sku: str) -> str:
    """Whether a SKU is in stock."""
    return f"{sku} in stock"


@pytest.mark.parametrize("api", ["responses", "chat"])
def test_openai_model_calls_keep_tokens_ids_and_messages(api: str) -> None:
    from agents import OpenAIChatCompletionsModel, OpenAIResponsesModel
    from openai import AsyncOpenAI

    from tests.support.llm_server import LLMServer

    with LLMServer(responder=lambda request: _scripted_openai(api, request)) as server:
        client = AsyncOpenAI(base_url=server.base_url, api_key="test-key", max_retries=0)
        model_class = OpenAIResponsesModel if api == "responses" else OpenAIChatCompletionsModel
        agent = Agent(name="stock", instructions="Be brief.", model=model_class("gpt-scripted", client), tools=[lookup])
        app, collector = create_eval_app(agent)
        turn = {"user_content": {"role": "user", "content": "check b and a"}}
        eval_set = EvalSet.model_validate({"eval_cases": [{"eval_id": api, "conversation": [turn]}]})
        config = EvalConfig(criteria={"tool_name_match": CriterionConfig(threshold=0.0)})
        [result] = AgentEvaluator(app, collector=collector, config=config).evaluate_sync(eval_set).results
        collector.tracer_provider.shutdown()
    calls = [(t.call_id, t.name, t.args, t.result) for t in result.actual_tool_calls]
    assert calls == [("c1", "lookup", {"sku": "b"}, "b in stock"), ("c2", "lookup", {"sku": "a"}, "a in stock")]
    assert result.actual_response == "both in stock ✓"
    usage = result.agent_token_usage
    assert (usage.calls, usage.input_tokens, usage.output_tokens) == (2, 22, 8)
    first, second = result.node_details
    assert first.model == second.model == "gpt-scripted"
    assert [t["call_id"] for t in first.tool_calls] == ["c1", "c2"]
    assert [m["role"] for m in second.input_messages] == ["system", "user", "assistant", "tool", "tool"]
    assert second.input_messages[1]["content"] == "check b and a" and second.response_text == "both in stock ✓"


class _ExplodeThenAnswer(Model):
    """Asks for ``explode`` once, then answers with what the tool returned."""

    async def get_response(self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any) -> ModelResponse:
        items = [input] if isinstance(input, str) else list(input)
        last = items[-1]
        if isinstance(last, dict) and last.get("type") == "function_call_output":
            content = [ResponseOutputText(annotations=[], text=str(last["output"]), type="output_text")]
            output: list[Any] = [
                ResponseOutputMessage(id="m1", content=content, role="assistant", status="completed", type="message")
            ]
        else:
            output = [ResponseFunctionToolCall(arguments="{}", call_id="e1", name="explode", type="function_call")]
        return ModelResponse(output=output, usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


@function_tool(failure_error_function=lambda ctx, error: f"tool failed: {error}")
def explode() -> str:
    """Always fails."""
    raise ValueError("the warehouse is on fire")


def test_a_failing_tool_records_why_it_failed_and_the_run_goes_on() -> None:
    agent = Agent(name="fragile", instructions="Help.", model=_ExplodeThenAnswer(), tools=[explode])
    app, collector = create_eval_app(agent)
    eval_set = EvalSet.model_validate(
        {"eval_cases": [{"eval_id": "boom", "conversation": [{"user_content": {"role": "user", "content": "go"}}]}]}
    )
    config = EvalConfig(criteria={"tool_name_match": CriterionConfig(threshold=0.0)})
    [result] = AgentEvaluator(app, collector=collector, config=config).evaluate_sync(eval_set).results
    collector.tracer_provider.shutdown()
    [call] = result.actual_tool_calls
    assert call.result == "tool failed: the warehouse is on fire"
    assert call.error == "Error running tool (non-fatal): the warehouse is on fire"  # not only the SDK's label
    assert result.error is None and result.actual_response == "tool failed: the warehouse is on fire"
