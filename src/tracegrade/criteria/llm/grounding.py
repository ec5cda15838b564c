"""Is the response true to its sources? FactualAccuracy (reference facts) and Hallucination (context)."""

from __future__ import annotations

import json
from typing import Any

from tracegrade.criteria.llm.base import SampleVerdict, TemplatedLLMCriterion, merged, question_text, text_list
from tracegrade.criteria.registry import register_criterion
from tracegrade.judges import ScoreReader
from tracegrade.models.dataset import EvalCase
from tracegrade.models.execution import ExecutionResult

__all__ = ["FactualAccuracyCriterion", "HallucinationCriterion", "grounding_context", "reference_facts"]


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def reference_facts(expected: EvalCase) -> str:
    """The last expected final response, else ``metadata["reference_facts"]``, else ``""``."""
    facts = expected.last_expected_response().strip()
    if facts:
        return facts
    raw = expected.metadata.get("reference_facts")
    if isinstance(raw, list):
        return "\n".join(f"- {_as_text(item)}" for item in raw)
    return _as_text(raw).strip() if raw else ""


def grounding_context(actual: ExecutionResult, expected: EvalCase) -> str:
    """Every tool result the agent received plus ``metadata["context"]`` (blocks separated by blank lines)."""
    blocks = []
    for call in actual.tool_calls:
        if not call.result_captured:
            blocks.append(f"Tool {call.name}: result not captured")
        elif call.error:
            blocks.append(f"Tool {call.name} failed: {call.error}")
        elif call.result not in (None, "", [], {}):
            blocks.append(f"Tool {call.name} returned: {_as_text(call.result)}")
    context = expected.metadata.get("context")
    if context:
        blocks.append(f"Reference context: {_as_text(context)}")
    return "\n\n".join(blocks) or "No context available"


def _flag(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None


@register_criterion("factual_accuracy_score", "factual_accuracy")
class FactualAccuracyCriterion(TemplatedLLMCriterion):
    """Facts, numbers, dates and names checked against the reference; errors listed in ``details``."""

    name = "factual_accuracy_v1"
    description = "LLM-based factual accuracy against reference facts"
    requires_reference = True
    template = "factual_accuracy"

    def not_applicable(self, actual: ExecutionResult, expected: EvalCase) -> str | None:
        if reference_facts(expected):
            return None
        return "No reference facts: set an expected final response or metadata['reference_facts']"

    def prompt_data(self, actual: ExecutionResult, expected: EvalCase) -> dict[str, str]:
        return {
            "question": question_text(actual, expected),
            "agent_response": actual.actual_response,
            "reference_facts": reference_facts(expected),
        }

    def verdict_extras(self, reply: dict[str, Any], scores: ScoreReader) -> dict[str, Any]:
        return {"errors": text_list(reply.get("errors")), "is_accurate": _flag(reply.get("is_accurate"))}

    def extra_details(self, verdicts: list[SampleVerdict], score: float) -> dict[str, Any]:
        return {
            "is_accurate": score >= self.threshold,
            "errors": merged(verdicts, "errors"),
        }


@register_criterion("hallucination")
class HallucinationCriterion(TemplatedLLMCriterion):
    """Is every claim supported by tool results or the case's context? Unsupported claims listed."""

    name = "hallucinations_v1"
    description = "LLM-based hallucination/groundedness detection"
    requires_reference = False
    template = "hallucination"

    def prompt_data(self, actual: ExecutionResult, expected: EvalCase) -> dict[str, str]:
        return {
            "context": grounding_context(actual, expected),
            "question": question_text(actual, expected),
            "agent_response": actual.actual_response,
        }

    def verdict_extras(self, reply: dict[str, Any], scores: ScoreReader) -> dict[str, Any]:
        return {
            "hallucinations": text_list(reply.get("hallucinations")),
            "is_grounded": _flag(reply.get("is_grounded")),
        }

    def extra_details(self, verdicts: list[SampleVerdict], score: float) -> dict[str, Any]:
        return {
            "is_grounded": score >= self.threshold,
            "hallucinations": merged(verdicts, "hallucinations"),
        }
