"""Composing criteria: an AND / OR gate (``CompositeCriterion``) and a weighted mean (``WeightedCriterion``).

Sub-criteria run through the same safe runner as the grading engine (a sub-criterion that raises
becomes an error sub-result scoring 0.0). Skipped sub-results (the sub-criterion did not apply) take no
part in the combination; if every sub-result was skipped, so is the composite. Judge token usage of
the sub-results is summed into the composite result.
"""

from __future__ import annotations

from collections.abc import Sequence

from tracegrade.criteria.base import BaseCriterion, fields_read
from tracegrade.criteria.running import evaluate_all
from tracegrade.models.config import CriterionConfig
from tracegrade.models.dataset import EvalCase
from tracegrade.models.execution import ExecutionResult
from tracegrade.models.results import CriterionResult, TokenUsage

__all__ = ["CompositeCriterion", "WeightedCriterion"]


def _sub_problems(criteria: Sequence[BaseCriterion]) -> list[str]:
    return [f"sub-criterion {c.name}: {p}" for c in criteria for p in c.validate_config()]


def _error_warnings(results: Sequence[CriterionResult]) -> list[str]:
    return [f"sub-criterion {r.criterion} failed: {r.error}" for r in results if r.error is not None]


def _total_usage(results: Sequence[CriterionResult]) -> TokenUsage:
    return sum((r.token_usage for r in results), TokenUsage())


class CompositeCriterion(BaseCriterion):
    """Runs every sub-criterion; AND (``require_all=True``) takes the minimum score, OR the maximum.

    The combined score is judged against the composite's own threshold; with no sub-criteria it is 0.0.
    """

    name = "composite_criterion"
    description = "Several criteria combined as an AND (minimum) or OR (maximum) gate"

    def __init__(
        self, criteria: Sequence[BaseCriterion], require_all: bool = True, config: CriterionConfig | None = None
    ) -> None:
        super().__init__(config)
        self.criteria = list(criteria)
        self.require_all = require_all
        self.requires_reference = any(c.requires_reference for c in self.criteria)  # type: ignore[misc]

    def validate_config(self) -> list[str]:
        return super().validate_config() + _sub_problems(self.criteria)

    def fields_read(self) -> frozenset[str] | None:
        return fields_read(self.criteria)

    async def evaluate(self, actual: ExecutionResult, expected: EvalCase) -> CriterionResult:
        results = await evaluate_all(self.criteria, actual, expected)
        counted = [r.score for r in results if not r.skipped]
        if results and not counted:
            return self._skipped("every sub-criterion was skipped")
        combine = min if self.require_all else max
        score = combine(counted) if counted else 0.0
        result = self._result(
            score,
            {"sub_results": [r.model_dump(mode="json") for r in results], "require_all": self.require_all},
            _total_usage(results),
        )
        result.warnings = _error_warnings(results)
        return result


class WeightedCriterion(BaseCriterion):
    """Weighted mean of the sub-scores: ``sum(score * weight) / sum(weight)`` (weights need not sum to 1).

    An empty list, or a total weight of 0, scores 0.0.
    """

    name = "weighted_criterion"
    description = "Several criteria averaged by weight"

    def __init__(
        self, criteria_weights: Sequence[tuple[BaseCriterion, float]], config: CriterionConfig | None = None
    ) -> None:
        super().__init__(config)
        self.criteria_weights = [(criterion, float(weight)) for criterion, weight in criteria_weights]
        self.requires_reference = any(c.requires_reference for c, _ in self.criteria_weights)  # type: ignore[misc]

    def validate_config(self) -> list[str]:
        problems = super().validate_config()
        problems += [f"weight of {c.name} must not be negative, got {w}" for c, w in self.criteria_weights if w < 0]
        return problems + _sub_problems([c for c, _ in self.criteria_weights])

    def fields_read(self) -> frozenset[str] | None:
        return fields_read(c for c, _ in self.criteria_weights)

    async def evaluate(self, actual: ExecutionResult, expected: EvalCase) -> CriterionResult:
        criteria = [c for c, _ in self.criteria_weights]
        results = await evaluate_all(criteria, actual, expected)
        weighted = [(r, w) for r, (_, w) in zip(results, self.criteria_weights) if not r.skipped]
        if results and not weighted:
            return self._skipped("every sub-criterion was skipped")
        total_weight = sum(w for _, w in weighted)
        score = sum(r.score * w for r, w in weighted) / total_weight if total_weight > 0 else 0.0
        sub_results = []
        for r, (_, weight) in zip(results, self.criteria_weights):
            entry = {"criterion": r.criterion, "score": r.score, "weight": weight}
            if r.error is not None:
                entry["error"] = r.error
            if r.skipped:
                entry["skipped"] = True
            sub_results.append(entry)
        result = self._result(score, {"sub_results": sub_results}, _total_usage(results))
        result.warnings = _error_warnings(results)
        return result
