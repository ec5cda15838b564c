"""Repeated trials of one case combined into one case result, the way ADK's ``num_runs`` does it.

Each criterion's score is its mean over the trials that graded it, and it passes when that mean reaches its
threshold; the case passes when every criterion does. What the agent did (trajectory, response, messages)
is the first trial's; token usage and duration add up; ``trace_ids`` lists every trial's traces. A criterion's
explanation (its details and reason) is that of a trial that agrees with its verdict: the worst trial's (the
first of equals) when it fails, the first passing trial's when it passes; ``details["trial"]`` is that trial's
number (from 1) and the reason starts "trial 2 of 5: ". Each criterion and the case carry
:class:`~tracegrade.models.results.TrialStats`. The intervals are Wilson intervals (for a mean score, the
bounded-variable form): with a handful of trials a bootstrap would be both slower than the grading and too narrow.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from tracegrade.errors import InvalidValueError
from tracegrade.evaluation.statistics import pass_at_k, pass_hat_k, wilson_interval
from tracegrade.models.results import CriterionResult, EvalCaseResult, TokenUsage, TrialStats

__all__ = ["combine_trials", "trial_stats"]


def trial_stats(scores: Sequence[float], passed: Sequence[bool]) -> TrialStats:
    """The statistics of one criterion (or one case) over its trials: ``scores`` and verdicts, trial by trial.

    Raises InvalidValueError for no trials (there is no mean of nothing) or a verdict count unlike the score count.
    """
    k, c = len(scores), sum(passed)
    if k == 0 or len(passed) != k:
        raise InvalidValueError(
            f"trial statistics need one score and one verdict per trial, at least one trial: got {k} score(s) and "
            f"{len(passed)} verdict(s)"
        )
    low, high = wilson_interval(sum(scores), k)
    # built from computed, already typed values: skip validation (it was most of the cost of num_runs)
    return TrialStats.model_construct(
        trials=k,
        passed=c,
        mean=sum(scores) / k,
        ci_low=low,
        ci_high=high,
        pass_at_k=pass_at_k(k, c, k),
        pass_hat_k=pass_hat_k(k, c, k),
        flaky=0 < c < k,
    )


def combine_trials(trials: Sequence[EvalCaseResult]) -> EvalCaseResult:
    """One case result from its trials (one trial is returned as it is, so ``num_runs=1`` changes nothing)."""
    if not trials:
        raise ValueError("a case needs at least one trial")
    first = trials[0]
    if len(trials) == 1:
        return first
    verdicts = [t.passed and not t.is_error for t in trials]
    by_name = [{c.criterion: c for c in t.criterion_results} for t in trials]
    errored = [t for t in trials if t.error is not None]
    errors = [t.error for t in errored]
    criteria = [_combine_criterion(name, trials, [c.get(name) for c in by_name]) for name in _criterion_names(trials)]
    # a trial that errored (a timeout, a failed turn) failed: the case cannot pass, though it is an error
    # result only when every trial errored
    passed = not errors and all(c.passed or c.skipped for c in criteria)
    metadata = dict(first.metadata)
    if errors:
        metadata["trial_errors"] = errors
    return first.model_copy(
        update={
            "passed": passed,
            "criterion_results": criteria,
            "error": errors[0] if len(errors) == len(trials) else None,
            "error_traceback": errored[0].error_traceback if len(errors) == len(trials) else None,
            "duration_seconds": sum(t.duration_seconds for t in trials),
            "token_usage": TokenUsage.total(t.token_usage for t in trials),
            "agent_token_usage": TokenUsage.total(t.agent_token_usage for t in trials),
            "trace_ids": [trace for t in trials for trace in t.trace_ids],
            "metadata": metadata,
            "trial_stats": trial_stats([1.0 if v else 0.0 for v in verdicts], verdicts),
        }
    )


def _criterion_names(trials: Sequence[EvalCaseResult]) -> list[str]:
    names: dict[str, None] = {}
    for t in trials:
        names.update((c.criterion, None) for c in t.criterion_results)
    return list(names)


def _combine_criterion(
    name: str, trials: Sequence[EvalCaseResult], found: list[CriterionResult | None]
) -> CriterionResult:
    """``name`` over the trials (``found``: its result in each, if any): a trial that errored before grading,
    or whose criterion errored, scores 0. The details (the reason) are those of the worst trial when the
    combined criterion fails, of the first passing one when it passes, marked with that trial's number."""
    graded = [
        _Graded(n, c, 0.0 if c is None or c.is_error else c.score, c is not None and c.passed)
        for n, (t, c) in enumerate(zip(trials, found), 1)
        if (c is None and t.is_error) or (c is not None and not c.skipped)
    ]
    template = next(c for c in found if c is not None)
    usage = TokenUsage.total(c.token_usage for c in found if c is not None)
    if not graded:  # skipped in every trial
        return template.model_copy(update={"token_usage": usage})
    unusable = next((g for g in graded if not 0 <= g.score <= 1), None)  # NaN fails the comparison too
    if unusable is not None:
        # a custom criterion built its result with a score outside [0, 1]: there is no mean or interval to give,
        # and failing the criterion (not the whole run, after every trial ran) says which one and where
        error = (
            f"trial {unusable.trial} of {len(trials)} scored {unusable.score}: a criterion's score must be a "
            "number from 0 to 1 to be averaged over trials (build results with CriterionResult.success)"
        )
        return template.model_copy(
            update={
                "score": 0.0,
                "passed": False,
                "skipped": False,
                "error": error,
                "details": {"reason": error, "trial": unusable.trial},
                "token_usage": usage,
            }
        )
    stats = trial_stats([g.score for g in graded], [g.passed for g in graded])
    errors = [c.error for c in found if c is not None and c.error is not None]
    warnings = list(dict.fromkeys(w for c in found if c is not None for w in c.warnings))
    passed = stats.mean >= template.threshold and len(errors) < len(graded)
    if passed:
        explaining = next((g for g in graded if g.passed), graded[0])
    else:  # the worst trial, the first of equals
        explaining = min((g for g in graded if not g.passed), key=lambda g: g.score, default=graded[0])
    return template.model_copy(
        update={
            "score": stats.mean,
            "passed": passed,
            "skipped": False,
            "details": _trial_details(explaining, trials),
            "error": errors[0] if len(errors) == len(graded) else None,
            "token_usage": usage,
            "warnings": warnings,
            "trial_stats": stats,
        }
    )


class _Graded(NamedTuple):
    """One trial of a criterion: its number (from 1), its result (None: the trial errored before grading)."""

    trial: int
    result: CriterionResult | None
    score: float
    passed: bool


def _trial_details(graded: _Graded, trials: Sequence[EvalCaseResult]) -> dict[str, Any]:
    """``graded``'s details, its reason prefixed with the trial it comes from (``"trial"``: its number)."""
    label = f"trial {graded.trial} of {len(trials)}"
    if graded.result is None:
        return {"reason": f"{label} failed before grading: {trials[graded.trial - 1].error}", "trial": graded.trial}
    details = dict(graded.result.details)
    if details.get("reason") is not None:
        details["reason"] = f"{label}: {details['reason']}"
    return details | {"trial": graded.trial}
