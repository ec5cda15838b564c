"""The grading engine and the evaluator-factory seam shared by live and offline grading.

A run compiles its criteria from ``EvalConfig`` once, refuses a run with none, and asks an
``EvaluatorFactory`` (called once per run; must be thread-safe and free of side effects) for the
``Grader`` that scores each case. The default factory returns :class:`CriteriaGrader`; a custom one can
wrap it (add logging, caching, extra checks) or replace it entirely.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from tracegrade.criteria.base import BaseCriterion
from tracegrade.criteria.registry import build_criteria
from tracegrade.criteria.running import evaluate_all
from tracegrade.errors import InvalidValueError, NoCriteriaError
from tracegrade.models.config import EvalConfig
from tracegrade.models.dataset import EvalCase
from tracegrade.models.execution import ExecutionResult
from tracegrade.models.results import CriterionResult, EvalCaseResult, NodeDetail, TokenUsage

__all__ = [
    "CriteriaGrader",
    "EvaluatorFactory",
    "Grader",
    "RunGrader",
    "build_case_result",
    "compile_criteria",
    "create_grader",
    "default_evaluator_factory",
    "grader_for",
]


@runtime_checkable
class Grader(Protocol):
    """Scores one execution against one case, returning one result per criterion."""

    async def grade(self, actual: ExecutionResult, case: EvalCase) -> list[CriterionResult]: ...


class EvaluatorFactory(Protocol):
    """Builds the grader for one run from the run's compiled criteria (never empty)."""

    def __call__(self, criteria: Sequence[BaseCriterion]) -> Grader: ...


class CriteriaGrader:
    """The standard engine: runs every criterion on a case; a criterion that raises becomes an error result.

    Pure criteria (``SyncCriterion``) run inline, without a task each; criteria that await (LLM judges)
    run concurrently with each other (see :func:`tracegrade.criteria.running.evaluate_all`).
    """

    def __init__(self, criteria: Sequence[BaseCriterion]) -> None:
        self.criteria = list(criteria)

    async def grade(self, actual: ExecutionResult, case: EvalCase) -> list[CriterionResult]:
        return await evaluate_all(self.criteria, actual, case)


def default_evaluator_factory(criteria: Sequence[BaseCriterion]) -> Grader:
    return CriteriaGrader(criteria)


def compile_criteria(config: EvalConfig, extra: Sequence[BaseCriterion] = ()) -> list[BaseCriterion]:
    """Instantiate every enabled slot (plus hand-attached criteria); refuse a run that would grade nothing, and
    slots that ``validate`` refuses (:func:`~tracegrade.evaluation.checks.criteria_problems`), however the config
    was made."""
    from tracegrade.evaluation.checks import criteria_problems

    problems = [f"at {where}: {what}" for where, what in criteria_problems(config.criteria)]
    problems += [f"{c.name}: {p}" for c in extra for p in c.validate_config()]
    if problems:
        raise InvalidValueError("invalid criterion configuration: " + "; ".join(problems))
    criteria = build_criteria(config.criteria) + list(extra)
    if not criteria:
        raise NoCriteriaError()
    return criteria


class RunGrader:
    """The grader a run uses: the factory's grader, called inside the run's judge runtime.

    The runtime gives every judge call of the run one concurrency limit, one retry policy and the judge
    cache (see :mod:`tracegrade.judges.runtime`); ``inner`` is what the evaluator factory returned.
    """

    def __init__(self, inner: Grader, config: EvalConfig, warnings: dict[str, list[str]] | None = None) -> None:
        from tracegrade.judges.runtime import JudgeRuntime

        self.inner = inner
        self.runtime = JudgeRuntime.from_config(config)
        self.warnings = warnings or {}  # criterion name -> warnings each of its results carries (calibration)

    async def grade(self, actual: ExecutionResult, case: EvalCase) -> list[CriterionResult]:
        from tracegrade.judges.runtime import judge_runtime

        with judge_runtime(self.runtime):
            results = await self.inner.grade(actual, case)
        for result in results:
            result.warnings.extend(self.warnings.get(result.criterion, ()))
        return results


def create_grader(
    config: EvalConfig,
    factory: EvaluatorFactory | None = None,
    extra_criteria: Sequence[BaseCriterion] = (),
) -> RunGrader:
    """Compile the run's criteria and call the factory once for the run's grader."""
    return grader_for(compile_criteria(config, extra_criteria), config, factory)


def grader_for(
    criteria: Sequence[BaseCriterion], config: EvalConfig, factory: EvaluatorFactory | None = None
) -> RunGrader:
    """Call the factory (once per run) with already compiled, non-empty criteria; a judge below its criterion's
    ``min_agreement`` fails the run here, before anything is graded (see :mod:`tracegrade.evaluation.calibration`)."""
    from tracegrade.evaluation.calibration import enforce_calibration

    if not criteria:
        raise NoCriteriaError()
    warnings = enforce_calibration(criteria, config)
    grader = (factory or default_evaluator_factory)(criteria)
    if grader is None:
        raise TypeError("the evaluator factory returned None; it must return a Grader")
    return RunGrader(grader, config, warnings)


def build_case_result(
    case: EvalCase,
    execution: ExecutionResult,
    criterion_results: list[CriterionResult],
    duration_seconds: float,
    *,
    detailed: bool = True,
    agent_token_usage: TokenUsage | None = None,
) -> EvalCaseResult:
    """Assemble a case result from what the agent did and how the criteria scored it.

    ``detailed=False`` leaves out the per-LLM-call details, messages, node responses and turn records
    (offline grading that did not load them: those stay in the store, joinable by trace id).
    ``agent_token_usage`` is the agent's token usage when the execution's LLM calls were not loaded.
    """
    details: dict[str, Any] = {}
    if detailed:
        details = {
            "messages": execution.messages,
            "node_responses": [n.model_dump() for n in execution.node_responses],
            "turn_results": [t.model_dump() for t in execution.turns],
            "node_details": [
                NodeDetail(
                    node_name=call.node or "",
                    input_messages=call.input_messages,
                    response_text=call.output_text or "",
                    token_usage=call.token_usage,
                    timestamp=call.start_ns / 1e9,
                    model=call.model,
                    tool_calls=[tc.model_dump() for tc in call.tool_call_requests],
                )
                for call in execution.llm_calls
            ],
        }
    return EvalCaseResult.success(
        case.eval_id,
        criterion_results,
        name=case.name,
        actual_trajectory=execution.trajectory,
        actual_tool_calls=execution.tool_calls,
        actual_response=execution.actual_response,
        node_visits=execution.node_visits,
        duration_seconds=duration_seconds,
        metadata={
            **case.metadata,
            **({"mapping_issues": execution.mapping_issues} if execution.mapping_issues else {}),
        },
        agent_token_usage=execution.token_usage if agent_token_usage is None else agent_token_usage,
        trace_ids=execution.trace_ids,
        **details,
    )
