"""Offline grading: the same criteria and reports as live runs, applied to traces already in a store.

Two modes:

* :meth:`TraceGrader.grade_eval_set` — match every case of an eval set to its traces (see
  :mod:`tracegrade.evaluation.matching`) and grade them against the case;
* :meth:`TraceGrader.grade_traces` — reference-free grading of production traffic: traces picked by a
  SQL predicate / time window / deterministic sample (see :mod:`tracegrade.evaluation.selection`), graded
  with the criteria that need no expectations; criteria that need one are reported as skipped.

Both compile the criteria and call the evaluator factory once, before any trace is read, exactly as
``AgentEvaluator`` does for a live run. Cases are graded one after another, unless a criterion waits on
something (an LLM judge, a custom evaluator): then up to ``judge_max_concurrency`` cases are graded at once,
so that N cases cost about N / judge_max_concurrency judge round trips rather than N. Results keep the order of
the eval set (or of the selected traces).
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from tracegrade.criteria.base import BaseCriterion, SyncCriterion, fields_read
from tracegrade.errors import NoCriteriaError
from tracegrade.evaluation.checks import checked_eval_set
from tracegrade.evaluation.collection_pace import building_long_lived, fewer_full_collections, set_aside_long_lived
from tracegrade.evaluation.engine import (
    EvaluatorFactory,
    Grader,
    build_case_result,
    compile_criteria,
    grader_for,
)
from tracegrade.evaluation.matching import TraceMatch, match_cases
from tracegrade.evaluation.selection import (
    LOAD_CHUNK,
    QueryableStore,
    StoredExecution,
    TraceSelection,
    iter_executions,
    reads_llm_content,
    selected_trace_ids,
)
from tracegrade.evaluation.trials import combine_trials
from tracegrade.models.config import EvalConfig
from tracegrade.models.dataset import EvalCase, EvalSet, Invocation, MessageContent
from tracegrade.models.execution import ExecutionResult
from tracegrade.models.expectations import expectation_metadata
from tracegrade.models.results import CriterionResult, EvalCaseResult, EvalReport, TokenUsage

__all__ = ["REFERENCE_FREE_SET_ID", "TraceGrader", "TraceSelection", "reference_free_case_id", "run_sync"]

REFERENCE_FREE_SET_ID = "production"
SET_ASIDE_EVERY = 500  # graded cases between two set_aside_long_lived calls
PARSE_AHEAD = 2500  # stored executions an eval set's grading parses at once (and sets aside as one block)
T = TypeVar("T")


class TraceGrader:
    """Grades stored traces with an :class:`EvalConfig`, producing a standard :class:`EvalReport`.

    ``store`` is anything with ``query(sql, params)``: a :class:`~tracegrade.store.TraceStore` or the
    :class:`~tracegrade.store.RemoteStore` of a running server. The evaluator factory is called once per
    grading run, exactly as for live runs. ``progress(done, total)`` is told how many cases are graded.
    """

    def __init__(
        self,
        store: QueryableStore,
        config: EvalConfig | None = None,
        evaluator_factory: EvaluatorFactory | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> None:
        self.store = store
        self.config = config or EvalConfig.default()
        self.evaluator_factory = evaluator_factory
        self.progress = progress or (lambda done, total: None)

    async def grade_eval_set(
        self,
        eval_set: EvalSet | str | Path,
        run_id: str | None = None,
        extra_criteria: Sequence[BaseCriterion] = (),
    ) -> EvalReport:
        """Grade every case of ``eval_set`` (an EvalSet or a path) against its matching traces.

        ``run_id`` restricts case-id matching to the traces of one recorded ``AgentEvaluator`` run. A case
        with no usable trace becomes an error result saying why; the other cases are graded. An eval set that
        ``tracegrade validate`` refuses (duplicate case ids, a malformed selector…) raises EvalSetError first.
        """
        eval_set = checked_eval_set(eval_set)  # refused as `validate` refuses it
        with fewer_full_collections():
            return await self._grade_eval_set(eval_set, run_id, extra_criteria)

    async def _grade_eval_set(
        self, eval_set: EvalSet, run_id: str | None, extra_criteria: Sequence[BaseCriterion]
    ) -> EvalReport:
        set_aside_long_lived()  # the eval set lives until the report is written
        criteria = compile_criteria(self.config, extra_criteria)
        grader = grader_for(criteria, self.config, self.evaluator_factory)
        fields = self._fields_read(criteria)
        matches = match_cases(self.store, eval_set.eval_cases, run_id, eval_set.eval_set_id)
        trials = [_trials(m, self.config.num_runs) for m in matches]
        # The report carries each case's LLM-call details only when the criteria had them loaded; otherwise they
        # stay in the store, under the case's trace ids.
        detailed = reads_llm_content(fields)
        results = _Results(self.progress, len(matches), self._cases_at_once(criteria))
        for start, stop in _load_groups(trials, LOAD_CHUNK):
            # one group of cases at a time: their traces are read in one query, each parsed as its case comes
            stored = _GroupExecutions(self.store, trials[start:stop], fields)
            await results.add(
                functools.partial(self._graded_case, grader, m, groups, stored, detailed)
                for m, groups in zip(matches[start:stop], trials[start:stop])
            )
        return self._report(eval_set.eval_set_id, eval_set.name, results.graded, {"mode": "eval_set"})

    @staticmethod
    async def _graded_case(
        grader: Grader, m: TraceMatch, groups: list[list[str]], stored: _GroupExecutions, detailed: bool
    ) -> EvalCaseResult:
        """One matched case graded against its stored traces (each group of ids a trial; ``stored`` has each id)."""
        meta: dict[str, Any] = {"match_strategy": m.strategy} if m.strategy else {}
        if not groups:
            return _failed(m, m.error or "", m.trace_ids, meta)
        graded = []
        for ids in groups:  # each a trial (one, unless num_runs > 1 found several)
            turns = [stored.take(t) for t in ids]
            missing = [t.trace_id for t in turns if t.execution is None]
            if missing:
                problems = [t.problem for t in turns if t.problem]
                why = "; ".join(problems) or (
                    f"traces {missing} have no trajectory yet (spans may still be arriving); try again shortly"
                )
                graded.append(_failed(m, why, ids, meta))
                continue
            execution = ExecutionResult.merge_turns([t.execution for t in turns])  # type: ignore[misc]
            usage = TokenUsage.total(t.token_usage for t in turns)
            case = _as_graded(m.case)
            graded.append(await _grade_one(grader, execution, case, {"match_strategy": m.strategy}, usage, detailed))
        return combine_trials(graded)

    async def grade_traces(self, selection: TraceSelection, extra_criteria: Sequence[BaseCriterion] = ()) -> EvalReport:
        """Reference-free grading of the selected traces; criteria needing expectations are skipped."""
        with fewer_full_collections():
            return await self._grade_traces(selection, extra_criteria)

    async def _grade_traces(self, selection: TraceSelection, extra_criteria: Sequence[BaseCriterion]) -> EvalReport:
        criteria = compile_criteria(self.config, extra_criteria)
        usable = [c for c in criteria if not c.requires_reference]
        skipped = [c for c in criteria if c.requires_reference]
        if not usable:
            raise NoCriteriaError(
                "none of the enabled criteria can grade a trace without an eval case "
                f"({', '.join(c.name for c in skipped)} need expectations); enable a reference-free one such as "
                "contains_keywords, rubric_based, hallucination or safety"
            )
        grader = grader_for(usable, self.config, self.evaluator_factory)
        skipped_results = [_skipped_result(c) for c in skipped]
        trace_ids = selected_trace_ids(self.store, selection)
        results = _Results(self.progress, len(trace_ids), self._cases_at_once(usable))

        async def graded(
            trace_id: str, execution: ExecutionResult | None, usage: TokenUsage, problem: str | None
        ) -> EvalCaseResult:
            case = _reference_free_case(trace_id, execution)
            if execution is None:
                why = problem or "the trace has no trajectory yet"
                return EvalCaseResult.failure(case.eval_id, why, trace_ids=[trace_id])
            result = await _grade_one(grader, execution, case, {"trace_id": trace_id}, usage, detailed=False)
            result.criterion_results += [r.model_copy() for r in skipped_results]
            return result

        loaded = iter_executions(self.store, trace_ids, fields=self._fields_read(usable))
        # the executions stream in: at most a few batches of concurrent cases are held at a time
        for batch in _batches(loaded, results.at_once * 4):
            await results.add(functools.partial(graded, *item) for item in batch)
        meta = {
            "mode": "reference_free",
            "selection": {k: v for k, v in vars(selection).items() if v is not None},
            "skipped_criteria": [c.name for c in skipped],
        }
        return self._report(REFERENCE_FREE_SET_ID, "production traces", results.graded, meta)

    def _cases_at_once(self, criteria: Sequence[BaseCriterion]) -> int:
        """How many cases to grade at once: one unless a criterion (or a custom evaluator) may wait on a judge."""
        waits = self.evaluator_factory is not None or any(not isinstance(c, SyncCriterion) for c in criteria)
        return self.config.judge_max_concurrency if waits else 1

    def _fields_read(self, criteria: Sequence[BaseCriterion]) -> frozenset[str] | None:
        """The execution fields grading with ``criteria`` reads (None: any): a custom evaluator may read any."""
        return fields_read(criteria) if self.evaluator_factory is None else None

    def _report(self, set_id: str, name: str, results: list[EvalCaseResult], meta: dict[str, Any]) -> EvalReport:
        return EvalReport.create(set_id, results, name, config_used=self.config.redacted_dump(), metadata=meta)

    def grade_eval_set_sync(self, eval_set: EvalSet | str | Path, run_id: str | None = None) -> EvalReport:
        """Blocking wrapper around :meth:`grade_eval_set` (not usable inside a running event loop)."""
        return run_sync(self.grade_eval_set(eval_set, run_id))

    def grade_traces_sync(self, selection: TraceSelection) -> EvalReport:
        """Blocking wrapper around :meth:`grade_traces` (not usable inside a running event loop)."""
        return run_sync(self.grade_traces(selection))


def run_sync(coroutine: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(coroutine)`` for a coroutine with a large result.

    On the main thread, Python 3.11's ``asyncio.run`` restores its SIGINT handler through
    ``signal.signal``, whose enum conversion formats ``repr()`` of the old handler — a partial holding the
    finished main task, hence the ``repr()`` of its result. For a report of 100,000 cases that costs
    seconds, so the result is handed out of the task instead of returned by it.
    """
    box: list[T] = []

    async def main() -> None:
        box.append(await coroutine)

    asyncio.run(main())
    return box[0]


def _failed(match: TraceMatch, error: str, trace_ids: list[str], metadata: dict[str, Any]) -> EvalCaseResult:
    case = match.case
    # the case's xfail mark rides along: a case expected to fail whose traces are missing is still expected to fail
    metadata = {**expectation_metadata(case.metadata), **metadata}
    return EvalCaseResult.failure(case.eval_id, error, name=case.name, trace_ids=trace_ids, metadata=metadata)


def _trials(match: TraceMatch, num_runs: int) -> list[list[str]]:
    """The trace ids of each trial of a matched case: one trial, or none when the match failed. With
    ``num_runs > 1`` an ambiguous match (several traces where each turn expects one) is several trials."""
    if not match.error:
        return [match.trace_ids]
    turns = max(1, len(match.case.conversation))
    if num_runs == 1 or not match.ambiguous or len(match.trace_ids) % turns:
        return []
    count = len(match.trace_ids) // turns
    # the traces are listed turn by turn (each turn's repeats oldest first): trial j is every count-th from j
    return [match.trace_ids[j::count] for j in range(count)]


def _load_groups(trials: Sequence[list[list[str]]], most: int) -> list[tuple[int, int]]:
    """Consecutive ``[start, stop)`` ranges of cases whose traces number at most ``most`` (a case with more is a
    range of its own), so that grading holds one range's executions at a time."""
    ranges: list[tuple[int, int]] = []
    start, seen = 0, set[str]()
    for index, groups in enumerate(trials):
        ids = {t for trial in groups for t in trial}
        if index > start and len(seen) + len(ids - seen) > most:
            ranges.append((start, index))
            start, seen = index, set()
        seen |= ids
    if start < len(trials):
        ranges.append((start, len(trials)))
    return ranges


class _GroupExecutions:
    """The stored executions of one group of cases, parsed as the cases ask for them and let go once the last case
    that reads one has it: a group of 10,000 cases would otherwise hold 10,000 parsed executions at once, most of
    each of which no report holds (figures: bench/RESULTS.md, offline grading memory)."""

    def __init__(self, store: QueryableStore, trials: Sequence[list[list[str]]], fields: frozenset[str] | None) -> None:
        ids = [t for groups in trials for trial in groups for t in trial]
        self._readers = Counter(ids)  # how many trials still read each id
        wanted = list(self._readers)  # each id once, in the order the cases read them (one query for them all)
        self._loading = iter_executions(store, wanted, len(wanted) or 1, fields=fields)
        self._loaded: dict[str, StoredExecution] = {}

    def take(self, trace_id: str) -> StoredExecution:
        """``trace_id``'s stored execution (one of the group's ids), forgotten here once its last reader has it."""
        while trace_id not in self._loaded:  # read in order: cases graded at once may ask a little out of it
            # parsed a block at a time, set aside from the collector as a whole group's executions were (one at a
            # time, each young collection would walk what the block's cases just built only to find it alive)
            with building_long_lived():
                block = {loaded.trace_id: loaded for loaded in itertools.islice(self._loading, PARSE_AHEAD)}
            if not block:  # every id of the group was read: this one is not among them
                raise KeyError(f"trace {trace_id} is not one of this group's traces")
            self._loaded.update(block)
        self._readers[trace_id] -= 1
        return self._loaded[trace_id] if self._readers[trace_id] else self._loaded.pop(trace_id)


def _as_graded(case: EvalCase) -> EvalCase:
    """A simulated case is graded with its scenario's goals, exactly as the live run graded it."""
    if not case.is_simulated:
        return case
    from tracegrade.evaluation.simulator import ConversationScenario

    scenario = ConversationScenario.of_case(case)
    return scenario.grading_case(case) if scenario is not None else case


async def _grade_one(
    grader: Grader,
    execution: ExecutionResult,
    case: EvalCase,
    extra_meta: dict[str, Any],
    agent_usage: TokenUsage,
    detailed: bool,
) -> EvalCaseResult:
    """Grade one stored execution; ``agent_usage`` is its LLM calls' token usage (which may not be loaded)."""
    started = time.perf_counter()
    criterion_results = await grader.grade(execution, case)
    grading_seconds = time.perf_counter() - started
    # Like a live run, a case's duration is the agent's (its traces') plus the grading.
    duration = execution.duration_seconds + grading_seconds
    result = build_case_result(
        case, execution, criterion_results, duration, detailed=detailed, agent_token_usage=agent_usage
    )
    result.metadata.update(extra_meta)
    return result


class _Results:
    """The cases graded so far, in order, with the progress told and long-lived results set aside as they come."""

    def __init__(self, progress: Callable[[int, int], None], total: int, at_once: int) -> None:
        self.graded: list[EvalCaseResult] = []
        self.at_once = at_once
        self._progress = progress
        self._total = total
        progress(0, total)
        set_aside_long_lived()

    async def add(self, cases: Iterable[Callable[[], Awaitable[EvalCaseResult]]]) -> None:
        """Grade ``cases`` (each a call that grades one) and keep their results in the order given; at most
        ``at_once`` at a time, one after another without tasks when that is 1."""
        if self.at_once == 1:
            for grade in cases:
                self._keep([await grade()])
            return
        gate = asyncio.Semaphore(self.at_once)

        async def gated(grade: Callable[[], Awaitable[EvalCaseResult]]) -> EvalCaseResult:
            async with gate:
                return await grade()

        self._keep(await asyncio.gather(*(gated(grade) for grade in cases)))

    def _keep(self, results: Sequence[EvalCaseResult]) -> None:
        before = len(self.graded)
        self.graded += results
        if before // SET_ASIDE_EVERY != len(self.graded) // SET_ASIDE_EVERY:
            set_aside_long_lived()  # the results so far live until the report is written
        self._progress(len(self.graded), self._total)


def _batches(items: Iterable[T], size: int) -> Iterator[list[T]]:
    """``items`` in lists of ``size`` (the last one shorter), read as they are needed."""
    stream = iter(items)
    while batch := list(itertools.islice(stream, size)):
        yield batch


def reference_free_case_id(trace_id: str) -> str:
    """The ``eval_id`` of the case that reference-free grading (``grade_traces``) makes of a trace."""
    return f"trace-{trace_id}"


def _reference_free_case(trace_id: str, execution: ExecutionResult | None) -> EvalCase:
    query = (execution.user_query if execution else None) or ""
    return EvalCase(
        eval_id=reference_free_case_id(trace_id),
        name=query[:60] or f"trace {trace_id[:16]}",
        conversation=[Invocation(user_content=MessageContent.user(query))],
        metadata={"reference_free": True, "selector": {"trace_id": trace_id}},
    )


def _skipped_result(criterion: BaseCriterion) -> CriterionResult:
    return criterion._skipped("skipped: this criterion needs an expectation (an eval case) and the trace has none")
