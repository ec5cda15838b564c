"""A Google ADK ``LlmAgent`` graded live: ADK's runner, a session per case, a scripted model, content from ADK's
log records. Needs google-adk, which is not a tracegrade dependency: skipped unless it is installed; CI runs it
in its agents venv (.ci/run builds .venv-agents from .ci/agents-requirements.txt):

    .venv-agents/bin/python -m pytest -p no:cacheprovider -p tests.support.loopback_only tests/test_adk_agent.py
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("google.adk")
os.environ.setdefault("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")  # ADK: content in log records

from google.adk.agents import LlmAgent
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.genai import types

from tracegrade.evaluation.adk_agent import AdkAdapter
from tracegrade.evaluation.evaluator import AgentEvaluator, create_eval_app
from tracegrade.models.config import EvalConfig
from tracegrade.models.dataset import EvalSet

DATA = Path(__file__).parent / "data" / "adk"


class ScriptedWeatherModel(BaseLlm):
    """Calls get_weather with the city named in the last user message, then answers from the tool's result."""

    model: str = "scripted-weather"

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        last = llm_request.contents[-1]
        response = next((p.function_response for p in last.parts or [] if p.function_response), None)
        if response is not None:
            text = f"It is {response.response['sky']} in {response.response['city']}."
            yield LlmResponse(content=types.Content(role="model", parts=[types.Part(text=text)]))
            return
        city = (last.parts[0].text or "").rsplit(" ", 1)[-1].rstrip("?")
        # with an id, as most providers give one: ADK then keeps it on the tool span, and the mapper joins the
        # span to the arguments in the model's output (without one ADK's span and log ids differ; see the README)
        call = types.FunctionCall(name="get_weather", args={"city": city}, id=f"call-{len(llm_request.contents)}")
        yield LlmResponse(content=types.Content(role="model", parts=[types.Part(function_call=call)]))


def get_weather(city: str) -> dict[str, Any]:
    """The weather in a city."""
    return {"city": city, "sky": "rainy" if city == "Bergen" else "sunny"}


def _agent() -> LlmAgent:
    return LlmAgent(name="weather_agent", model=ScriptedWeatherModel(), tools=[get_weather], instruction="Help.")


def test_create_eval_app_runs_an_adk_agent_and_grades_arguments_from_log_records(tmp_path: Path) -> None:
    app, collector = create_eval_app(_agent())
    received: list[str] = []
    keep = collector.add_log
    collector.add_log = lambda record: (received.append(record.event_name), keep(record))[1]  # type: ignore[method-assign]
    evaluator = AgentEvaluator(app, collector=collector, config=EvalConfig.from_file(DATA / "test_config.json"))
    assert isinstance(evaluator.adapter, AdkAdapter)
    eval_set = EvalSet.model_validate(
        {
            "eval_set_id": "adk_live",
            "eval_cases": [
                {
                    "eval_id": city.lower(),
                    "conversation": [
                        {
                            "user_content": {"role": "user", "content": f"What is the weather in {city}?"},
                            "expected_tool_trajectory": [{"name": "get_weather", "args": {"city": "Bergen"}}],
                            "expected_final_response": {"role": "assistant", "content": "It is rainy in Bergen."},
                        }
                    ],
                }
                for city in ("Bergen", "Oslo")
            ],
        }
    )
    report = evaluator.evaluate_sync(eval_set)
    by_case = {r.eval_id: r for r in report.results}
    bergen = {c.criterion: c for c in by_case["bergen"].criterion_results}
    assert bergen["tool_trajectory_avg_score"].score == 1.0, bergen["tool_trajectory_avg_score"]
    assert bergen["rouge_match"].score == 1.0
    assert by_case["bergen"].actual_tool_calls[0].args == {"city": "Bergen"}
    oslo = {c.criterion: c for c in by_case["oslo"].criterion_results}
    assert oslo["tool_trajectory_avg_score"].score == 0.0
    assert oslo["tool_trajectory_avg_score"].details["invocations"][0]["actual"] == [
        {"name": "get_weather", "args": {"city": "Oslo"}}
    ]
    # ADK's tool span carries no arguments: they came from its log records
    assert "gen_ai.client.inference.operation.details" in received
    collector.tracer_provider.shutdown()


def test_a_multi_turn_case_is_one_adk_session() -> None:
    adapter = AdkAdapter(_agent())
    app, collector = create_eval_app(adapter)
    turns = [
        {
            "user_content": {"role": "user", "content": f"Weather in {c}?"},
            "expected_tool_trajectory": [{"name": "get_weather", "args": {"city": c}}],
        }
        for c in ("Bergen", "Oslo")
    ]
    eval_set = EvalSet.model_validate({"eval_cases": [{"eval_id": "two", "conversation": turns}]})
    report = AgentEvaluator(
        app, collector=collector, config=EvalConfig.from_file(DATA / "test_config.json")
    ).evaluate_sync(eval_set)
    [result] = report.results
    assert len(adapter._sessions) == 1  # both turns went to one ADK session
    scores = {c.criterion: c.score for c in result.criterion_results}
    assert scores["tool_trajectory_avg_score"] == 1.0
    collector.tracer_provider.shutdown()


def test_an_adk_app_runs_with_its_plugins_and_name(tmp_path: Path) -> None:
    """``app = App(root_agent=..., plugins=[...])`` is what ``adk run`` loads first from an agent module: ``tracegrade
    run`` finds it as ``app`` and runs it (the root agent under the app's name, the plugins called)."""
    from google.adk.apps import App
    from google.adk.plugins.base_plugin import BasePlugin

    from tests.support.grading_cli import read_report, run_cli

    seen: list[str] = []

    class Recording(BasePlugin):
        async def before_run_callback(self, *, invocation_context: Any) -> None:
            seen.append(invocation_context.app_name)

    adk_app = App(name="weather_app", root_agent=_agent(), plugins=[Recording(name="recording")])
    sys.modules["weather_app_module_for_test"] = type(sys)("weather_app_module_for_test")
    sys.modules["weather_app_module_for_test"].app = adk_app  # type: ignore[attr-defined]
    case = {
        "eval_id": "bergen",
        "conversation": [
            {
                "user_content": {"role": "user", "content": "What is the weather in Bergen?"},
                "expected_tool_trajectory": [{"name": "get_weather", "args": {"city": "Bergen"}}],
                "expected_final_response": {"role": "assistant", "content": "It is rainy in Bergen."},
            }
        ],
    }
    EvalSet.model_validate({"eval_set_id": "app", "eval_cases": [case]}).to_file(tmp_path / "cases.json")
    try:
        result = run_cli(
            "run", "weather_app_module_for_test", "--evalset", tmp_path / "cases.json", "--out", tmp_path / "out",
            "--format", "json",
        )  # fmt: skip
    finally:
        del sys.modules["weather_app_module_for_test"]
    assert result.exit_code == 0, result.output
    assert read_report(tmp_path / "out").summary.passed_cases == 1
    assert seen == ["weather_app"]


class _StockModel(BaseLlm):
    """Asks for two lookups in one turn (with ids), then answers once both came back."""

    model: str = "scripted-stock"

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        last = llm_request.contents[-1]
        returned = [p.function_response for p in last.parts or [] if p.function_response]
        if returned:
            text = "; ".join(f"{r.response['sku']}: {r.response['stock']}" for r in returned)
            yield LlmResponse(content=types.Content(role="model", parts=[types.Part(text=text)]))
            return
        calls = [types.FunctionCall(name="stock", args={"sku": sku}, id=f"c-{sku}") for sku in ("b", "東京")]
        yield LlmResponse(content=types.Content(role="model", parts=[types.Part(function_call=c) for c in calls]))


def stock(sku: str) -> dict[str, Any]:
    """Whether a SKU is in stock."""
    return {"sku": sku, "stock": "in" if sku == "b" else "out"}


def test_a_parallel_batch_has_its_calls_only_each_with_its_result() -> None:
    agent = LlmAgent(name="stock_agent", model=_StockModel(), tools=[stock], instruction="Help.")
    app, collector = create_eval_app(agent)
    eval_set = EvalSet.model_validate(
        {"eval_cases": [{"eval_id": "two", "conversation": [{"user_content": {"role": "user", "content": "go"}}]}]}
    )
    config = EvalConfig.model_validate({"criteria": {"tool_name_match": {"threshold": 0.0}}})
    [result] = AgentEvaluator(app, collector=collector, config=config).evaluate_sync(eval_set).results
    # ADK's extra "execute_tool (merged)" span is no call; the results come from what the model was given back
    calls = [(c.name, c.call_id, c.args, c.result) for c in result.actual_tool_calls]
    assert calls == [
        ("stock", "c-b", {"sku": "b"}, {"sku": "b", "stock": "in"}),
        ("stock", "c-東京", {"sku": "東京"}, {"sku": "東京", "stock": "out"}),
    ]
    assert result.actual_response == "b: in; 東京: out"
