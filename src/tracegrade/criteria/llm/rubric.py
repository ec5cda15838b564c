"""Grading against the eval author's rubrics: one verdict per rubric, combined by rubric weight."""

from __future__ import annotations

from typing import Any

from tracegrade.criteria.llm.base import SampleVerdict, TemplatedLLMCriterion, clipped, question_text
from tracegrade.criteria.registry import register_criterion
from tracegrade.judges import ScoreReader, UnreadableReply
from tracegrade.models.dataset import EvalCase
from tracegrade.models.execution import ExecutionResult

__all__ = ["RubricBasedCriterion"]


@register_criterion("rubric_based_score", "rubric_based")
class RubricBasedCriterion(TemplatedLLMCriterion):
    """Each sample scores every rubric; its score is the weighted mean; the result is the mean of samples."""

    name = "rubric_based_final_response_quality_v1"
    description = "LLM judge of the final response against weighted rubrics"
    requires_reference = False
    template = "rubric"

    def validate_config(self) -> list[str]:
        errors = super().validate_config()
        ids = [r.rubric_id for r in self.config.rubrics]
        if len(set(ids)) != len(ids):
            errors.append(f"rubric ids must be unique, got {ids}")
        if self.config.rubrics and sum(r.weight for r in self.config.rubrics) <= 0:
            errors.append("at least one rubric needs a weight above 0")
        return errors

    def not_applicable(self, actual: ExecutionResult, expected: EvalCase) -> str | None:
        return None if self.config.rubrics else "No rubrics configured"

    def prompt_data(self, actual: ExecutionResult, expected: EvalCase) -> dict[str, str]:
        return {"question": question_text(actual, expected), "agent_response": actual.actual_response}

    def prompt_params(self, actual: ExecutionResult, expected: EvalCase) -> dict[str, str]:
        return {"rubrics": "\n".join(f"- {r.rubric_id}: {r.content}" for r in self.config.rubrics)}

    @staticmethod
    def _entries(reply: dict[str, Any], raw: str) -> dict[str, Any]:
        """rubric_id -> entry (a number or an object with ``score``), from a list or a mapping."""
        value = reply.get("rubrics", reply.get("rubric_scores"))
        if isinstance(value, dict):
            return value
        if isinstance(value, list):
            return {str(e.get("rubric_id")): e for e in value if isinstance(e, dict)}
        raise UnreadableReply("the judge reply has no per-rubric verdicts ('rubrics')", raw)

    def read_verdict(self, reply: dict[str, Any], scores: ScoreReader) -> SampleVerdict:
        entries = self._entries(reply, scores.raw)
        per_rubric: dict[str, float] = {}
        reasons: dict[str, str] = {}
        for rubric in self.config.rubrics:
            if rubric.rubric_id not in entries:
                raise UnreadableReply(f"the judge reply has no verdict for rubric {rubric.rubric_id!r}", scores.raw)
            entry = entries[rubric.rubric_id]
            value = entry.get("score") if isinstance(entry, dict) else entry
            per_rubric[rubric.rubric_id] = scores.score(value, f"rubrics.{rubric.rubric_id}.score")
            reasons[rubric.rubric_id] = clipped(str(entry.get("reasoning", ""))) if isinstance(entry, dict) else ""
        total_weight = sum(r.weight for r in self.config.rubrics)
        weighted = sum(per_rubric[r.rubric_id] * r.weight for r in self.config.rubrics) / total_weight
        reasoning = str(reply.get("reasoning", "")) or "; ".join(f"{k}: {v}" for k, v in reasons.items() if v)
        return SampleVerdict(weighted, reasoning, {"rubric_scores": per_rubric, "rubric_reasonings": reasons})

    def extra_details(self, verdicts: list[SampleVerdict], score: float) -> dict[str, Any]:
        ids = [r.rubric_id for r in self.config.rubrics]
        return {
            "rubrics": ids,
            "weights": {r.rubric_id: r.weight for r in self.config.rubrics},
            "scores": [v.score for v in verdicts],
            "rubric_scores": {
                rid: sum(v.extras["rubric_scores"][rid] for v in verdicts) / len(verdicts) for rid in ids
            },
        }
