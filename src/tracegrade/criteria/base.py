"""Criterion interfaces: ``BaseCriterion`` (async), ``SyncCriterion`` (pure computation) and result helpers."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from typing import Any, ClassVar

from tracegrade.models.config import CriterionConfig
from tracegrade.models.dataset import EvalCase
from tracegrade.models.execution import ExecutionResult
from tracegrade.models.results import CriterionResult, TokenUsage

__all__ = ["BaseCriterion", "SyncCriterion", "fields_read"]


class BaseCriterion(ABC):
    """A rule that scores one execution against one eval case.

    Subclasses set ``name`` (the key written into results and stats) and implement ``evaluate``.
    ``requires_reference`` says whether the criterion needs something the case expects (an expected
    response, tools, node order…); reference-free grading of production traces skips those. ``reads``
    names the execution fields it reads, so that offline grading loads no more of a stored trace.
    """

    name: ClassVar[str] = "base_criterion"
    description: ClassVar[str] = ""
    requires_reference: ClassVar[bool] = True
    # True: graded after the case's other criteria, by ``evaluate_after`` (a budget on what judging cost)
    sees_other_results: ClassVar[bool] = False
    # The ``ExecutionResult`` fields ``evaluate`` reads; None: any of them. Offline grading loads a stored
    # trace's LLM content (``LLM_CONTENT_FIELDS``) only when a criterion of the run reads it.
    reads: ClassVar[frozenset[str] | None] = None

    def __init__(self, config: CriterionConfig | None = None) -> None:
        self.config = config or CriterionConfig()

    @property
    def threshold(self) -> float:
        return self.config.threshold

    @property
    def is_enabled(self) -> bool:
        return self.config.enabled

    def fields_read(self) -> frozenset[str] | None:
        """The ``ExecutionResult`` fields this criterion reads (``reads``; a composite: its parts'); None: any."""
        return self.reads

    @abstractmethod
    async def evaluate(self, actual: ExecutionResult, expected: EvalCase) -> CriterionResult:
        """Score one case."""

    def evaluate_after(
        self, actual: ExecutionResult, expected: EvalCase, others: list[CriterionResult]
    ) -> CriterionResult:
        """Score one case knowing the results of its other criteria (``sees_other_results`` criteria only)."""
        raise NotImplementedError(f"{type(self).__name__} sets sees_other_results without evaluate_after")

    def validate_config(self) -> list[str]:
        """Problems with this criterion's configuration; empty when valid."""
        errors = []
        if not 0.0 <= self.config.threshold <= 1.0:
            errors.append(f"threshold must be between 0 and 1, got {self.config.threshold}")
        return errors

    def _result(
        self, score: float, details: dict[str, Any] | None = None, token_usage: TokenUsage | None = None
    ) -> CriterionResult:
        """A pass/fail result judged against this criterion's threshold (score clamped to [0, 1])."""
        return CriterionResult.success(self.name, score, self.threshold, details, token_usage)

    def _failure(self, error: str, details: dict[str, Any] | None = None) -> CriterionResult:
        """An error result: score 0, not passed, the configured threshold recorded."""
        result = CriterionResult.failure(self.name, error, threshold=self.threshold)
        if details:
            result.details = details
        return result

    def _skipped(self, reason: str) -> CriterionResult:
        """The criterion does not apply to this case (it needs a reference the case lacks)."""
        return CriterionResult(
            criterion=self.name,
            score=0.0,
            passed=True,
            threshold=self.threshold,
            skipped=True,
            details={"reason": reason},
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, threshold={self.threshold})"


class SyncCriterion(BaseCriterion):
    """A criterion that is pure computation: implement ``evaluate_sync``; ``evaluate`` wraps it."""

    @abstractmethod
    def evaluate_sync(self, actual: ExecutionResult, expected: EvalCase) -> CriterionResult:
        """Score one case synchronously."""

    async def evaluate(self, actual: ExecutionResult, expected: EvalCase) -> CriterionResult:
        return self.evaluate_sync(actual, expected)


def fields_read(criteria: Iterable[BaseCriterion]) -> frozenset[str] | None:
    """The ``ExecutionResult`` fields any of ``criteria`` reads; None when one of them may read any field."""
    fields: set[str] = set()
    for criterion in criteria:
        read = criterion.fields_read()
        if read is None:
            return None
        fields |= read
    return frozenset(fields)
