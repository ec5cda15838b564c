"""Running several criteria on one case: a criterion that raises becomes an error result.

Pure criteria (``SyncCriterion`` that keep the inherited ``evaluate``) run inline, without creating a
task per criterion; criteria that await (LLM judges, composites) run concurrently with each other.
Criteria that ``sees_other_results`` (budgets on judging cost) run last, given the others' results.
Used by the grading engine and by :class:`~tracegrade.criteria.composite.CompositeCriterion`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from tracegrade.criteria.base import BaseCriterion, SyncCriterion
from tracegrade.models.dataset import EvalCase
from tracegrade.models.execution import ExecutionResult
from tracegrade.models.results import CriterionResult

__all__ = ["evaluate_all", "evaluate_guarded", "runs_inline"]

log = logging.getLogger("tracegrade.evaluation")


def runs_inline(criterion: BaseCriterion) -> bool:
    """True for a pure criterion whose ``evaluate`` is the plain wrapper around ``evaluate_sync``."""
    return isinstance(criterion, SyncCriterion) and type(criterion).evaluate is SyncCriterion.evaluate


# How ``evaluate_all`` runs a criterion depends only on its class; asked once per class, not once per case.
_INLINE, _AWAITED, _LAST = "inline", "awaited", "last"
_HOW_BY_CLASS: dict[type[BaseCriterion], str] = {}


def _learn_how(criterion: BaseCriterion) -> str:
    how = _HOW_BY_CLASS[type(criterion)] = (
        _LAST if criterion.sees_other_results else _INLINE if runs_inline(criterion) else _AWAITED
    )
    return how


def _error_result(criterion: BaseCriterion, case: EvalCase, exc: Exception) -> CriterionResult:
    log.warning("criterion %s raised on case %s: %s", criterion.name, case.eval_id, exc)
    return CriterionResult.failure(criterion.name, f"{type(exc).__name__}: {exc}", criterion.threshold)


async def evaluate_guarded(criterion: BaseCriterion, actual: ExecutionResult, case: EvalCase) -> CriterionResult:
    """``await criterion.evaluate(...)``, turning an exception into an error result."""
    try:
        return await criterion.evaluate(actual, case)
    except Exception as exc:  # a broken criterion must not take the run down
        return _error_result(criterion, case, exc)


async def evaluate_all(
    criteria: Sequence[BaseCriterion], actual: ExecutionResult, case: EvalCase
) -> list[CriterionResult]:
    """One result per criterion, in the criteria's order."""
    results: list[CriterionResult | None] = []
    awaiting: list[int] = []
    last: list[int] = []
    for index, criterion in enumerate(criteria):
        how = _HOW_BY_CLASS.get(type(criterion)) or _learn_how(criterion)
        if how is _INLINE:
            try:
                results.append(criterion.evaluate_sync(actual, case))  # type: ignore[attr-defined]  # a SyncCriterion
            except Exception as exc:  # a broken criterion must not take the run down
                results.append(_error_result(criterion, case, exc))
        else:
            results.append(None)
            (last if how is _LAST else awaiting).append(index)
    if len(awaiting) == 1:
        results[awaiting[0]] = await evaluate_guarded(criteria[awaiting[0]], actual, case)
    elif awaiting:
        done = await asyncio.gather(*(evaluate_guarded(criteria[i], actual, case) for i in awaiting))
        for index, result in zip(awaiting, done):
            results[index] = result
    if last:
        others = [r for r in results if r is not None]
        for index in last:
            results[index] = _evaluate_after(criteria[index], actual, case, others)
    return results  # type: ignore[return-value]


def _evaluate_after(
    criterion: BaseCriterion, actual: ExecutionResult, case: EvalCase, others: list[CriterionResult]
) -> CriterionResult:
    try:
        return criterion.evaluate_after(actual, case, others)
    except Exception as exc:
        return _error_result(criterion, case, exc)
