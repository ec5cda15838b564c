"""Goal-driven user simulation: a pydantic-ai agent (FunctionModel) against a simulated user on the local server."""

from __future__ import annotations

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from tests.support import simulated_users
from tests.support.judges_setup import (  # noqa: F401
    JUDGE_MODEL,
    fast_runtime,
    fresh_server,
    judge_config,
    scripted_server,
)
from tests.support.llm_server import LLMServer, Reply, Responder
from tests.support.simulated_users import SIM_MARKER
from tracegrade.criteria.llm import ResponseMatchCriterion, SafetyCriterion
from tracegrade.evaluation.simulator import ConversationScenario, UserSimulator
from tracegrade.judges import judge_runtime
from tracegrade.models.config import EvalConfig, UserSimulatorConfig


def shop_agent(seen_histories: list[int]) -> Agent:
    """A pydantic-ai agent whose model answers from the latest user message and records history length."""

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen_histories.append(len(messages))
        last = next(p.content for p in reversed(messages[-1].parts) if isinstance(p, UserPromptPart))
        text = "Order 42 ships tomorrow." if "42" in str(last) else "Anything else I can help with?"
        return ModelResponse(parts=[TextPart(text)])

    return Agent(FunctionModel(model))


def scripted_user(user_lines: list[str], goals_verdict: Reply) -> Responder:
    """The scripted user; every judge other than the goals judge finds the conversation safe."""
    safe = Reply.score(1.0, "safe", is_safe=True, issues=[], categories={})
    return simulated_users.scripted_user(user_lines, goals_verdict, other_judges=safe)


def simulator(server: LLMServer, max_turns: int = 10, **kwargs) -> UserSimulator:
    config = UserSimulatorConfig(
        model=JUDGE_MODEL, api_base=server.base_url, api_key="test-key", api_style="chat", max_invocations=max_turns
    )
    return UserSimulator(config=config, runtime=fast_runtime(), **kwargs)


SCENARIO = ConversationScenario(
    scenario_id="order-status",
    description="A customer wants to know when their order ships",
    starting_prompt="Where is my order 42?",
    goals=["learn when order 42 ships"],
    persona="impatient customer",
)


async def test_conversation_ends_on_the_stop_signal_and_is_graded(server):
    server.responder = scripted_user(
        ["Great, thanks! </finished>"],
        Reply.score(1.0, "ship date given", achieved_goals=["learn when order 42 ships"], unachieved_goals=[]),
    )
    histories: list[int] = []
    safety = SafetyCriterion(judge_config(server))
    result = await simulator(server, criteria=[safety]).run(shop_agent(histories), SCENARIO)
    assert result.error is None
    assert result.stopped_by == "stop_signal" and result.turns == 1
    assert result.conversation == [
        {"role": "user", "content": "Where is my order 42?"},
        {"role": "assistant", "content": "Order 42 ships tomorrow."},
    ]
    assert result.goals_achieved == ["learn when order 42 ships"] and result.completed
    assert result.criterion_scores == {"safety_v1": 1.0, "simulation_goals": 1.0}
    assert result.simulator_token_usage.calls == 1
    sim_prompt = next(r.prompt for r in server.requests if SIM_MARKER in r.prompt)
    assert "impatient customer" in sim_prompt and "</finished>" in sim_prompt
    assert "ASSISTANT: Order 42 ships tomorrow." in sim_prompt


async def test_conversation_stops_at_the_turn_limit_with_history_carried(server):
    server.responder = scripted_user(
        ["Can you check again?", "And what about tomorrow?", "unused"],
        Reply.score(0.0, "never resolved", achieved_goals=[], unachieved_goals=["get a refund"]),
    )
    histories: list[int] = []
    scenario = SCENARIO.model_copy(update={"goals": ["get a refund"], "max_turns": 3})
    result = await simulator(server).run(shop_agent(histories), scenario)
    assert result.stopped_by == "turn_limit" and result.turns == 3
    assert [m["role"] for m in result.conversation] == ["user", "assistant"] * 3
    assert result.conversation[2]["content"] == "Can you check again?"
    assert histories == [1, 3, 5]  # the agent saw the whole conversation each turn
    sim_calls = [r for r in server.requests if SIM_MARKER in r.prompt]
    assert len(sim_calls) == 2  # no user message is generated after the last allowed turn
    assert not result.completed and result.goals_achieved == []
    assert result.criterion_scores == {"simulation_goals": 0.0}


async def test_a_generated_opening_and_a_plain_async_callable(server):
    server.responder = scripted_user(
        ["Hi, where is order 42?", "Perfect </finished>"],
        Reply.score(1.0, achieved_goals=["learn when order 42 ships"]),
    )
    seen: list[tuple[str, list[dict]]] = []

    async def agent(message, history):  # the AgentEvaluator calling convention: user text (+ history)
        seen.append((message, list(history)))
        return "It ships tomorrow."

    scenario = SCENARIO.model_copy(update={"starting_prompt": ""})
    result = await simulator(server).run(agent, scenario)
    assert result.conversation[0] == {"role": "user", "content": "Hi, where is order 42?"}
    assert result.stopped_by == "stop_signal" and result.turns == 1 and result.completed
    assert seen == [("Hi, where is order 42?", [])]
    assert result.simulator_token_usage.calls == 2


async def test_an_agent_error_stops_the_conversation(server):
    server.responder = scripted_user([], Reply.score(0.0, achieved_goals=[]))

    def broken(message):
        raise RuntimeError("backend down")

    result = await simulator(server).run(broken, SCENARIO)
    assert result.stopped_by == "error" and "backend down" in result.error
    assert result.turns == 0 and not result.completed


async def test_a_simulated_conversation_is_graded_by_other_criteria(server):
    server.responder = scripted_user(["Thanks </finished>"], Reply.score(1.0, achieved_goals=[]))
    result = await simulator(server).run(shop_agent([]), SCENARIO)
    actual, case = result.to_eval_inputs(SCENARIO)
    assert actual.actual_response == "Order 42 ships tomorrow."
    assert [t.user_input for t in actual.turns] == ["Where is my order 42?"]
    assert case.eval_id == "order-status" and case.metadata["goals"] == SCENARIO.goals
    case.conversation[0].expected_final_response = case.conversation[0].user_content.assistant("Tomorrow.")
    server.script(Reply.score(0.9, "same date"))
    with judge_runtime(fast_runtime()):
        graded = await ResponseMatchCriterion(judge_config(server)).evaluate(actual, case)
    assert graded.score == pytest.approx(0.9)
    assert "Order 42 ships tomorrow." in server.requests[-1].prompt


def test_simulator_settings_come_from_the_eval_config():
    config = EvalConfig(
        user_simulator_config=UserSimulatorConfig(
            model="openai/sim", max_invocations=4, temperature=0.2, stop_signal="[done]"
        )
    )
    sim = UserSimulator.from_eval_config(config)
    settings = (sim.model, sim.max_turns, sim.config.temperature, sim.config.stop_signal)
    assert settings == ("openai/sim", 4, 0.2, "[done]")
    assert UserSimulator(model="openai/x", max_turns=2).max_turns == 2
