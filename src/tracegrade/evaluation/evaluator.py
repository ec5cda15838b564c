"""``AgentEvaluator``: live evaluation runs — drive the agent through an eval set, capture its spans with a
``TrajectoryCollector``, grade each case with the run's grader and write the configured reports.

Each case turn runs under a root span ``tracegrade.turn {case_id}`` (see :mod:`tracegrade.capture.context`),
so concurrent cases are attributed by trace and never bleed into each other. A case whose
``metadata["scenario"]`` holds a :class:`~tracegrade.evaluation.simulator.ConversationScenario` is simulated:
a ``UserSimulator`` (through the run's judge runtime) writes each next user message, the agent turns go
through the same adapter and turn spans as scripted turns, and the merged execution is graded like any
multi-turn case, with the scenario's goals for ``SimulationGoalsCriterion``.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Coroutine, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk.trace import TracerProvider
from pydantic import ValidationError

from tracegrade.capture import semconv
from tracegrade.capture.collector import TrajectoryCollector, make_trajectory_callback
from tracegrade.capture.context import TurnScope, turn_span
from tracegrade.criteria.base import BaseCriterion
from tracegrade.errors import (
    ConfigError,
    EvalSetError,
    EventLoopError,
    InvalidValueError,
    MissingFileError,
    RunInterrupted,
)
from tracegrade.evaluation.adapters import (
    AgentAdapter,
    AgentTurnError,
    CaseSession,
    LangGraphAdapter,
    adapter_for,
    run_agent_turn,
)
from tracegrade.evaluation.agent_loading import load_agent
from tracegrade.evaluation.checks import checked_eval_set
from tracegrade.evaluation.engine import EvaluatorFactory, RunGrader, build_case_result, create_grader
from tracegrade.evaluation.evaluation_events import EvaluationEventEmitter
from tracegrade.evaluation.mock_mode import expected_execution
from tracegrade.evaluation.simulator import (
    SCENARIO_KEY,
    ConversationScenario,
    SimulationResult,
    TurnRunner,
    UserSimulator,
    simulator_config_for,
)
from tracegrade.evaluation.trials import combine_trials
from tracegrade.models.config import EvalConfig
from tracegrade.models.dataset import EvalCase, EvalSet
from tracegrade.models.execution import ExecutionResult
from tracegrade.models.expectations import case_expectation, expectation_metadata
from tracegrade.models.files import validation_problems
from tracegrade.models.results import CriterionResult, EvalCaseResult, EvalReport

__all__ = ["AgentEvaluator", "create_eval_app", "interruption_of", "run_blocking"]

log = logging.getLogger("tracegrade.evaluation")


def create_eval_app(
    agent: Any, *, capture_all_events: bool = True, config: dict[str, Any] | None = None
) -> tuple[Any, TrajectoryCollector]:
    """Wire capture for ``agent`` and return ``(app, collector)`` for :class:`AgentEvaluator`.

    A LangGraph ``StateGraph`` is compiled (with an in-memory checkpointer) and LangChain is instrumented
    with OpenInference; a pydantic-ai ``Agent`` is instrumented with its built-in instrumentation; a plain
    callable is returned as is (trace it with ``trace_node``/``trace_tool``). Both instrumentations send
    their spans to a new provider that has the collector attached (``collector.tracer_provider``);
    ``config`` may set the ``thread_id``/``run_id`` stamped on every span.
    """
    collector = TrajectoryCollector(capture_all_events=capture_all_events)
    _, provider = make_trajectory_callback(collector, config)
    adapter = adapter_for(agent)
    adapter.instrument(provider, replace=True)
    app = adapter.graph if isinstance(adapter, LangGraphAdapter) else agent
    return app, collector


def _load_eval_set(eval_set: EvalSet | str | Path) -> tuple[EvalSet, str]:
    """The eval set, refused as ``validate`` refuses it (see :mod:`tracegrade.evaluation.checks`), and where it
    came from (for error messages)."""
    if isinstance(eval_set, EvalSet):
        return checked_eval_set(eval_set), f"<EvalSet {eval_set.eval_set_id}>"
    if not Path(eval_set).exists():
        raise MissingFileError(f"Eval set file not found: {eval_set}")
    return checked_eval_set(eval_set), str(eval_set)


def _check_simulated_cases(cases: Sequence[tuple[str, EvalCase]], source: str, config: EvalConfig) -> None:
    """Refuse malformed scenarios, simulated cases no simulated-user model can serve and simulated cases in
    ``mock_mode`` (before any agent runs).

    ``cases`` pairs each case with its JSON path in ``source``.
    """
    problems: list[tuple[str, str]] = []
    unserved: list[str] = []
    mocked: list[str] = []
    for where, case in cases:
        try:
            scenario = ConversationScenario.of_case(case)
        except ValidationError as exc:
            prefix = f"{where}.metadata.{SCENARIO_KEY}"
            problems += [(prefix + path.removeprefix("$"), message) for path, message in validation_problems(exc)]
            continue
        if scenario is not None and simulator_config_for(scenario, config.user_simulator_config) is None:
            unserved.append(case.eval_id)
        if scenario is not None and config.mock_mode:
            mocked.append(case.eval_id)
    if problems:
        raise EvalSetError(source, problems)
    if mocked:
        raise ConfigError(
            "<EvalConfig>",
            [
                (
                    "$.mock_mode",
                    "mock_mode grades each turn's expectations instead of running the agent, but "
                    f"{', '.join(map(repr, mocked))} "
                    f"{'are simulated cases' if len(mocked) != 1 else 'is a simulated case'} "
                    f"(metadata.{SCENARIO_KEY}) with no scripted turns; set mock_mode to false or leave "
                    "simulated cases out of this run",
                )
            ],
        )
    if unserved:
        raise ConfigError(
            "<EvalConfig>",
            [
                (
                    "$.user_simulator_config",
                    f"case{'s' if len(unserved) != 1 else ''} {', '.join(map(repr, unserved))} "
                    f"{'are' if len(unserved) != 1 else 'is'} simulated (metadata.{SCENARIO_KEY}) but no "
                    "simulated-user model is set; set EvalConfig.user_simulator_config "
                    '(e.g. UserSimulatorConfig(model=...)) or give each scenario a "model"',
                )
            ],
        )


def run_blocking(run: Coroutine[Any, Any, EvalReport], name: str = "evaluate") -> EvalReport:
    """Run ``run`` (a call of the coroutine function ``name``) to its report: the blocking ``<name>_sync`` form.

    Inside a running event loop it is an EventLoopError; stopped by Ctrl-C, :class:`RunInterrupted`
    carrying the cases that finished (every blocking form alike: ``evaluate_sync``, ``run_eval_sync``).
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        run.close()  # never awaited: close it so Python does not warn about it
        raise EventLoopError(f"{name}_sync cannot run inside a running event loop; use `await {name}(...)`")
    try:
        return asyncio.run(run)
    except RunInterrupted:
        raise
    except KeyboardInterrupt as exc:
        # Ctrl-C: asyncio.run cancelled the run, which wrote its partial report (_Interrupted), and then raised
        # a bare KeyboardInterrupt in place of the cancellation; say how far the run got instead
        if isinstance(exc.__context__, _Interrupted):
            raise exc.__context__.interrupted from None
        raise


class _Interrupted(asyncio.CancelledError):
    """The cancellation of an ``evaluate`` that was stopped (Ctrl-C), carrying what the run could report."""

    def __init__(self, interrupted: RunInterrupted) -> None:
        super().__init__(str(interrupted))
        self.interrupted = interrupted


def interruption_of(exc: BaseException) -> RunInterrupted | None:
    """What an ``evaluate`` that ``exc`` stopped could report (its finished cases): ``exc`` itself when it is
    :class:`RunInterrupted`, the one riding on its cancellation (Ctrl-C under ``asyncio.run``); else None."""
    if isinstance(exc, RunInterrupted):
        return exc
    return exc.interrupted if isinstance(exc, _Interrupted) else None


class _ClassOrInstanceMethod:
    """A method with one form on the class and another on an instance.

    The seed documents ``evaluate_sync`` as a classmethod that builds the evaluator, while an instance's
    natural blocking call takes :meth:`AgentEvaluator.evaluate`'s arguments; one name serves both.
    """

    def __init__(self, on_class: Callable[..., Any], on_instance: Callable[..., Any]) -> None:
        # on_class is a classmethod object at run time (bound through its __get__); a type checker sees
        # the decorated function inside the class body as a plain callable
        self.on_class = on_class
        self.on_instance = on_instance
        self.__doc__ = on_instance.__doc__

    def __get__(self, instance: object | None, owner: type) -> Callable[..., Any]:
        if instance is None:
            return self.on_class.__get__(None, owner)
        return self.on_instance.__get__(instance, owner)


class AgentEvaluator:
    """Evaluates an agent against eval sets.

    Args:
        agent: a plain sync or async callable, a LangGraph graph (compiled or not), a pydantic-ai ``Agent``,
            or an :class:`~tracegrade.evaluation.adapters.AgentAdapter`.
        collector: the ``TrajectoryCollector`` that receives the agent's spans. Without one the evaluator
            creates it and wires the framework instrumentation to it. A collector you attached to your own
            provider by hand also works: the turn spans then come from a private provider it is added to.
        config: criteria and run settings (default ``EvalConfig.default()``).
        evaluator_factory: builds the run's grader from its compiled criteria (see ``evaluation.engine``).
        extra_criteria: criterion instances attached to every run besides the config's slots (user criteria).
        logger_provider: where ``config.emit_evaluation_events`` sends its events (default: OTLP/HTTP).
    """

    def __init__(
        self,
        agent: Any,
        collector: TrajectoryCollector | None = None,
        config: EvalConfig | None = None,
        evaluator_factory: EvaluatorFactory | None = None,
        extra_criteria: Sequence[BaseCriterion] = (),
        logger_provider: LoggerProvider | None = None,
    ) -> None:
        self.adapter: AgentAdapter = adapter_for(agent)
        self.logger_provider = logger_provider
        self.agent = self.adapter.graph if isinstance(self.adapter, LangGraphAdapter) else agent
        self.config = config or EvalConfig.default()
        self.evaluator_factory = evaluator_factory
        self.extra_criteria = list(extra_criteria)
        owns_capture = collector is None
        if collector is None:
            collector, _ = make_trajectory_callback(TrajectoryCollector())
        elif collector.tracer_provider is None:
            collector.tracer_provider = TracerProvider()
            collector.tracer_provider.add_span_processor(collector)
        self.collector = collector
        self.provider: TracerProvider = collector.tracer_provider  # type: ignore[assignment]
        self.adapter.instrument(self.provider, replace=owns_capture)

    # ---- public API ----

    async def evaluate(
        self,
        eval_set: EvalSet | str | Path,
        parallel: bool | None = None,
        max_concurrency: int | None = None,
        verbose: bool = False,
        output_dir: str | Path | None = None,
    ) -> EvalReport:
        """Run every case and build the report; then run the configured reporters (unless disabled).

        ``parallel``/``max_concurrency`` default to the config's. ``config.timeout`` bounds each case's agent
        turns (and, for a simulated case, the simulated user's messages; grading is not counted); a timed-out
        case becomes an error result and the others continue (a sync agent's worker thread cannot be stopped:
        it finishes in the background). Raises ``FileNotFoundError`` for a missing eval-set file,
        :class:`~tracegrade.errors.EvalSetError` for an eval set ``tracegrade validate`` refuses (empty,
        duplicate case ids, a malformed ``metadata.scenario`` or ``metadata.selector``…),
        :class:`~tracegrade.errors.NoCriteriaError` for a config that enables no criterion and
        :class:`~tracegrade.errors.ConfigError` for simulated cases with no simulated-user model (neither
        ``user_simulator_config`` nor ``scenario.model``) — all before any agent runs.

        Stopped before its end (Ctrl-C), the run still has the reporters write the cases that finished, the
        report marked ``metadata["incomplete"]``; ``evaluate_sync`` then raises
        :class:`~tracegrade.errors.RunInterrupted` (a ``KeyboardInterrupt``) carrying that report, and an
        awaited ``evaluate`` ends in the cancellation as any coroutine does.
        """
        loaded, source = _load_eval_set(eval_set)
        grader = create_grader(self.config, self.evaluator_factory, self.extra_criteria)
        _check_simulated_cases(
            [(f"$.eval_cases[{i}]", c) for i, c in enumerate(loaded.eval_cases)], source, self.config
        )
        parallel = self.config.parallel if parallel is None else parallel
        limit = max_concurrency or self.config.max_concurrency
        if limit < 1:
            raise InvalidValueError(f"max_concurrency must be at least 1, got {limit}")
        run = _Run(self, grader, loaded.eval_set_id, verbose or self.config.verbose, len(loaded.eval_cases))
        try:
            results = await self._run_cases(run, loaded.eval_cases, parallel, limit)
        except (asyncio.CancelledError, KeyboardInterrupt) as exc:
            raise self._stopped(run, loaded, output_dir, exc) from exc
        finally:
            if run.events is not None:
                run.events.close()
        report = self._report(run, loaded, results)
        self._run_reporters(report, output_dir)
        return report

    def _report(self, run: _Run, loaded: EvalSet, results: list[EvalCaseResult]) -> EvalReport:
        return EvalReport.create(
            loaded.eval_set_id,
            results,
            eval_set_name=loaded.name,
            config_used=self.config.redacted_dump(),
            metadata={"run_id": run.run_id},
        )

    def _stopped(self, run: _Run, loaded: EvalSet, output_dir: str | Path | None, exc: BaseException) -> BaseException:
        """What a run stopped before its end raises, once the reporters have written what it finished.

        Cancelled (Ctrl-C under ``asyncio.run`` cancels the running task; so may the caller): the report of the
        finished cases, marked ``metadata["incomplete"]`` as the pytest plugin marks a stopped session, rides
        on the cancellation, which stays a cancellation. A KeyboardInterrupt raised inside the run (a sync
        agent on the event loop's thread) becomes :class:`RunInterrupted`.
        """
        finished = [run.finished[case.eval_id] for case in loaded.eval_cases if case.eval_id in run.finished]
        report = self._report(run, loaded, finished)
        total = len(loaded.eval_cases)
        report.metadata["incomplete"] = f"the run was interrupted after {len(finished)} of {total} cases"
        written = self._run_reporters(report, output_dir)
        interrupted = RunInterrupted(report, len(finished), total, written)
        if isinstance(exc, KeyboardInterrupt):
            return interrupted
        return _Interrupted(interrupted)

    @staticmethod
    async def _run_cases(run: _Run, cases: list[EvalCase], parallel: bool, limit: int) -> list[EvalCaseResult]:
        if parallel and len(cases) > 1:
            semaphore = asyncio.Semaphore(limit)

            async def guarded(case: EvalCase) -> EvalCaseResult:
                async with semaphore:
                    return await run.case(case)

            return list(await asyncio.gather(*(guarded(c) for c in cases)))
        return [await run.case(c) for c in cases]

    async def evaluate_case(self, case: EvalCase) -> EvalCaseResult:
        """Run and grade one case (no reporters); refuses what :meth:`evaluate` refuses."""
        grader = create_grader(self.config, self.evaluator_factory, self.extra_criteria)
        _check_simulated_cases([("$", case)], f"<EvalCase {case.eval_id}>", self.config)
        return await _Run(self, grader, "", self.config.verbose, 1).case(case)

    def _evaluate_sync_on_instance(
        self,
        eval_set: EvalSet | str | Path,
        parallel: bool | None = None,
        max_concurrency: int | None = None,
        verbose: bool = False,
        output_dir: str | Path | None = None,
    ) -> EvalReport:
        """Blocking :meth:`evaluate` with its arguments: ``AgentEvaluator(app, collector).evaluate_sync(eval_set)``
        (not usable inside a running event loop)."""
        return run_blocking(self.evaluate(eval_set, parallel, max_concurrency, verbose, output_dir))

    @classmethod
    def _evaluate_sync_on_class(
        cls,
        agent: Any,
        collector: TrajectoryCollector | None,
        eval_set: EvalSet | str | Path,
        config: EvalConfig | None = None,
        verbose: bool = False,
    ) -> EvalReport:
        """The seed's form, ``AgentEvaluator.evaluate_sync(app, collector, eval_set, config)``: build the
        evaluator and run :meth:`evaluate` to the end (not usable inside a running event loop)."""
        return cls(agent, collector, config).evaluate_sync(eval_set, verbose=verbose)

    @classmethod
    async def evaluate_file(
        cls, agent_module: str | Path, eval_file: str | Path, config_file: str | Path | None = None
    ) -> EvalReport:
        """Load the agent from a module or ``.py`` file (``graph``/``compiled_graph``/``agent_graph``/``app``/
        ``agent``), wire capture with :func:`create_eval_app`, and evaluate ``eval_file``."""
        config = EvalConfig.from_file(config_file) if config_file else None
        app, collector = create_eval_app(load_agent(agent_module))
        return await cls(app, collector, config).evaluate(eval_file)

    evaluate_sync = _ClassOrInstanceMethod(_evaluate_sync_on_class, _evaluate_sync_on_instance)
    del _evaluate_sync_on_class, _evaluate_sync_on_instance  # reachable only as evaluate_sync

    # ---- internals ----

    def _run_reporters(self, report: EvalReport, output_dir: str | Path | None) -> list[str]:
        """Run the configured reporters; returns the files they wrote."""
        if not self.config.reporter.enabled:
            return []
        from tracegrade.reporters import ReporterManager

        try:
            output = ReporterManager(self.config.reporter).run_all(report, output_dir)
        except Exception:  # a broken reporter must not lose the report the caller gets back
            log.exception("the reporters failed for eval set %s", report.eval_set_id)
            return []
        for reporter, message in output.errors:
            log.warning("reporter %s failed: %s", reporter, message)
        return [str(path) for path in output.generated_files]


class _Run:
    """One evaluate() call: its run id, grader and per-case driving."""

    def __init__(self, owner: AgentEvaluator, grader: RunGrader, eval_set_id: str, verbose: bool, total: int) -> None:
        self.owner = owner
        self.grader = grader
        self.eval_set_id = eval_set_id
        self.verbose = verbose
        self.num_runs = owner.config.num_runs
        self.total = total * self.num_runs  # trials, as the verbose progress counts them
        self.done = 0
        self.run_id = owner.collector.run_id or uuid.uuid4().hex[:8]
        self.timeout = owner.config.timeout
        self.events = EvaluationEventEmitter(owner.logger_provider) if owner.config.emit_evaluation_events else None
        self.roots: dict[str, dict[str, str]] = {}  # case id -> its current trial's turn root spans (trace -> span)
        self.finished: dict[str, EvalCaseResult] = {}  # case id -> result: what a stopped run can still report

    async def case(self, case: EvalCase) -> EvalCaseResult:
        """The case's ``num_runs`` trials, one after another (they share the collector's slot for the case),
        combined into one result."""
        result = combine_trials([await self._trial(case, trial) for trial in range(self.num_runs)])
        self.finished[case.eval_id] = result
        return result

    async def _trial(self, case: EvalCase, trial: int) -> EvalCaseResult:
        start = time.perf_counter()
        try:
            result = await self._case(case, start, trial)
        except Exception as exc:  # never let one case take the run down
            log.exception("case %s failed unexpectedly", case.eval_id)
            result = EvalCaseResult.failure(
                case.eval_id,
                f"internal error: {type(exc).__name__}: {exc}",
                name=case.name,
                duration_seconds=time.perf_counter() - start,
                metadata=expectation_metadata(case.metadata),  # an expected failure stays one
            )
        finally:
            self.owner.collector.release(case.eval_id, self.run_id)
        roots = self.roots.pop(case.eval_id, {})
        if self.events is not None:
            self.events.emit_case(result, self.run_id, roots)
        self.done += 1
        if self.verbose:
            print(self._progress_line(case, result))
        return result

    def _progress_line(self, case: EvalCase, result: EvalCaseResult) -> str:
        """``-v``'s line for a finished trial: its count, outcome, case id and (agent's) error, on one line."""
        from tracegrade.reporters.text import one_line  # the reporters (rich) load only when a line is printed

        status = "ERROR" if result.is_error else ("PASS" if result.passed else "FAIL")
        expected = case_expectation(result)  # a case marked metadata.xfail: XFAIL as expected, XPASS not
        status = expected.upper() if expected else status
        # the error is the agent's text (an exception message may hold a newline or terminal escapes)
        detail = f" - {one_line(result.error)}" if result.error else ""
        return f"[{self.done}/{self.total}] {status} {one_line(case.eval_id)} ({result.duration_seconds:.2f}s){detail}"

    async def _case(self, case: EvalCase, start: float, trial: int) -> EvalCaseResult:
        session = CaseSession(
            thread_id=f"eval_{self.run_id}_{case.eval_id}" + (f"_trial{trial + 1}" if trial else ""),
            user_id=case.session_input.user_id,
            state=dict(case.session_input.state),
            config=dict(case.session_input.config),
        )
        executions: list[ExecutionResult] = []
        simulated = self._simulated(case)
        if simulated is None:
            conversation = self._drive(case, session, executions)
        else:
            conversation = simulated.converse(partial(self._turn, case, session, executions))
        error = error_traceback = None
        try:
            if not await _within(conversation, self.timeout):
                error = f"timed out after {self.timeout:g}s"
        except AgentTurnError as exc:
            error, error_traceback = str(exc), exc.agent_traceback
        execution = ExecutionResult.merge_turns(executions) if executions else ExecutionResult()
        graded_case = case
        if simulated is not None:
            error, error_traceback = simulated.ended(error)
            graded_case, execution = simulated.grading_inputs(case, execution)
        criterion_results: list[CriterionResult] = []
        if error is None:
            try:
                criterion_results = await self.grader.grade(execution, graded_case)
            except Exception as exc:
                error = f"grading failed: {type(exc).__name__}: {exc}"
        result = build_case_result(case, execution, criterion_results, time.perf_counter() - start)
        if error is not None:
            result = result.model_copy(update={"passed": False, "error": error, "error_traceback": error_traceback})
        return simulated.record(result) if simulated is not None else result

    def _simulated(self, case: EvalCase) -> _SimulatedConversation | None:
        scenario = ConversationScenario.of_case(case)  # checked before the run started
        if scenario is None:
            return None
        settings = simulator_config_for(scenario, self.owner.config.user_simulator_config)
        return _SimulatedConversation(scenario, UserSimulator(config=settings, runtime=self.grader.runtime))

    async def _drive(self, case: EvalCase, session: CaseSession, executions: list[ExecutionResult]) -> None:
        """A scripted conversation: the case's user messages, one per turn (in ``mock_mode``, what each turn
        expects stands in for the agent)."""
        if self.owner.config.mock_mode:
            executions.extend(expected_execution(invocation) for invocation in case.conversation)
            return
        for index, invocation in enumerate(case.conversation):
            await self._turn(case, session, executions, index, invocation.user_content.get_text())

    async def _turn(
        self, case: EvalCase, session: CaseSession, executions: list[ExecutionResult], index: int, text: str
    ) -> str | None:
        """One agent turn under its own turn root span; the turn's spans are mapped as it ends."""
        owner = self.owner
        scope = TurnScope(case.eval_id, index, self.run_id, self.eval_set_id, session.thread_id)
        try:
            with turn_span(owner.provider, scope, text) as span:
                context = span.get_span_context()
                self.roots.setdefault(case.eval_id, {})[f"{context.trace_id:032x}"] = f"{context.span_id:016x}"
                reply = await run_agent_turn(owner.adapter, session, index, text)
                if reply is not None:
                    span.set_attribute(semconv.TURN_OUTPUT, reply)
                return reply
        finally:  # also a timed-out or failed turn keeps what it captured
            owner.provider.force_flush()
            executions.append(owner.collector.execution_for(case.eval_id, index, self.run_id))


async def _within(conversation: Coroutine[Any, Any, None], timeout: float) -> bool:
    """Run ``conversation``; True when it finished within ``timeout`` seconds, False when it was cut off then.

    Not ``asyncio.wait_for``: before Python 3.12 it swallows a cancellation that arrives as the awaited turn
    finishes, so a Ctrl-C at that moment (``asyncio.run`` cancels the run's task) was lost and the run went on.
    """
    task = asyncio.ensure_future(conversation)
    try:
        done, _ = await asyncio.wait({task}, timeout=timeout)
    except asyncio.CancelledError:  # the run is stopping: stop the conversation too, then go on stopping
        await _stop(task)
        raise
    if done:
        task.result()  # the conversation's own error (AgentTurnError…)
        return True
    await _stop(task)
    return False


async def _stop(task: asyncio.Future[None]) -> None:
    """Cancel ``task`` and wait until it has ended (its turn spans closed, its captures kept by ``_turn``)."""
    task.cancel()
    await asyncio.wait({task})
    if not task.cancelled() and task.exception() is not None:  # retrieved: asyncio would log it as lost
        log.debug("a case's conversation failed while being stopped: %r", task.exception())


class _SimulatedConversation:
    """One simulated case: its scenario, its simulated user (on the run's judge runtime) and how it went."""

    def __init__(self, scenario: ConversationScenario, simulator: UserSimulator) -> None:
        self.scenario = scenario
        self.simulator = simulator
        self.result = SimulationResult(scenario_id=scenario.scenario_id)

    async def converse(self, run_turn: TurnRunner) -> None:
        await self.simulator.converse(self.scenario, run_turn, self.result)

    def ended(self, error: str | None) -> tuple[str | None, str | None]:
        """The case's error, a timeout (``error``) or what stopped the conversation, and the agent's traceback
        when it was the agent that raised."""
        if error is not None:
            self.result.stopped_by, self.result.error, self.result.error_traceback = "error", error, None
        return self.result.error, self.result.error_traceback

    def grading_inputs(self, case: EvalCase, execution: ExecutionResult) -> tuple[EvalCase, ExecutionResult]:
        """The case with the scenario's goals; the execution with the conversation as its messages when the
        agent's spans carried none (so the judges see the transcript)."""
        if not execution.messages:
            execution = execution.model_copy(update={"messages": [dict(m) for m in self.result.conversation]})
        return self.scenario.grading_case(case), execution

    def record(self, result: EvalCaseResult) -> EvalCaseResult:
        """How the conversation ended, in the case metadata; the simulated user's usage counts as judge usage."""
        self.result.record_grades(result.criterion_results, self.scenario.goals)
        outcome = {**self.result.outcome(), "goals": list(self.scenario.goals), "model": self.simulator.model}
        return result.model_copy(
            update={
                "metadata": {**result.metadata, "simulation": outcome},
                "token_usage": result.token_usage + self.result.simulator_token_usage,
            }
        )
