"""Goal-driven user simulation: an LLM plays the user in a multi-turn conversation with the agent.

:meth:`UserSimulator.converse` is the one turn loop: it opens with the scenario's starting prompt (or a
generated one), alternates agent turns (sent by a caller-supplied turn runner) and simulated-user messages,
and stops when the simulated user sends the stop signal, the turn limit is reached or something fails.
``AgentEvaluator`` runs it for eval cases whose ``metadata["scenario"]`` holds a :class:`ConversationScenario`
(each agent turn under its own ``tracegrade.turn`` span); :meth:`UserSimulator.run` runs it against an agent
directly and grades the transcript. The simulated user goes through the judge layer like the criteria
(concurrency limit, retries, cache, usage) and never emits spans into the run.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from tracegrade.criteria.base import BaseCriterion
from tracegrade.criteria.llm import SimulationGoalsCriterion
from tracegrade.errors import TracegradeError
from tracegrade.evaluation.adapters import AgentTurnError, CaseSession, adapter_for, run_agent_turn
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
from tracegrade.models.dataset import SCENARIO_KEY, EvalCase, Invocation, MessageContent, without_control_characters
from tracegrade.models.execution import ExecutionResult, TurnRecord
from tracegrade.models.results import CriterionResult, TokenUsage

__all__ = [
    "SCENARIO_KEY",
    "ConversationScenario",
    "SimulationResult",
    "TurnRunner",
    "UserSimulator",
    "simulator_config_for",
]


Message = dict[str, str]
TurnRunner = Callable[[int, str], Awaitable["str | None"]]
"""Sends one agent turn: ``(turn_index, user_text) -> reply text``; raises ``AgentTurnError`` when the agent fails."""


class ConversationScenario(BaseModel):
    """What the simulated user wants and how they behave.

    ``max_turns``/``stop_signal`` override the simulator's; ``model`` names the simulated user's model for
    this scenario (over ``UserSimulatorConfig.model``).
    """

    model_config = ConfigDict(extra="forbid")

    scenario_id: str = ""
    description: str = ""
    starting_prompt: str = ""
    conversation_plan: str = ""
    goals: list[str] = Field(default_factory=list)
    persona: str = ""
    max_turns: int | None = Field(default=None, ge=1)
    stop_signal: str | None = None
    model: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("scenario_id")
    @classmethod
    def _id_printable(cls, value: str) -> str:
        # refused here, with the eval id's message, not when the conversation is over and its id becomes its case's
        return without_control_characters(value, "scenario_id")

    @classmethod
    def of_case(cls, case: EvalCase) -> ConversationScenario | None:
        """The scenario of a simulated case (its id defaults to the case id); None for a scripted case.

        Raises ``pydantic.ValidationError`` when ``metadata["scenario"]`` is malformed.
        """
        raw = case.metadata.get(SCENARIO_KEY)
        if raw is None:
            return None
        scenario = cls.model_validate(raw)
        return scenario if scenario.scenario_id else scenario.model_copy(update={"scenario_id": case.eval_id})

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

    def grading_case(self, case: EvalCase) -> EvalCase:
        """``case`` as the criteria see it: the scenario's goals in ``metadata["goals"]`` unless it has its own."""
        if not self.goals or case.metadata.get("goals"):
            return case
        return case.model_copy(update={"metadata": {**case.metadata, "goals": list(self.goals)}})


class SimulationResult(BaseModel):
    """A simulated conversation, why it stopped and how the criteria graded it."""

    scenario_id: str = ""
    turns: int = 0
    conversation: list[Message] = Field(default_factory=list)
    goals_achieved: list[str] = Field(default_factory=list)
    completed: bool = False
    stopped_by: Literal["stop_signal", "turn_limit", "error"] | None = None
    error: str | None = None
    # the agent's traceback when it raised (``AgentTurnError.agent_traceback``): the case result's
    # ``error_traceback``, as for a scripted case, not part of the outcome kept in its metadata
    error_traceback: str | None = None
    criterion_results: list[CriterionResult] = Field(default_factory=list)
    simulator_token_usage: TokenUsage = Field(default_factory=TokenUsage)

    @property
    def criterion_scores(self) -> dict[str, float]:
        return {r.criterion: r.score for r in self.criterion_results}

    def record_grades(self, criterion_results: Sequence[CriterionResult], goals: Sequence[str]) -> None:
        """Keep the grades; read the achieved goals; completed = no error and every goal met (no goals: the
        simulated user ended the conversation)."""
        self.criterion_results = list(criterion_results)
        verdict = next(
            (
                r
                for r in criterion_results
                if r.criterion == SimulationGoalsCriterion.name and not r.is_error and not r.skipped
            ),
            None,
        )
        self.goals_achieved = list(verdict.details.get("achieved_goals", [])) if verdict is not None else []
        all_goals_met = verdict is not None and verdict.score >= 1.0
        self.completed = self.error is None and (all_goals_met if goals else self.stopped_by == "stop_signal")

    def outcome(self) -> dict[str, Any]:
        """How the conversation ended, for a case result's metadata (the transcript is left out)."""
        return self.model_dump(mode="json", exclude={"conversation", "criterion_results", "error_traceback"})

    def to_execution_result(self) -> ExecutionResult:
        """The conversation as a multi-turn execution: messages, one turn per agent reply, final response."""
        turns: list[TurnRecord] = []
        pending_user = ""
        for message in self.conversation:
            if message["role"] == "user":
                pending_user = message["content"]
            elif message["role"] == "assistant":
                turns.append(
                    TurnRecord(turn_index=len(turns), user_input=pending_user, agent_response=message["content"])
                )
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


def simulator_config_for(
    scenario: ConversationScenario, base: UserSimulatorConfig | None
) -> UserSimulatorConfig | None:
    """The simulated user's settings for ``scenario``: ``base`` with the scenario's model, if it names one;
    None when there is neither (the scenario cannot be simulated)."""
    if base is None and not scenario.model:
        return None
    settings = base or UserSimulatorConfig()
    return settings.model_copy(update={"model": scenario.model}) if scenario.model else settings


class _SimulatedUserError(TracegradeError, RuntimeError):
    """The simulated user's model failed or has no provider; the conversation ends there."""


class UserSimulator:
    """Plays the user of a scenario against an agent (see :meth:`converse`, :meth:`run`)."""

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
        return SimulationGoalsCriterion(
            CriterionConfig(
                judge_model=cfg.model,
                num_samples=1,
                api_style=cfg.api_style,
                api_base=cfg.api_base,
                api_key=cfg.api_key,
            )
        )

    async def _next_user_message(
        self, scenario: ConversationScenario, result: SimulationResult, stop_signal: str
    ) -> tuple[str, bool]:
        """The simulated user's next message and whether it carried the stop signal (usage added to ``result``)."""
        transcript = "\n".join(f"{m['role'].upper()}: {m['content']}" for m in result.conversation)
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
            model=cfg.model,
            prompt=prompt.text,
            cache_text=prompt.cache_text,
            api_style=cfg.api_style,
            temperature=cfg.temperature,
            json_mode=False,
            api_base=cfg.api_base,
            api_key=cfg.api_key,
        )

        def parse(text: str) -> str:
            if not text.strip():
                raise UnreadableReply("the simulated user returned an empty message", text)
            return text.strip()

        runtime = self.runtime or current_judge_runtime()
        try:
            text, reply = await runtime.complete(request, len(result.conversation), parse)
        except UnreadableReply as exc:
            result.simulator_token_usage += exc.usage or TokenUsage()  # the call was paid for
            raise _SimulatedUserError(f"simulated user failed: {exc}") from exc
        except Exception as exc:
            raise _SimulatedUserError(f"simulated user failed: {type(exc).__name__}: {exc}") from exc
        result.simulator_token_usage += reply.usage
        if stop_signal in text:
            return text.replace(stop_signal, "").strip(), True
        return text, False

    async def converse(
        self, scenario: ConversationScenario, run_turn: TurnRunner, result: SimulationResult | None = None
    ) -> SimulationResult:
        """Converse until the stop signal, the turn limit (``scenario.max_turns`` or the simulator's) or a failure.

        ``run_turn`` sends one agent turn; an :class:`AgentTurnError` it raises ends the conversation with
        ``stopped_by="error"``. ``result`` (filled in as the conversation goes, so a caller that cancels
        keeps what happened) is returned; it is not graded here.
        """
        result = result or SimulationResult(scenario_id=scenario.scenario_id)
        limit = scenario.max_turns or self.max_turns
        stop_signal = scenario.stop_signal or self.config.stop_signal
        try:
            problem = provider_problem(self.config.model, self.config.api_key, self.config.api_base)
            if problem is not None:
                raise _SimulatedUserError(f"No LLM provider available for the simulated user: {problem}")
            message, stopped = scenario.starting_prompt, False
            if not message:
                message, stopped = await self._next_user_message(scenario, result, stop_signal)
                if stopped:  # graded, an empty conversation read as an agent that never answered
                    raise _SimulatedUserError(
                        f"the simulated user ended the conversation with its opening message ({stop_signal!r} in "
                        "it), before the agent's first turn: nothing to grade; give the scenario a starting_prompt"
                    )
            while not stopped:
                result.conversation.append({"role": "user", "content": message})
                reply = await run_turn(result.turns, message)
                result.conversation.append({"role": "assistant", "content": reply or ""})
                result.turns += 1
                if result.turns >= limit:
                    result.stopped_by = "turn_limit"
                    return result
                message, stopped = await self._next_user_message(scenario, result, stop_signal)
            result.stopped_by = "stop_signal"
        except (_SimulatedUserError, AgentTurnError) as exc:
            result.stopped_by, result.error = "error", str(exc)
            result.error_traceback = getattr(exc, "agent_traceback", None)  # the agent's frames; none of ours
        return result

    async def run(self, agent: Any, scenario: ConversationScenario) -> SimulationResult:
        """Converse with ``agent`` (anything ``AgentEvaluator`` accepts: a callable taking the user text, a
        pydantic-ai ``Agent``, a LangGraph graph, an ``AgentAdapter``), then grade the conversation."""
        adapter = adapter_for(agent)
        session = CaseSession(
            thread_id=f"{scenario.scenario_id or 'simulation'}-{uuid.uuid4().hex[:8]}", user_id="simulated_user"
        )

        async def run_turn(index: int, text: str) -> str | None:
            return await run_agent_turn(adapter, session, index, text)

        result = await self.converse(scenario, run_turn)
        await self._grade(result, scenario)
        return result

    async def _grade(self, result: SimulationResult, scenario: ConversationScenario) -> None:
        criteria = list(self.criteria)
        if scenario.goals and not any(isinstance(c, SimulationGoalsCriterion) for c in criteria):
            criteria.append(self._goals_criterion())
        graded: list[CriterionResult] = []
        if criteria and result.conversation:
            actual, case = result.to_eval_inputs(scenario)
            with judge_runtime(self.runtime or current_judge_runtime()):
                graded = await CriteriaGrader(criteria).grade(actual, case)
        result.record_grades(graded, scenario.goals)
