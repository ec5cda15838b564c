"""Semantic equivalence of the final response with the expected one: LLMJudge and ResponseMatch."""

from __future__ import annotations

from tracegrade.criteria.llm.base import TemplatedLLMCriterion, question_text
from tracegrade.criteria.registry import register_criterion
from tracegrade.models.dataset import EvalCase
from tracegrade.models.execution import ExecutionResult

__all__ = ["LLMJudgeCriterion", "ResponseMatchCriterion"]


@register_criterion("llm_judge")
class LLMJudgeCriterion(TemplatedLLMCriterion):
    """Does the actual response convey the same meaning as the expected one? Mean of sample scores.

    Skips (1.0) when the case expects no response or the agent gave none, as the seed documents.
    """

    name = "final_response_match_v2"
    description = "LLM judge of semantic equivalence between the actual and the expected final response"
    requires_reference = True
    template = "response_match"
    skips_empty_response = True

    def not_applicable(self, actual: ExecutionResult, expected: EvalCase) -> str | None:
        return None if expected.last_expected_response().strip() else "No expected response to compare"

    def prompt_data(self, actual: ExecutionResult, expected: EvalCase) -> dict[str, str]:
        return {
            "question": question_text(actual, expected),
            "expected_response": expected.last_expected_response(),
            "agent_response": actual.actual_response,
        }


@register_criterion("response_match")
class ResponseMatchCriterion(LLMJudgeCriterion):
    """The recommended response check: the LLM judge's semantic-equivalence prompt.

    Unlike its parent, an empty response scores 0.0: the recommended check must not pass an agent that said nothing.
    """

    name = "response_match_score"
    description = "LLM-based semantic match between the actual and the expected final response"
    skips_empty_response = False
