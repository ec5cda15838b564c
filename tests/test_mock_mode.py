"""EvalConfig.mock_mode: the agent is never called, each turn is graded on what it expects, and simulated
cases are refused before the run starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from tracegrade import (
    AgentEvaluator,
    CriteriaConfig,
    CriterionConfig,
    EvalConfig,
    EvalSet,
    ReporterConfig,
    ToolCall,
)
from tracegrade.errors import ConfigError
from tracegrade.evaluation.simulator import ConversationScenario
from tracegrade.models import EvalCase, Invocation, MessageContent


def mock_config(**criteria: CriterionConfig) -> EvalConfig:
    return EvalConfig(
        criteria=CriteriaConfig(**criteria),
        mock_mode=True,
        reporter=ReporterConfig(enabled=False),
    )


def refusing_agent(message: str) -> str:
    raise AssertionError(f"mock_mode called the agent with {message!r}")


def two_turn_case() -> EvalCase:
    return EvalCase(
        eval_id="trip",
        conversation=[
            Invocation.simple(
                "find a flight to Lisbon",
                "TP 1351 leaves at 09:10.",
                expected_tools=[ToolCall(name="search_flights", args={"to": "LIS"})],
                expected_node_order=["planner", "search"],
            ),
            Invocation(
                user_content=MessageContent.user("book it"),
                expected_final_response=MessageContent.assistant("Booked TP 1351."),
                expected_tool_trajectory=[ToolCall(name="book", args={"flight": "TP 1351"})],
                expected_intermediate_responses=[MessageContent.assistant("Checking seats.")],
                expected_node_order=["booker"],
            ),
        ],
    )


async def test_every_turn_is_graded_on_its_expectations_without_calling_the_agent():
    config = mock_config(
        trajectory=CriterionConfig.trajectory(check_args=True),
        node_order=CriterionConfig.node_order(),
        rouge_match=CriterionConfig.rouge_match(threshold=0.9),
    )
    report = await AgentEvaluator(refusing_agent, config=config).evaluate(
        EvalSet(eval_set_id="dry", eval_cases=[two_turn_case()])
    )
    (result,) = report.results
    assert result.error is None and result.passed
    assert {c.criterion: c.score for c in result.criterion_results} == {
        "tool_trajectory_avg_score": 1.0,
        "node_order_score": 1.0,
        "rouge_match": 1.0,
    }
    assert [(t.name, t.args) for t in result.actual_tool_calls] == [
        ("search_flights", {"to": "LIS"}),
        ("book", {"flight": "TP 1351"}),
    ]
    assert result.actual_response == "Booked TP 1351."


async def test_expectations_that_cannot_be_met_fail_in_mock_mode():
    unreachable = EvalCase(
        eval_id="typo",
        conversation=[Invocation.simple("hi", "Hello there, traveller!")],
    )
    config = mock_config(
        rouge_match=CriterionConfig.rouge_match(threshold=0.9),
        contains_keywords=CriterionConfig.contains_keywords(["refund"]),
    )
    report = await AgentEvaluator(refusing_agent, config=config).evaluate(
        EvalSet(eval_set_id="dry", eval_cases=[unreachable])
    )
    (result,) = report.results
    scores = {c.criterion: c.score for c in result.criterion_results}
    assert scores["rouge_match"] == 1.0
    assert scores["contains_keywords"] == 0.0
    assert not result.passed and result.error is None


async def test_a_simulated_case_is_refused_before_anything_runs(tmp_path: Path):
    simulated = EvalCase.simulated("chat", ConversationScenario(starting_prompt="hi", goals=["say hello"]))
    config = mock_config(rouge_match=CriterionConfig.rouge_match())
    with pytest.raises(ConfigError, match=r"\$\.mock_mode: .*'chat' is a simulated case"):
        await AgentEvaluator(refusing_agent, config=config).evaluate(EvalSet(eval_set_id="dry", eval_cases=[simulated]))
