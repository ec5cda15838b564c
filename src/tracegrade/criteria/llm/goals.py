"""Did the user achieve their goals over the conversation? Graded from the whole transcript."""

from __future__ import annotations

from typing import Any

from tracegrade.criteria.llm.base import SampleVerdict, TemplatedLLMCriterion, text_list
from tracegrade.criteria.registry import register_criterion
from tracegrade.judges import ScoreReader
from tracegrade.models.dataset import EvalCase
from tracegrade.models.execution import ExecutionResult

__all__ = ["SimulationGoalsCriterion", "case_goals", "conversation_transcript"]


def case_goals(expected: EvalCase) -> list[str]:
    """``metadata["goals"]`` (a list or one string), else the last expected response as one goal block."""
    goals = expected.metadata.get("goals")
    if isinstance(goals, str):
        goals = [goals]
    if isinstance(goals, list) and goals:
        return [str(g) for g in goals if str(g).strip()]
    text = expected.last_expected_response().strip()
    return [text] if text else []


def conversation_transcript(actual: ExecutionResult) -> str:
    """``USER: …`` / ``ASSISTANT: …`` lines from the messages, else the turns, else the final response."""
    lines = [
        f"{str(m.get('role', '')).upper()}: {m.get('content', '')}"
        for m in actual.messages
        if isinstance(m, dict)
        and m.get("role") in ("user", "assistant")
        and isinstance(m.get("content"), str)
        and m["content"].strip()  # an assistant message that only requested tools has no text to show
    ]
    if not lines:
        for turn in actual.turns:
            lines += [f"USER: {turn.user_input}", f"ASSISTANT: {turn.agent_response}"]
    if not lines and actual.actual_response:
        lines = [f"ASSISTANT: {actual.actual_response}"]
    return "\n".join(lines)


@register_criterion("simulation_goals_match", "conversation_goals")
class SimulationGoalsCriterion(TemplatedLLMCriterion):
    """Score = the judge's achieved/total over samples; a goal is listed achieved if most samples say so."""

    name = "simulation_goals"
    description = "LLM judge of which conversation goals the user achieved"
    requires_reference = True
    template = "simulation_goals"

    def not_applicable(self, actual: ExecutionResult, expected: EvalCase) -> str | None:
        return None if case_goals(expected) else "No goals defined — skipping evaluation"

    def response_text(self, actual: ExecutionResult) -> str:
        has_agent_turn = any(
            isinstance(m, dict) and m.get("role") == "assistant" and str(m.get("content", "")).strip()
            for m in actual.messages
        ) or any(t.agent_response.strip() for t in actual.turns)
        return actual.actual_response if not has_agent_turn else conversation_transcript(actual)

    def prompt_data(self, actual: ExecutionResult, expected: EvalCase) -> dict[str, str]:
        return {"transcript": conversation_transcript(actual), "goals": "\n".join(case_goals(expected))}

    def verdict_extras(self, reply: dict[str, Any], scores: ScoreReader) -> dict[str, Any]:
        return {
            "achieved_goals": text_list(reply.get("achieved_goals")),
            "unachieved_goals": text_list(reply.get("unachieved_goals")),
        }

    def extra_details(self, verdicts: list[SampleVerdict], score: float) -> dict[str, Any]:
        def majority(key: str) -> list[str]:
            counts: dict[str, int] = {}
            for v in verdicts:
                for goal in dict.fromkeys(v.extras[key]):
                    counts[goal] = counts.get(goal, 0) + 1
            return [g for g, n in counts.items() if n * 2 >= len(verdicts)]

        return {"achieved_goals": majority("achieved_goals"), "unachieved_goals": majority("unachieved_goals")}
