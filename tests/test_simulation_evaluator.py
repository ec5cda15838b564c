"""Simulated conversations run by AgentEvaluator: a pydantic-ai agent (FunctionModel, with a tool) against a
simulated user scripted on the local OpenAI-compatible server, graded by SimulationGoalsCriterion and
tool_name_match; per-turn traces attributed by case id and turn index; JSON round trip; refusals."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from tests.support import simulated_users
from tests.support.judges_setup import JUDGE_MODEL, fresh_server, judge_config, scripted_server  # noqa: F401
from tests.support.llm_server import LLMServer, ReceivedRequest, Reply, Responder
from tests.support.simulated_users import GOALS_MARKER, SIM_MARKER
from tracegrade import AgentEvaluator, TrajectoryCollector
from tracegrade.capture import semconv
from tracegrade.errors import ConfigError, EvalSetError
from tracegrade.evaluation.simulator import ConversationScenario
from tracegrade.models import CriteriaConfig, CriterionConfig, EvalConfig, EvalSet, ReporterConfig, ToolCall
from tracegrade.models.config import UserSimulatorConfig
from tracegrade.models.dataset import EvalCase, Invocation

GOAL = "learn when order 42 ships"


def order_agent() -> Agent[None, str]:
    """Calls ``track_order`` for every order number in the user's message, then answers from its result."""

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        parts = messages[-1].parts if isinstance(messages[-1], ModelRequest) else []
        returns = [p for p in parts if isinstance(p, ToolReturnPart)]
        if returns:
            return ModelResponse(parts=[TextPart(" ".join(str(r.content) for r in returns))])
        prompt = next((str(p.content) for p in parts if isinstance(p, UserPromptPart)), "")
        orders = [w.strip("?.!,") for w in prompt.split() if w.strip("?.!,").isdigit()]
        if not orders:
            return ModelResponse(parts=[TextPart("Which order do you mean?")])
        calls = [ToolCallPart("track_order", {"order_id": o}, tool_call_id=f"call_{o}_{len(messages)}") for o in orders]
        return ModelResponse(parts=calls)

    agent: Agent[None, str] = Agent(FunctionModel(model), name="orders")

    @agent.tool_plain
    def track_order(order_id: str) -> str:
        return f"Order {order_id} ships tomorrow."

    return agent


def scripted_user(user_lines: list[str], goals_verdict: Reply) -> Responder:
    """The scripted user, 50 input and 10 output tokens a line; only the goals judge may be asked."""
    return simulated_users.scripted_user(user_lines, goals_verdict, input_tokens=50, output_tokens=10)


def run_config(server: LLMServer, *, simulator: bool = True, max_turns: int = 10) -> EvalConfig:
    criteria = CriteriaConfig(
        tool_name_match=CriterionConfig.tool_name_match(),
        simulation_goals=judge_config(server, threshold=0.5),
    )
    user = UserSimulatorConfig(
        model=JUDGE_MODEL, api_base=server.base_url, api_key="test-key", api_style="chat", max_invocations=max_turns
    )
    return EvalConfig(
        criteria=criteria,
        user_simulator_config=user if simulator else None,
        reporter=ReporterConfig(enabled=False),
        judge_cache=False,
        judge_retry_base_seconds=0.01,
    )


def order_case(eval_id: str = "order-42", **scenario_changes: Any) -> EvalCase:
    settings: dict[str, Any] = {
        "description": "A customer wants to know when their order ships",
        "starting_prompt": "Where is my order 42?",
        "goals": [GOAL],
        "persona": "impatient customer",
    }
    scenario = ConversationScenario(**{**settings, **scenario_changes})
    return EvalCase.simulated(eval_id, scenario, expected_tools=[ToolCall(name="track_order")], name="order status")


def evaluator(server: LLMServer, **config: Any) -> tuple[AgentEvaluator, TrajectoryCollector]:
    """An evaluator plus a second collector on its provider (the evaluator releases its own after grading)."""
    agent_evaluator = AgentEvaluator(order_agent(), config=run_config(server, **config))
    witness = TrajectoryCollector()
    agent_evaluator.provider.add_span_processor(witness)
    return agent_evaluator, witness


def scores(result) -> dict[str, float]:
    return {c.criterion: c.score for c in result.criterion_results}


async def test_a_simulated_case_ends_on_the_stop_signal_and_is_graded(server):
    server.responder = scripted_user(
        ["And order 7?", "Great, thanks! </finished>"],
        Reply.score(
            1.0, "both answered", achieved_goals=[GOAL], unachieved_goals=[], input_tokens=300, output_tokens=30
        ),
    )
    agent_evaluator, witness = evaluator(server)
    report = await agent_evaluator.evaluate(EvalSet(eval_set_id="sim", eval_cases=[order_case()]))

    (result,) = report.results
    assert result.error is None and result.passed, result.criterion_results
    assert scores(result) == {"tool_name_match_score": 1.0, "simulation_goals": 1.0}
    simulation = result.metadata["simulation"]
    assert (simulation["stopped_by"], simulation["turns"], simulation["completed"]) == ("stop_signal", 2, True)
    assert simulation["goals"] == [GOAL] and simulation["goals_achieved"] == [GOAL]
    assert [tc.name for tc in result.actual_tool_calls] == ["track_order", "track_order"]
    assert [tc.args for tc in result.actual_tool_calls] == [{"order_id": "42"}, {"order_id": "7"}]
    assert [(t["user_input"], t["agent_response"]) for t in result.turn_results] == [
        ("Where is my order 42?", "Order 42 ships tomorrow."),
        ("And order 7?", "Order 7 ships tomorrow."),
    ]
    assert result.actual_response == "Order 7 ships tomorrow."

    # the simulated user saw the conversation; the goals judge got the goals and the whole transcript
    sim_prompts = [r.prompt for r in server.requests if SIM_MARKER in r.prompt]
    assert len(sim_prompts) == 2
    assert "impatient customer" in sim_prompts[0] and "ASSISTANT: Order 42 ships tomorrow." in sim_prompts[0]
    goals_prompt = next(r.prompt for r in server.requests if GOALS_MARKER in r.prompt)
    assert GOAL in goals_prompt
    for line in (
        "USER: Where is my order 42?",
        "ASSISTANT: Order 42 ships tomorrow.",
        "USER: And order 7?",
        "ASSISTANT: Order 7 ships tomorrow.",
    ):
        assert line in goals_prompt

    # two simulated-user calls (50 + 10 tokens each) are judge usage, not agent usage
    assert simulation["simulator_token_usage"]["calls"] == 2
    assert simulation["simulator_token_usage"]["input_tokens"] == 100
    judge_usage = result.get_criterion_result("simulation_goals").token_usage
    assert result.token_usage.input_tokens == result.agent_token_usage.input_tokens + judge_usage.input_tokens + 100
    assert result.token_usage.calls == result.agent_token_usage.calls + judge_usage.calls + 2

    # each agent turn is its own trace under a tracegrade.turn root carrying the case id and turn index
    run_id = report.metadata["run_id"]
    assert len(set(result.trace_ids)) == 2
    for index, trace_id in enumerate(result.trace_ids):
        spans = witness.spans_for("order-42", index, run_id)
        assert {s.trace_id for s in spans} == {trace_id}
        (root,) = [s for s in spans if s.parent_span_id is None]
        assert root.name == f"{semconv.TURN_SPAN_PREFIX} order-42"
        assert root.attributes[semconv.CASE_ID] == "order-42" and root.attributes[semconv.TURN_INDEX] == index
        assert root.attributes[semconv.EVAL_SET_ID] == "sim" and root.attributes[semconv.RUN_ID] == run_id
        mapped = witness.execution_for("order-42", index, run_id)
        assert mapped.metadata["case_id"] == "order-42" and mapped.metadata["turn_index"] == index
    # the simulated user's and the judge's calls put no span into the run
    assert {s.trace_id for s in witness.spans_for()} == set(result.trace_ids)


async def test_a_simulated_case_stops_at_the_scenario_turn_limit(server):
    server.responder = scripted_user(
        ["Is there an update?", "Still nothing?", "unused"],
        Reply.score(0.0, "never refunded", achieved_goals=[], unachieved_goals=["get a refund"]),
    )
    agent_evaluator, witness = evaluator(server, max_turns=10)
    case = order_case("refund", goals=["get a refund"], max_turns=3)
    report = await agent_evaluator.evaluate(EvalSet(eval_set_id="sim", eval_cases=[case]))

    (result,) = report.results
    assert result.error is None and not result.passed
    assert scores(result) == {"tool_name_match_score": 1.0, "simulation_goals": 0.0}
    simulation = result.metadata["simulation"]
    assert (simulation["stopped_by"], simulation["turns"], simulation["completed"]) == ("turn_limit", 3, False)
    assert simulation["goals_achieved"] == [] and simulation["goals"] == ["get a refund"]
    assert [t["user_input"] for t in result.turn_results] == [
        "Where is my order 42?",
        "Is there an update?",
        "Still nothing?",
    ]
    assert [t["agent_response"] for t in result.turn_results][1:] == ["Which order do you mean?"] * 2
    assert [tc.name for tc in result.actual_tool_calls] == ["track_order"]
    assert len([r for r in server.requests if SIM_MARKER in r.prompt]) == 2  # none after the last allowed turn
    assert simulation["simulator_token_usage"]["calls"] == 2
    run_id = report.metadata["run_id"]
    assert [len({s.trace_id for s in witness.spans_for("refund", i, run_id)}) for i in range(3)] == [1, 1, 1]


async def test_a_scenario_model_a_plain_callable_and_an_agent_error(server):
    def respond(request: ReceivedRequest) -> Reply:
        if SIM_MARKER in request.prompt:
            return Reply(text="Thanks </finished>" if "ASSISTANT: It ships tomorrow" in request.prompt else "And 7?")
        return Reply.score(1.0, "answered", achieved_goals=[GOAL], unachieved_goals=[])

    server.responder = respond
    calls: list[tuple[str, str]] = []

    async def agent(message: str, config: dict[str, Any]) -> str:  # no spans of its own: no mapped messages
        case_id = config["thread_id"].rsplit("_", 1)[-1]
        calls.append((case_id, message))
        if case_id == "flaky" and message == "And 7?":
            raise RuntimeError("backend down")
        return "It ships tomorrow." if case_id == "plain" else "Order 42 is on its way."

    config = run_config(server, simulator=False)
    config.criteria.tool_name_match = None
    # the scenarios name the model; its endpoint comes from the environment variables litellm reads
    eval_set = EvalSet(
        eval_set_id="sim", eval_cases=[order_case("plain", model=JUDGE_MODEL), order_case("flaky", model=JUDGE_MODEL)]
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OPENAI_API_BASE", server.base_url)
        patch.setenv("OPENAI_API_KEY", "test-key")
        plain, flaky = (await AgentEvaluator(agent, config=config).evaluate(eval_set)).results

    assert plain.passed and scores(plain) == {"simulation_goals": 1.0}
    assert plain.metadata["simulation"]["stopped_by"] == "stop_signal"
    assert plain.metadata["simulation"]["model"] == JUDGE_MODEL
    goals_prompt = next(r.prompt for r in server.requests if GOALS_MARKER in r.prompt)
    assert "USER: Where is my order 42?\nASSISTANT: It ships tomorrow." in goals_prompt

    assert flaky.is_error and flaky.error.startswith("Agent error on turn 1: RuntimeError: backend down (at ")
    assert flaky.error.endswith(", in agent)")  # the agent's own line
    simulation = flaky.metadata["simulation"]
    assert (simulation["stopped_by"], simulation["turns"], simulation["completed"]) == ("error", 1, False)
    assert simulation["error"] == flaky.error and flaky.criterion_results == []
    assert flaky.token_usage.calls == 1  # the simulated user's one message was paid for, and counted
    assert calls == [("plain", "Where is my order 42?"), ("flaky", "Where is my order 42?"), ("flaky", "And 7?")]


async def test_a_simulated_case_that_times_out_keeps_what_it_captured(server):
    server.responder = scripted_user(["And order 7?"], Reply.score(1.0))
    release = asyncio.Event()

    async def agent(message: str) -> str:
        if message == "And order 7?":
            await release.wait()  # never set: the case timeout cancels this turn
        return "Order 42 ships tomorrow."

    config = run_config(server).model_copy(update={"timeout": 1.0})
    result = await AgentEvaluator(agent, config=config).evaluate_case(order_case())
    assert result.is_error and result.error == "timed out after 1s"
    simulation = result.metadata["simulation"]
    assert (simulation["stopped_by"], simulation["turns"], simulation["error"]) == ("error", 1, result.error)
    assert len(result.trace_ids) == 2  # the finished turn and the cancelled one
    assert result.token_usage.calls == 1


def test_an_eval_set_with_a_simulated_case_round_trips_through_json(tmp_path: Path):
    scripted = EvalCase(eval_id="plain", conversation=[Invocation.simple("hi", "hello")])
    eval_set = EvalSet(eval_set_id="sim", eval_cases=[order_case(max_turns=4, stop_signal="[bye]"), scripted])
    path = tmp_path / "sim.json"
    eval_set.to_file(path)
    loaded = EvalSet.from_file(path)
    assert loaded == eval_set
    stored = json.loads(path.read_text())["eval_cases"][0]["metadata"]["scenario"]
    assert stored["goals"] == [GOAL] and stored["max_turns"] == 4 and "conversation_plan" not in stored
    scenario = ConversationScenario.of_case(loaded.eval_cases[0])
    assert scenario is not None
    assert (scenario.scenario_id, scenario.stop_signal, scenario.persona) == ("order-42", "[bye]", "impatient customer")
    assert ConversationScenario.of_case(loaded.eval_cases[1]) is None
    assert loaded.eval_cases[0].expected_tools() == [ToolCall(name="track_order")]


async def test_simulated_cases_are_refused_before_any_agent_runs(server):
    calls: list[str] = []

    def agent(message: str) -> str:
        calls.append(message)
        return "ok"

    eval_set = EvalSet(
        eval_set_id="sim",
        eval_cases=[
            EvalCase(eval_id="plain", conversation=[Invocation.simple("hi")]),
            order_case("a"),
            order_case("b"),
        ],
    )
    with pytest.raises(ConfigError) as refused:
        await AgentEvaluator(agent, config=run_config(server, simulator=False)).evaluate(eval_set)
    message = str(refused.value)
    assert "$.user_simulator_config" in message and "'a', 'b'" in message and "'plain'" not in message
    assert "UserSimulatorConfig" in message and '"model"' in message

    broken = EvalCase(eval_id="broken", metadata={"scenario": {"goals": "not a list", "max_turn": 3}})
    with pytest.raises(EvalSetError) as malformed:
        await AgentEvaluator(agent, config=run_config(server)).evaluate(EvalSet(eval_set_id="x", eval_cases=[broken]))
    problems = dict(malformed.value.problems)
    assert "$.eval_cases[0].metadata.scenario.goals" in problems
    assert "unknown key 'max_turn'" in problems["$.eval_cases[0].metadata.scenario.max_turn"]
    with pytest.raises(ConfigError):
        await AgentEvaluator(agent, config=run_config(server, simulator=False)).evaluate_case(order_case())
    assert calls == [] and server.requests == []
