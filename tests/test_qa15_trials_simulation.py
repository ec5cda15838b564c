"""Simulated users that end a conversation early, fail, or run into the turn limit over repeated trials: a real
litellm against the scripted OpenAI-compatible server, cases driven by AgentEvaluator and UserSimulator.

A simulated user whose opening message (none scripted) carried the stop signal ended the conversation before the
agent's first turn; the empty conversation was then graded as the agent's failure ("agent produced no response"),
and ``UserSimulator.run`` called a scenario without goals completed.
"""

from __future__ import annotations

from typing import Any

from tests.support.judges_setup import JUDGE_MODEL, fast_runtime, fresh_server, scripted_server  # noqa: F401
from tests.support.llm_server import LLMServer, ReceivedRequest, Reply
from tests.support.simulated_users import GOALS_MARKER, SIM_MARKER, scripted_user
from tracegrade import AgentEvaluator
from tracegrade.evaluation.batch_simulator import BatchSimulator
from tracegrade.evaluation.simulator import ConversationScenario, UserSimulator
from tracegrade.models import CriteriaConfig, CriterionConfig, EvalConfig, EvalSet, ReporterConfig
from tracegrade.models.config import UserSimulatorConfig
from tracegrade.models.dataset import EvalCase

GOAL = "learn when order 42 ships"


def _user(server: LLMServer, max_turns: int = 10) -> UserSimulatorConfig:
    return UserSimulatorConfig(
        model=JUDGE_MODEL, api_base=server.base_url, api_key="test-key", api_style="chat", max_invocations=max_turns
    )


def _config(server: LLMServer, **changes: Any) -> EvalConfig:
    goals = CriterionConfig(
        judge_model=JUDGE_MODEL,
        api_base=server.base_url,
        api_key="test-key",
        api_style="chat",
        num_samples=1,
        threshold=0.5,
    )
    return EvalConfig(
        criteria=CriteriaConfig(simulation_goals=goals),
        user_simulator_config=_user(server),
        reporter=ReporterConfig(enabled=False),
        judge_cache=False,
        judge_retry_base_seconds=0.01,
        **changes,
    )


def _scenario(**changes: Any) -> ConversationScenario:
    settings: dict[str, Any] = {"description": "A customer asks when order 42 ships", "goals": [GOAL]}
    return ConversationScenario(**{**settings, **changes})


class _Agent:
    """Answers every message about order 42 and remembers what it was asked."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def __call__(self, message: str) -> str:
        self.asked.append(message)
        return "Order 42 ships tomorrow."


async def test_a_simulated_user_that_ends_before_the_first_turn_is_an_error_not_an_agent_failure(server):
    server.responder = scripted_user(["Never mind, bye </finished>"], Reply.score(1.0, achieved_goals=[GOAL]))
    agent = _Agent()
    report = await AgentEvaluator(agent, config=_config(server)).evaluate(
        EvalSet(eval_set_id="sim", eval_cases=[EvalCase.simulated("no-opening", _scenario())])
    )

    (result,) = report.results
    assert agent.asked == []
    assert result.is_error and not result.passed and result.criterion_results == []
    assert result.error.startswith("the simulated user ended the conversation with its opening message")
    assert "'</finished>'" in result.error and "before the agent's first turn" in result.error
    assert result.error.endswith("give the scenario a starting_prompt")
    simulation = result.metadata["simulation"]
    assert (simulation["stopped_by"], simulation["turns"], simulation["completed"]) == ("error", 0, False)
    assert simulation["simulator_token_usage"]["calls"] == 1  # the one message was paid for, and counted
    assert [SIM_MARKER in r.prompt for r in server.requests] == [True]  # no goals judge for an empty conversation
    assert report.summary.error_cases == 1 and report.summary.failed_cases == 0


async def test_run_does_not_call_a_conversation_without_a_turn_completed(server):
    server.responder = scripted_user(["</finished>"], Reply.score(1.0))
    agent = _Agent()
    no_goals = _scenario(scenario_id="chat", goals=[])
    simulator = UserSimulator(config=_user(server), runtime=fast_runtime())
    (result,) = await BatchSimulator(simulator).run_batch(agent, [no_goals])

    assert agent.asked == [] and result.turns == 0 and result.conversation == []
    assert result.stopped_by == "error" and not result.completed
    assert "before the agent's first turn" in result.error
    summary = BatchSimulator.summary([result])
    assert (summary["completed"], summary["errors"]) == (0, 1)


async def test_a_generated_opening_without_the_stop_signal_is_sent_to_the_agent(server):
    server.responder = scripted_user(["When does order 42 ship?", "Thanks </finished>"], Reply.score(1.0))
    agent = _Agent()
    simulator = UserSimulator(config=_user(server), runtime=fast_runtime())
    result = await simulator.run(agent, _scenario(scenario_id="generated", goals=[]))

    assert agent.asked == ["When does order 42 ship?"]
    assert (result.stopped_by, result.turns, result.error, result.completed) == ("stop_signal", 1, None, True)


async def test_a_simulated_user_that_fails_mid_conversation_ends_the_case_with_its_error(server):
    def respond(request: ReceivedRequest) -> Reply:
        assert GOALS_MARKER not in request.prompt, "the goals judge was asked about an unfinished conversation"
        return Reply.server_error(500)

    server.responder = respond
    agent = _Agent()
    case = EvalCase.simulated("down", _scenario(starting_prompt="Where is order 42?"))
    result = await AgentEvaluator(agent, config=_config(server)).evaluate_case(case)

    assert agent.asked == ["Where is order 42?"]
    assert result.is_error and result.criterion_results == []
    assert result.error.startswith("simulated user failed: JudgeCallError: judge openai/test-judge at ")
    assert "HTTP 500 on each of 4 attempts" in result.error
    simulation = result.metadata["simulation"]
    assert (simulation["stopped_by"], simulation["turns"], simulation["error"]) == ("error", 1, result.error)
    assert len(result.trace_ids) == 1  # the agent's turn that ran is kept
    assert len(server.requests) == 4  # the first try and three retries, all for the simulated user


async def test_repeated_trials_of_a_simulated_case_each_stop_at_the_turn_limit(server):
    def respond(request: ReceivedRequest) -> Reply:
        if SIM_MARKER in request.prompt:
            return Reply(text="And what about order 42?")
        # the first trial's judge finds the goal met, the second's does not
        met = sum(GOALS_MARKER in r.prompt for r in server.requests) == 1
        return Reply.score(1.0 if met else 0.0, "judged", achieved_goals=[GOAL] if met else [])

    server.responder = respond
    agent = _Agent()
    config = _config(server, num_runs=2)
    config.user_simulator_config = _user(server, max_turns=3)
    result = await AgentEvaluator(agent, config=config).evaluate_case(
        EvalCase.simulated("limit", _scenario(starting_prompt="Where is order 42?"))
    )

    assert len(agent.asked) == 6  # three turns a trial, two trials
    simulation = result.metadata["simulation"]  # the first trial's conversation, as for any case
    assert (simulation["stopped_by"], simulation["turns"]) == ("turn_limit", 3)
    assert len(result.trace_ids) == 6
    # each trial: two simulated-user messages (after turns 1 and 2, none after the last allowed one), one verdict
    assert [SIM_MARKER in r.prompt for r in server.requests].count(True) == 4
    assert result.token_usage.calls == 6
    goals = result.get_criterion_result("simulation_goals")
    assert goals.trial_stats is not None and (goals.trial_stats.trials, goals.trial_stats.passed) == (2, 1)
    assert goals.score == 0.5 and goals.passed  # threshold 0.5: the mean of 1 and 0 reaches it
    assert result.trial_stats is not None and result.trial_stats.flaky
