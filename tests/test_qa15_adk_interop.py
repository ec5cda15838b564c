"""An ADK user's files and agents, side by side with google-adk 2.13 itself: an agent that calls another agent as a
tool (``AgentTool``) scores as ADK scores it, ADK's judge metrics keep ADK's sample count, and a thought part of
an ADK eval set survives the trip through tracegrade back into a file ADK loads. Needs google-adk: skipped without
it; CI runs it in its agents venv (.ci/run):

    .venv-agents/bin/python -m pytest -p no:cacheprovider -p tests.support.loopback_only tests/test_qa15_adk_interop.py
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("google.adk")
pytest.importorskip("rouge_score")  # ADK's response_match_score evaluator
os.environ.setdefault("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")  # ADK: content in log records

from google.adk.agents import LlmAgent
from google.adk.evaluation.eval_case import EvalCase as AdkEvalCase
from google.adk.evaluation.eval_case import IntermediateData, get_all_tool_calls
from google.adk.evaluation.eval_case import Invocation as AdkInvocation
from google.adk.evaluation.eval_config import EvalConfig as AdkEvalConfig
from google.adk.evaluation.eval_config import get_eval_metrics_from_config
from google.adk.evaluation.eval_metrics import JudgeModelOptions, LlmAsAJudgeCriterion, RubricsBasedCriterion
from google.adk.evaluation.eval_rubrics import Rubric, RubricContent
from google.adk.evaluation.eval_set import EvalSet as AdkEvalSet
from google.adk.evaluation.evaluation_generator import EvaluationGenerator
from google.adk.evaluation.final_response_match_v1 import RougeEvaluator
from google.adk.evaluation.local_eval_sets_manager import load_eval_set_from_file
from google.adk.evaluation.simulation.user_simulator_provider import UserSimulatorProvider
from google.adk.evaluation.trajectory_evaluator import TrajectoryEvaluator
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.tools.agent_tool import AgentTool
from google.genai import types

from tracegrade.evaluation.evaluator import AgentEvaluator, create_eval_app
from tracegrade.models.adk_files import eval_set_to_adk
from tracegrade.models.config import EvalConfig
from tracegrade.models.dataset import EvalSet


def _text(role: str, *texts: str) -> types.Content:
    return types.Content(role=role, parts=[types.Part(text=t) for t in texts])


def _call(name: str, call_id: str, **args: Any) -> LlmResponse:
    call = types.FunctionCall(name=name, args=args, id=call_id)
    return LlmResponse(content=types.Content(role="model", parts=[types.Part(function_call=call)]))


class _Router(BaseLlm):
    """Hands "transfer" questions to the weather sub-agent; asks its forecaster tool (an agent) otherwise."""

    model: str = "scripted-router"

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        returned = [p.function_response for p in llm_request.contents[-1].parts or [] if p.function_response]
        if returned:
            yield LlmResponse(content=_text("model", f"The forecaster says: {returned[0].response['result']}"))
        elif "transfer" in (llm_request.contents[-1].parts[0].text or ""):
            yield _call("transfer_to_agent", "t1", agent_name="weather_desk")
        else:
            yield _call("forecaster", "f1", request="Bergen")


class _Forecaster(BaseLlm):
    """Looks the weather up, then answers from the tool's result."""

    model: str = "scripted-forecaster"

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        returned = [p.function_response for p in llm_request.contents[-1].parts or [] if p.function_response]
        if returned:
            yield LlmResponse(content=_text("model", f"It is {returned[0].response['sky']} in Bergen."))
        else:
            yield _call("get_weather", "w1", city="Bergen", options={"units": ["metric"], "días": 2})


def get_weather(city: str, options: dict[str, Any]) -> dict[str, Any]:
    """The weather in a city."""
    return {"sky": "rainy"}


def _router_agent() -> LlmAgent:
    forecaster = LlmAgent(name="forecaster", model=_Forecaster(), tools=[get_weather], description="Forecasts.")
    desk = LlmAgent(name="weather_desk", model=_Forecaster(), tools=[get_weather], description="Weather questions.")
    return LlmAgent(
        name="router", model=_Router(), tools=[AgentTool(agent=forecaster)], sub_agents=[desk], instruction="Route."
    )


async def _adk_runs(agent: LlmAgent, cases: list[AdkEvalCase]) -> dict[str, list[AdkInvocation]]:
    """Each case run as ADK's own evaluation runs it: with the generator its LocalEvalService calls (that service
    needs pandas, from google-adk[eval], which the agents venv does not install)."""
    return {
        case.eval_id: await EvaluationGenerator._generate_inferences_from_root_agent(
            agent, user_simulator=UserSimulatorProvider().provide(case), initial_session=case.session_input
        )
        for case in cases
    }


def test_an_agent_called_as_a_tool_scores_as_adk_scores_it(tmp_path: Path) -> None:
    """ADK's trajectory holds the calls of the session's agents (the router, and the sub-agent it transfers to),
    not the calls an AgentTool's agent makes inside its own run: the eval set ADK records from a run lists the
    forecaster tool alone, and a run that calls it scores 1 in ADK and in tracegrade."""
    agent = _router_agent()
    cases = [
        AdkEvalCase(eval_id="agent_tool", conversation=[AdkInvocation(user_content=_text("user", "Bergen?"))]),
        AdkEvalCase(eval_id="transfer", conversation=[AdkInvocation(user_content=_text("user", "transfer me"))]),
    ]
    recorded = asyncio.run(_adk_runs(agent, cases))
    for case in cases:  # the expected side as ADK records it from a run (adk web's "add to eval set")
        [run] = recorded[case.eval_id]
        case.conversation[0].intermediate_data = IntermediateData(tool_uses=get_all_tool_calls(run.intermediate_data))
        case.conversation[0].final_response = run.final_response
    assert [c.name for c in cases[0].conversation[0].intermediate_data.tool_uses] == ["forecaster"]  # type: ignore[union-attr]
    assert [c.name for c in cases[1].conversation[0].intermediate_data.tool_uses] == [  # type: ignore[union-attr]
        "transfer_to_agent",
        "get_weather",
    ]
    adk_config = AdkEvalConfig(criteria={"tool_trajectory_avg_score": 1.0, "response_match_score": 0.8})
    metrics = {m.metric_name: m for m in get_eval_metrics_from_config(adk_config)}
    actual = asyncio.run(_adk_runs(agent, cases))
    adk_scores = {
        case.eval_id: {
            "tool_trajectory_avg_score": TrajectoryEvaluator(eval_metric=metrics["tool_trajectory_avg_score"])
            .evaluate_invocations(actual[case.eval_id], case.conversation)
            .overall_score,
            "rouge_match": RougeEvaluator(metrics["response_match_score"])
            .evaluate_invocations(actual[case.eval_id], case.conversation)
            .overall_score,
        }
        for case in cases
    }
    (tmp_path / "routes.evalset.json").write_text(
        AdkEvalSet(eval_set_id="routes", eval_cases=cases).model_dump_json(exclude_none=True)
    )
    (tmp_path / "test_config.json").write_text(adk_config.model_dump_json())

    app, collector = create_eval_app(agent)
    config = EvalConfig.from_file(tmp_path / "test_config.json")
    report = AgentEvaluator(app, collector=collector, config=config).evaluate_sync(
        EvalSet.from_file(tmp_path / "routes.evalset.json")
    )
    collector.tracer_provider.shutdown()
    ours = {r.eval_id: {c.criterion: c.score for c in r.criterion_results} for r in report.results}
    assert adk_scores == {
        "agent_tool": {"tool_trajectory_avg_score": 1.0, "rouge_match": 1.0},
        "transfer": {"tool_trajectory_avg_score": 1.0, "rouge_match": 1.0},
    }
    assert ours == adk_scores
    # the forecaster's own call is still in tracegrade's record of the run, for tracegrade's own criteria
    by_case = {r.eval_id: r for r in report.results}
    assert [c.name for c in by_case["agent_tool"].actual_tool_calls] == ["forecaster", "get_weather"]


def test_adk_judge_metrics_without_a_sample_count_sample_as_adk_does(tmp_path: Path) -> None:
    rubric = Rubric(rubric_id="polite", rubric_content=RubricContent(text_property="The reply is polite."))
    adk_config = AdkEvalConfig(
        criteria={
            "final_response_match_v2": LlmAsAJudgeCriterion(
                threshold=0.5, judge_model_options=JudgeModelOptions(judge_model="gemini-2.5-pro")
            ),
            "rubric_based_final_response_quality_v1": RubricsBasedCriterion(threshold=0.7, rubrics=[rubric]),
        }
    )
    # as a user writes it by hand, or ADK's own tools save it: options left at ADK's defaults are left out
    path = tmp_path / "test_config.json"
    path.write_text(adk_config.model_dump_json(exclude_defaults=True, exclude_none=True))
    assert "num_samples" not in path.read_text()
    # each judge evaluator reads its metric's criterion into its own criterion type, as ADK's evaluators do
    kinds = {
        "final_response_match_v2": LlmAsAJudgeCriterion,
        "rubric_based_final_response_quality_v1": RubricsBasedCriterion,
    }
    adk_samples = {}
    for metric in get_eval_metrics_from_config(AdkEvalConfig.model_validate_json(path.read_text())):
        if metric.metric_name in kinds:
            assert metric.criterion is not None
            criterion = kinds[metric.metric_name].model_validate(metric.criterion.model_dump())
            adk_samples[metric.metric_name] = criterion.judge_model_options.num_samples
    slots = dict(EvalConfig.from_file(path).criteria.enabled_slots())
    ours = {
        "final_response_match_v2": slots["llm_judge"].num_samples,
        "rubric_based_final_response_quality_v1": slots["rubric_based"].num_samples,
    }
    assert ours == adk_samples == {"final_response_match_v2": 5, "rubric_based_final_response_quality_v1": 5}
    assert slots["llm_judge"].judge_model == "gemini-2.5-pro"


def test_a_thought_part_survives_the_trip_back_into_adk(tmp_path: Path) -> None:
    """A part ADK marks as the model's thought (or signs) is text to ADK's response match, and stays a thought in
    the file written back for ADK."""
    final = types.Content(
        role="model",
        parts=[types.Part(text="Checking the forecast first.", thought=True), types.Part(text="Rain in Bergen.")],
    )
    case = AdkEvalCase(
        eval_id="thinking",
        conversation=[AdkInvocation(invocation_id="i1", user_content=_text("user", "Bergen?"), final_response=final)],
    )
    source = tmp_path / "thinking.evalset.json"
    source.write_text(AdkEvalSet(eval_set_id="thinking", eval_cases=[case]).model_dump_json(exclude_none=True))
    loaded = EvalSet.from_file(source)
    [turn] = loaded.eval_cases[0].conversation
    assert turn.expected_final_response is not None
    reference = turn.expected_final_response.get_text()
    assert reference == "Checking the forecast first. Rain in Bergen."  # ADK's ROUGE reads the thought too
    written = tmp_path / "back.evalset.json"
    written.write_text(json.dumps(eval_set_to_adk(loaded)))
    back = load_eval_set_from_file(str(written), "thinking")
    assert back.eval_cases[0].conversation[0].final_response == final
    response = AdkInvocation(user_content=_text("user", "Bergen?"), final_response=_text("model", "Rain in Bergen."))
    rouge = RougeEvaluator(get_eval_metrics_from_config(AdkEvalConfig(criteria={"response_match_score": 0.5}))[0])
    assert (
        rouge.evaluate_invocations([response], back.eval_cases[0].conversation).overall_score
        == rouge.evaluate_invocations([response], case.conversation).overall_score
    )
