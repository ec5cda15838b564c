"""Offline grading: the same criteria and reports as live runs, applied to traces already in a store.

Two modes:

* :meth:`TraceGrader.grade_eval_set` — match every case of an eval set to its traces (see
  :mod:`tracegrade.evaluation.matching`) and grade them against the case;
* :meth:`TraceGrader.grade_traces` — reference-free grading of production traffic: traces picked by a
  SQL predicate / time window / deterministic sample, graded with the criteria that need no
  expectations; criteria that need one are reported as skipped.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass

from tracegrade.criteria.base import BaseCriterion
from tracegrade.errors import NoCriteriaError
from tracegrade.evaluation.engine import (
    EvaluatorFactory,
    Grader,
    build_case_result,
    compile_criteria,
    create_grader,
    grader_for,
)
from tracegrade.evaluation.matching import QueryableStore, match_case
from tracegrade.evaluation.timewindow import parse_since
from tracegrade.models.config import EvalConfig
from tracegrade.models.dataset import EvalCase, Invocation, MessageContent
from tracegrade.models.execution import ExecutionResult
from tracegrade.models.results import CriterionResult, EvalCaseResult, EvalReport

__all__ = ["TraceGrader", "TraceSelection", "load_executions", "selection_sql", "selection_where"]


@dataclass
class TraceSelection:
    """Which stored traces reference-free grading picks.

    ``where`` is a SQL predicate over the ``traces`` table; ``since`` a duration such as ``"2h"`` or an
    ISO timestamp; ``sample`` a fraction in (0, 1] chosen deterministically by trace id (so re-runs pick the
    same traces); ``limit`` caps the count (newest first).
    """

    where: str | None = None
    since: str | None = None
    sample: float | None = None
    limit: int | None = None
    trace_ids: list[str] | None = None


def selection_where(sel: TraceSelection) -> tuple[str, list[object]]:
    """The WHERE clause (over ``traces``) and its parameters for a selection."""
    clauses, params = ["TRUE"], []
    if sel.where:
        clauses.append(f"({sel.where})")
    if sel.trace_ids is not None:
        clauses.append("list_contains(?, trace_id)")
        params.append(list(sel.trace_ids))
    if sel.since:
        clauses.append("start_time >= ?")
        params.append(parse_since(sel.since))
    if sel.sample is not None:
        if not 0 < sel.sample <= 1:
            raise ValueError(f"--sample must be in (0, 1], got {sel.sample}")
        clauses.append(f"(hash(trace_id) % 1000000) < {int(sel.sample * 1_000_000)}")
    return " AND ".join(clauses), params


def selection_sql(sel: TraceSelection) -> tuple[str, list[object]]:
    """The query that lists the selected trace ids, newest first."""
    where, params = selection_where(sel)
    sql = f"SELECT trace_id FROM traces WHERE {where} ORDER BY start_time DESC, trace_id"
    if sel.limit is not None:
        sql += f" LIMIT {int(sel.limit)}"
    return sql, params


def load_executions(store: QueryableStore, trace_ids: Sequence[str]) -> dict[str, ExecutionResult]:
    """The stored trajectory (``traces.execution``) of each trace id found."""
    if not trace_ids:
        return {}
    result = store.query("SELECT trace_id, execution FROM traces WHERE list_contains(?, trace_id)", [list(trace_ids)])
    return {tid: ExecutionResult.model_validate_json(ex) for tid, ex in result.rows if ex}


class TraceGrader:
    """Grades stored traces with an :class:`EvalConfig`, producing a standard :class:`EvalReport`.

    The evaluator factory is called once per grading run, exactly as for live runs.
    """

    def __init__(
        self,
        store: QueryableStore,
        config: EvalConfig | None = None,
        evaluator_factory: EvaluatorFactory | None = None,
    ) -> None:
        self.store = store
        self.config = config or EvalConfig.default()
        self.evaluator_factory = evaluator_factory

    async def grade_eval_set(
        self, eval_set: object, run_id: str | None = None, extra_criteria: Sequence[BaseCriterion] = ()
    ) -> EvalReport:
        """Grade every case of ``eval_set`` (an EvalSet or a path) against its matching traces.

        ``run_id`` restricts case-id matching to the traces of one recorded ``AgentEvaluator`` run.
        """
        from tracegrade.models.dataset import EvalSet

        if not isinstance(eval_set, EvalSet):
            eval_set = EvalSet.from_file(eval_set)  # type: ignore[arg-type]
        if not eval_set.eval_cases:
            raise ValueError(f"eval set {eval_set.eval_set_id!r} has no cases; there is nothing to grade")
        grader = create_grader(self.config, self.evaluator_factory, extra_criteria)
        matches = [match_case(self.store, case, run_id) for case in eval_set.eval_cases]
        executions = load_executions(self.store, [t for m in matches if not m.error for t in m.trace_ids])
        results = []
        for m in matches:
            if m.error:
                results.append(EvalCaseResult.failure(m.case.eval_id, m.error, name=m.case.name, trace_ids=m.trace_ids))
                continue
            missing = [t for t in m.trace_ids if t not in executions]
            if missing:
                error = f"traces {missing} have no trajectory yet (they may still be arriving); try again shortly"
                results.append(EvalCaseResult.failure(m.case.eval_id, error, name=m.case.name, trace_ids=m.trace_ids))
                continue
            execution = ExecutionResult.merge_turns([executions[t] for t in m.trace_ids])
            results.append(await self._grade_one(grader, execution, m.case, {"match_strategy": m.strategy}))
        return self._report(eval_set.eval_set_id, eval_set.name, results, {"mode": "eval_set"})

    async def grade_traces(self, selection: TraceSelection, extra_criteria: Sequence[BaseCriterion] = ()) -> EvalReport:
        """Reference-free grading of the selected traces; criteria needing expectations are skipped."""
        criteria = compile_criteria(self.config, extra_criteria)
        usable = [c for c in criteria if not c.requires_reference]
        skipped = [c for c in criteria if c.requires_reference]
        if not usable:
            raise NoCriteriaError(
                "none of the enabled criteria can grade a trace without an eval case "
                f"({', '.join(c.name for c in skipped)} need expectations); enable a reference-free one such as "
                "contains_keywords, rubric_based, hallucination or safety"
            )
        grader = grader_for(usable, self.evaluator_factory)
        sql, params = selection_sql(selection)
        trace_ids = [r[0] for r in self.store.query(sql, params).rows]
        executions = load_executions(self.store, trace_ids)
        results = []
        for tid in trace_ids:
            execution = executions.get(tid)
            case = _reference_free_case(tid, execution)
            if execution is None:
                results.append(EvalCaseResult.failure(case.eval_id, "trace has no trajectory yet", trace_ids=[tid]))
                continue
            result = await self._grade_one(grader, execution, case, {"trace_id": tid})
            result.criterion_results += [_skipped_result(c) for c in skipped]
            results.append(result)
        meta = {"mode": "reference_free", "selection": selection.__dict__}
        return self._report("production", "production traces", results, meta)

    async def _grade_one(
        self, grader: Grader, execution: ExecutionResult, case: EvalCase, extra_meta: dict[str, object]
    ) -> EvalCaseResult:
        started = time.perf_counter()
        criterion_results = await grader.grade(execution, case)
        result = build_case_result(case, execution, criterion_results, time.perf_counter() - started)
        result.metadata.update(extra_meta)
        return result

    def _report(self, set_id: str, name: str, results: list[EvalCaseResult], meta: dict[str, object]) -> EvalReport:
        return EvalReport.create(set_id, results, name, config_used=self.config.model_dump(mode="json"), metadata=meta)

    def grade_eval_set_sync(self, eval_set: object, run_id: str | None = None) -> EvalReport:
        return asyncio.run(self.grade_eval_set(eval_set, run_id))

    def grade_traces_sync(self, selection: TraceSelection) -> EvalReport:
        return asyncio.run(self.grade_traces(selection))


def _reference_free_case(trace_id: str, execution: ExecutionResult | None) -> EvalCase:
    query = (execution.user_query if execution else None) or ""
    return EvalCase(
        eval_id=f"trace-{trace_id}",
        name=(query[:60] or f"trace {trace_id[:16]}"),
        conversation=[Invocation(user_content=MessageContent.user(query))],
        metadata={"reference_free": True, "selector": {"trace_id": trace_id}},
    )


def _skipped_result(criterion: BaseCriterion) -> CriterionResult:
    return CriterionResult(
        criterion=criterion.name,
        score=0.0,
        passed=True,
        threshold=criterion.threshold,
        skipped=True,
        details={"reason": "skipped: this criterion needs an expectation (an eval case) and the trace has none"},
    )
