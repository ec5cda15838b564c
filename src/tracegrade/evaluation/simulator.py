"""Goal-driven user simulation: an LLM plays the user in a multi-turn conversation with the agent.

``UserSimulator.run(agent, scenario)`` opens with the scenario's starting prompt (or a generated one),
alternates agent replies and simulated-user messages, and stops when the simulated user sends the
stop signal or the turn limit is reached. The simulated user goes through the same judge layer as the
criteria (concurrency limit, retries, cache, usage). The conversation is then graded: by
``SimulationGoalsCriterion`` for the scenario's goals and by any other criteria given, through
``SimulationResult.to_eval_inputs`` (an ``ExecutionResult`` plus an ``EvalCase``).
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from tracegrade.criteria.base import BaseCriterion
from tracegrade.criteria.llm import SimulationGoalsCriterion
from tracegrade.evaluation.engine import CriteriaGrader
from tracegrade.judges import (
    JudgeRequest,
    JudgeRuntime,
    UnreadableReply,
    current_judge_runtime,
    judge_runtime,
    provider_problem,
    render_prompt,
)
from tracegrade.models.config import DEFAULT_JUDGE_MODEL, CriterionConfig, EvalConfig, UserSimulatorConfig
from tracegrade.models.dataset import EvalCase, Invocation, MessageContent
from tracegrade.models.execution import ExecutionResult, TurnRecord
from tracegrade.models.results import CriterionResult, TokenUsage

__all__ = ["AgentCallable", "ConversationScenario", "SimulationResult", "UserSimulator"]

Message = dict[str, str]
AgentCallable = Callable[[list[Message]], "Awaitable[str] | str"]
"""The agent under test: takes the conversation so far (``{role, content}`` dicts) and returns its reply."""


class ConversationScenario(BaseModel):
    """What the simulated user wants and how they behave. ``max_turns``/``stop_signal`` override the simulator's."""

    model_config = ConfigDict(extra="forbid")

    scenario_id: str = ""
    description: str = ""
    starting_prompt: str = ""
    conversation_plan: str = ""
    goals: list[str] = Field(default_factory=list)
    persona: str = ""
    max_turns: int | None = Field(default=None, ge=1)
    stop_signal: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    def to_eval_case(self) -> EvalCase:
        """The case a simulated conversation is graded against (goals in ``metadata["goals"]``)."""
        opening = self.starting_prompt or self.description
        return EvalCase(
            eval_id=self.scenario_id or "simulation",
            name=self.description,
            description=self.conversation_plan,
            conversation=[Invocation(user_content=MessageContent.user(opening))] if opening else [],
            metadata={**self.metadata, "goals": list(self.goals), "simulation": True},
        )


class SimulationResult(BaseModel):
    """A simulated conversation, why it stopped and how the criteria graded it."""

    scenario_id: str = ""
    turns: int = 0
    conversation: list[Message] = Field(default_factory=list)
    goals_achieved: list[str] = Field(default_factory=list)
    completed: bool = False
    stopped_by: Literal["stop_signal", "turn_limit", "error"] | None = None
    error: str | None = None
    criterion_results: list[CriterionResult] = Field(default_factory=list)
    simulator_token_usage: TokenUsage = Field(default_factory=TokenUsage)

    @property
    def criterion_scores(self) -> dict[str, float]:
        return {r.criterion: r.score for r in self.criterion_results}

    def to_execution_result(self) -> ExecutionResult:
        """The conversation as a multi-turn execution: messages, one turn per agent reply, final response."""
        turns: list[TurnRecord] = []
        pending_user = ""
        for message in self.conversation:
            if message["role"] == "user":
                pending_user = message["content"]
            elif message["role"] == "assistant":
                turns.append(TurnRecord(turn_index=len(turns), user_input=pending_user,
                                        agent_response=message["content"]))
        return ExecutionResult(
            messages=[dict(m) for m in self.conversation],
            turns=turns,
            actual_response=turns[-1].agent_response if turns else "",
            user_query=next((m["content"] for m in self.conversation if m["role"] == "user"), None),
            status="ERROR" if self.error else "OK",
            error=self.error,
            metadata={"scenario_id": self.scenario_id, "simulation": True, "stopped_by": self.stopped_by},
        )

    def to_eval_inputs(self, scenario: ConversationScenario) -> tuple[ExecutionResult, EvalCase]:
        """What any criterion needs to grade this conversation."""
        return self.to_execution_result(), scenario.to_eval_case()


def _pydantic_ai_agent_class() -> type | None:
    module = sys.modules.get("pydantic_ai")
    return getattr(module, "Agent", None) if module is not None else None


class _PydanticAIConversation:
    """Drives a pydantic-ai Agent turn by turn, carrying its own message history between runs."""

    def __init__(self, agent: Any) -> None:
        self.agent = agent
        self.history: list[Any] | None = None

    async def __call__(self, conversation: list[Message]) -> str:
        result = await self.agent.run(conversation[-1]["content"], message_history=self.history)
        self.history = result.all_messages()
        return str(result.output)


def _agent_caller(agent: Any) -> Callable[[list[Message]], Awaitable[str]]:
    agent_class = _pydantic_ai_agent_class()
    if agent_class is not None and isinstance(agent, agent_class):
        return _PydanticAIConversation(agent)
    if not callable(agent):
        raise TypeError(
            f"the agent must be a callable taking the conversation (list of {{role, content}}) or a "
            f"pydantic-ai Agent, got {type(agent).__name__}"
        )

    async def call(conversation: list[Message]) -> str:
        reply = agent(list(conversation))
        if inspect.isawaitable(reply):
            reply = await reply
        return "" if reply is None else str(reply)

    return call


class _SimulatedUserError(RuntimeError):
    pass


class UserSimulator:
    """Plays the user of a scenario against an agent, then grades the conversation."""

    def __init__(
        self,
        model: str = DEFAULT_JUDGE_MODEL,
        temperature: float = 0.7,
        max_turns: int = 10,
        config: UserSimulatorConfig | None = None,
        criteria: Sequence[BaseCriterion] | None = None,
        *,
        runtime: JudgeRuntime | None = None,
    ) -> None:
        self.config = config or UserSimulatorConfig(model=model, temperature=temperature, max_invocations=max_turns)
        self.criteria = list(criteria or [])
        self.runtime = runtime

    @classmethod
    def from_eval_config(cls, config: EvalConfig, criteria: Sequence[BaseCriterion] | None = None) -> UserSimulator:
        """A simulator with ``config.user_simulator_config`` (defaults when unset)."""
        return cls(config=config.user_simulator_config or UserSimulatorConfig(), criteria=criteria)

    @property
    def model(self) -> str:
        return self.config.model

    @property
    def max_turns(self) -> int:
        return self.config.max_invocations

    def _goals_criterion(self) -> SimulationGoalsCriterion:
        cfg = self.config
        return SimulationGoalsCriterion(CriterionConfig(
            judge_model=cfg.model, num_samples=1, api_style=cfg.api_style, api_base=cfg.api_base,
            api_key=cfg.api_key,
        ))

    async def _next_user_message(
        self, scenario: ConversationScenario, conversation: list[Message], stop_signal: str, usage: list[TokenUsage]
    ) -> tuple[str, bool]:
        """The simulated user's next message and whether it carried the stop signal."""
        transcript = "\n".join(f"{m['role'].upper()}: {m['content']}" for m in conversation)
        prompt = render_prompt(
            "user_simulator",
            data={"conversation": transcript},
            params={
                "scenario": scenario.description or "(none)",
                "plan": scenario.conversation_plan or "(none)",
                "persona": scenario.persona or "an ordinary user",
                "goals": "\n".join(f"- {g}" for g in scenario.goals) or "(none)",
                "stop_signal": stop_signal,
            },
        )
        cfg = self.config
        request = JudgeRequest(
            model=cfg.model, prompt=prompt.text, cache_text=prompt.cache_text, api_style=cfg.api_style,
            temperature=cfg.temperature, json_mode=False, api_base=cfg.api_base, api_key=cfg.api_key,
        )

        def parse(text: str) -> str:
            if not text.strip():
                raise UnreadableReply("the simulated user returned an empty message", text)
            return text.strip()

        runtime = self.runtime or current_judge_runtime()
        try:
            text, reply = await runtime.complete(request, len(conversation), parse)
        except Exception as exc:
            raise _SimulatedUserError(f"simulated user failed: {type(exc).__name__}: {exc}") from exc
        usage.append(reply.usage)
        if stop_signal in text:
            return text.replace(stop_signal, "").strip(), True
        return text, False

    async def run(self, agent: Any, scenario: ConversationScenario) -> SimulationResult:
        """Converse until the stop signal or the turn limit, then grade the conversation."""
        call_agent = _agent_caller(agent)
        limit = scenario.max_turns or self.max_turns
        stop_signal = scenario.stop_signal or self.config.stop_signal
        result = SimulationResult(scenario_id=scenario.scenario_id)
        usage: list[TokenUsage] = []
        conversation: list[Message] = []
        problem = provider_problem(self.config.model, self.config.api_key, self.config.api_base)
        try:
            if problem is not None:
                raise _SimulatedUserError(f"No LLM provider available for the simulated user: {problem}")
            message, stopped = scenario.starting_prompt, False
            if not message:
                message, stopped = await self._next_user_message(scenario, conversation, stop_signal, usage)
            while not stopped:
                conversation.append({"role": "user", "content": message})
                try:
                    reply = await call_agent(conversation)
                except Exception as exc:
                    result.stopped_by, result.error = "error", f"Agent error: {type(exc).__name__}: {exc}"
                    break
                conversation.append({"role": "assistant", "content": reply})
                result.turns += 1
                if result.turns >= limit:
                    result.stopped_by = "turn_limit"
                    break
                message, stopped = await self._next_user_message(scenario, conversation, stop_signal, usage)
            else:
                result.stopped_by = "stop_signal"
        except _SimulatedUserError as exc:
            result.stopped_by, result.error = "error", str(exc)
        result.conversation = conversation
        result.simulator_token_usage = sum(usage, TokenUsage())
        await self._grade(result, scenario)
        return result

    async def _grade(self, result: SimulationResult, scenario: ConversationScenario) -> None:
        criteria = list(self.criteria)
        if scenario.goals and not any(isinstance(c, SimulationGoalsCriterion) for c in criteria):
            criteria.append(self._goals_criterion())
        if not criteria or not result.conversation:
            result.completed = result.error is None and not scenario.goals and result.stopped_by == "stop_signal"
            return
        actual, case = result.to_eval_inputs(scenario)
        with judge_runtime(self.runtime or current_judge_runtime()):
            result.criterion_results = await CriteriaGrader(criteria).grade(actual, case)
        goals = next((r for r in result.criterion_results if r.criterion == SimulationGoalsCriterion.name), None)
        if goals is not None and not goals.is_error:
            result.goals_achieved = list(goals.details.get("achieved_goals", []))
        all_goals_met = goals is not None and not goals.is_error and goals.score >= 1.0
        ended_well = all_goals_met if scenario.goals else result.stopped_by == "stop_signal"
        result.completed = result.error is None and ended_well
