"""tracegrade's pytest plugin (entry point ``pytest11``): fixtures, one report per session, a baseline gate.

* Fixtures: ``tracegrade_collector`` (a fresh ``TrajectoryCollector`` on its own tracer and logger providers),
  ``tracegrade_app`` (a factory: ``app, collector = tracegrade_app(agent)``, what ``create_eval_app``
  returns) and ``tracegrade_store`` (a ``TraceStore`` on a temporary DuckDB file).
* Every case graded through ``tracegrade.testing.run_eval`` / ``eval_test`` is recorded; with pytest-xdist
  each worker sends its cases to the controller, which merges them (in collection order) into one report.
* ``--tracegrade-report DIR`` writes that report as ``<id>.json``, ``<id>.html`` and ``<id>_junit.xml``.
* ``--tracegrade-store STORE`` records the session's report there as a run (kind ``live``; through
  ``tracegrade serve`` when it holds the file, with ``TRACEGRADE_TOKEN``). Only when asked: ``TRACEGRADE_STORE``,
  which the CLI reads, does not make every pytest session write to that store.
* ``--tracegrade-baseline RUN`` gates the session against a baseline: a saved report JSON file, or a run in
  the store (a run id or unique prefix, ``latest``, ``latest~N``: what ``tracegrade gate`` accepts, resolved
  before this session is recorded). The session fails only on a regression that is significant at
  ``--tracegrade-alpha`` (paired McNemar and permutation tests, :func:`tracegrade.evaluation.compare.compare_runs`),
  a drop larger than ``--tracegrade-max-drop``, or with ``--tracegrade-strict`` any case gone from pass to fail.
* A session that runs only part of its tests (stopped early, ``--lf``, tests deselected or named by id on the command
  line) writes its report marked ``metadata.incomplete`` but is neither gated nor recorded: a part of a run must
  not become the next session's baseline. The summary says why in one line.
* ``--tracegrade-num-runs N`` sets ``EvalConfig.num_runs`` of every run the session grades through
  ``run_eval`` / ``eval_test``: each case runs N times (see :mod:`tracegrade.evaluation.trials`).

The terminal summary counts the graded cases and explains the ones that failed inside tests marked
``xfail`` (whose failure pytest itself does not print). Its lines quote case ids, reasons and errors: control
characters in them (an ESC sequence in an agent's error) are shown as visible escapes, never sent raw.

This module loads in every pytest run of every tracegrade user, so it imports only the standard library,
pytest and :mod:`tracegrade.testing.recording` at load time; everything else loads when a fixture or a
session with graded cases needs it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tracegrade.testing.recording import SessionRecorder, active_recorder, set_active_recorder

__all__ = [
    "pytest_addoption",
    "pytest_configure",
    "tracegrade_app",
    "tracegrade_collector",
    "tracegrade_store",
]

_WORKER_OUTPUT_KEY = "tracegrade_cases"
_WORKER_PLANS_KEY = "tracegrade_planned"  # a stopped worker's unfinished tests and the cases each would grade
_WORKER_DESELECTED_KEY = "tracegrade_deselected"  # how many tests a worker deselected (-k, -m, --deselect)
_STATE = pytest.StashKey["_SessionState"]()


class _SessionState:
    """What one pytest process keeps for tracegrade: the recorder, test order and outcomes, the results."""

    def __init__(self, previous: SessionRecorder | None) -> None:
        self.recorder = SessionRecorder()
        self.previous = previous  # restored at unconfigure (pytester runs sessions inside sessions)
        self.order: dict[str, int] = {}
        self.xfailed: set[str] = set()
        self.finished: set[str] = set()  # tests whose teardown ran
        self.report: Any = None  # the merged EvalReport, once the session finished
        self.written: list[str] = []
        self.problems: list[str] = []
        self.baseline: Any = None  # (name, run outcomes: evaluation.run_outcomes.Run) resolved at configure time
        self.gate: Any = None  # the RunComparison against it
        self.recorded_run: str | None = None
        self.incomplete: str | None = None  # why the session graded only part of what it collected
        self.stopped: str | None = None  # how it ended early: "interrupted" or "stopped early (...)"
        self.progress: tuple[int, int] = (0, 0)  # (cases graded, cases the collected tests would have graded)
        self.items: list[pytest.Item] = []
        # under xdist, the stopped workers' _plans (the controller collects no items of its own)
        self.worker_plans: dict[str, int] = {}
        self.last_failed: set[str] = set()  # with --lf, the tests pytest's cache says failed last time
        # eval tests deselected by -k, -m, --deselect (--lf and --sw deselect too); under xdist, as the workers say
        self.deselected = 0
        self.named_tests = False  # the command line named tests (file.py::test[id]), not only files or directories


# the configured sessions, innermost last (pytester runs sessions inside a session)
_STATES: list[_SessionState] = []


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("tracegrade", "tracegrade agent evaluations")
    group.addoption(
        "--tracegrade-report",
        metavar="DIR",
        default=None,
        help="write the session's evaluation report (JSON, HTML, JUnit XML) into DIR",
    )
    group.addoption(
        "--tracegrade-store",
        metavar="STORE",
        default=None,
        help="record the session's report as a run in this store, where --tracegrade-baseline also looks up runs",
    )
    group.addoption(
        "--tracegrade-baseline",
        metavar="RUN",
        default=None,
        help="gate the session against this baseline: a JSON report (e.g. written by --tracegrade-report) or a "
        "run in --tracegrade-store (run id or prefix, latest, latest~N); fails only on a significant regression",
    )
    group.addoption(
        "--tracegrade-alpha",
        metavar="ALPHA",
        type=float,
        default=0.05,
        help="significance level of the baseline gate (default 0.05)",
    )
    group.addoption(
        "--tracegrade-max-drop",
        metavar="FRACTION",
        type=float,
        default=None,
        help="also fail on an observed drop of the pass rate or a criterion's mean score larger than this",
    )
    group.addoption(
        "--tracegrade-strict",
        action="store_true",
        default=False,
        help="the baseline gate fails on any case that went from pass to fail",
    )
    group.addoption(
        "--tracegrade-num-runs",
        metavar="N",
        type=int,
        default=None,
        help="run every graded case N times (sets EvalConfig.num_runs; scores are means over the trials)",
    )


def pytest_configure(config: pytest.Config) -> None:
    num_runs = config.getoption("tracegrade_num_runs", None)
    if num_runs is not None and num_runs < 1:
        raise pytest.UsageError(f"--tracegrade-num-runs must be at least 1, got {num_runs}")
    alpha = config.getoption("tracegrade_alpha", 0.05)
    if not 0 < alpha < 1:
        raise pytest.UsageError(f"--tracegrade-alpha must be between 0 and 1 (exclusive), got {alpha}")
    max_drop = config.getoption("tracegrade_max_drop", None)
    if max_drop is not None and not 0 <= max_drop <= 1:
        raise pytest.UsageError(f"--tracegrade-max-drop must be a fraction between 0 and 1, got {max_drop}")
    state = _SessionState(active_recorder())
    state.recorder.num_runs = num_runs
    cache = getattr(config, "cache", None)  # None with -p no:cacheprovider, which has no --lf either
    if cache is not None and config.getoption("lf", False):
        state.last_failed = set(cache.get("cache/lastfailed", {}))
    baseline = config.getoption("tracegrade_baseline", None)
    if baseline is not None and not hasattr(config, "workerinput"):  # xdist workers leave the gate to the controller
        state.baseline = _load_baseline(config, baseline)
    # a node id (`test_x.py::test_case[paris]`) picks tests out of a file; a file or directory runs all of them
    state.named_tests = any("::" in str(arg) for arg in config.args)
    config.stash[_STATE] = state
    _STATES.append(state)
    set_active_recorder(state.recorder)


def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(_STATE, None)
    if state is not None:
        set_active_recorder(state.previous)
        if state in _STATES:
            _STATES.remove(state)


def pytest_collection_finish(session: pytest.Session) -> None:
    state = session.config.stash[_STATE]
    state.order = {item.nodeid: i for i, item in enumerate(session.items)}
    state.items = list(session.items)


def pytest_deselected(items: list[pytest.Item]) -> None:
    # only eval tests count: `-m "not slow"` leaving out unit tests still runs the whole eval set (a test that calls
    # run_eval itself says which cases it grades only when it runs, so leaving it out goes unseen)
    evals = sum(1 for item in items if _planned_cases(item))
    if evals:
        items[0].config.stash[_STATE].deselected += evals


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    state = item.config.stash[_STATE]
    state.recorder.current_test = (state.order.get(item.nodeid, len(state.order)), item.nodeid)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # pytest passes no config here; the innermost session being run is the one reporting
    if not _STATES:
        return
    if report.skipped and getattr(report, "wasxfail", None) is not None:  # failed as expected
        _STATES[-1].xfailed.add(report.nodeid)
    if report.when == "teardown":
        _STATES[-1].finished.add(report.nodeid)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """pytest-xdist: a worker finished; add the cases it graded.

    xdist calls this twice for a worker stopped by Ctrl-C (once as finished, once as down): what the worker sent
    is taken out of its output, so its cases are added once."""
    output = getattr(node, "workeroutput", {})
    state = node.config.stash[_STATE]
    payload = output.pop(_WORKER_OUTPUT_KEY, None)
    if payload:
        state.recorder.add_payload(payload)
    plans = output.pop(_WORKER_PLANS_KEY, None)
    if plans:
        state.worker_plans.update(json.loads(plans))
    # every worker collects every test and deselects the same ones
    state.deselected = max(state.deselected, output.pop(_WORKER_DESELECTED_KEY, 0))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    state = config.stash[_STATE]
    if hasattr(config, "workerinput"):  # an xdist worker: the controller reports
        config.workeroutput[_WORKER_OUTPUT_KEY] = state.recorder.to_payload()  # type: ignore[attr-defined]
        config.workeroutput[_WORKER_DESELECTED_KEY] = state.deselected  # type: ignore[attr-defined]
        if exitstatus == pytest.ExitCode.INTERRUPTED or session.shouldstop or session.shouldfail:
            # the session ends early: the controller, which collects nothing, counts the cases left from these
            plans = json.dumps(_plans(state.items, state.finished))
            config.workeroutput[_WORKER_PLANS_KEY] = plans  # type: ignore[attr-defined]
        return
    state.stopped = _how_stopped(session, exitstatus, len(state.finished))
    if state.stopped is not None:
        state.progress = _progress(state)
    if not state.recorder.cases:
        return
    state.report = state.recorder.merged_report()
    state.incomplete = _why_partial(state)
    if state.incomplete:
        state.report.metadata["incomplete"] = state.incomplete
    report_dir = config.getoption("tracegrade_report", None)
    if report_dir is not None:
        _write_reports(state, Path(report_dir))
    # a part of the run is no baseline, and no run to compare with one: it is reported, never gated or recorded
    if state.baseline is not None and not state.incomplete:
        _gate(state, config)
    store = config.getoption("tracegrade_store", None)
    if store and not state.incomplete:
        _record(state, store)
    failed = (state.gate is not None and state.gate.verdict == "fail") or state.problems
    if failed and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


_INTERRUPTED = "interrupted"


def _why_partial(state: _SessionState) -> str | None:
    """Why the session ran only part of the tests a full run runs, as the report's ``metadata.incomplete`` and the
    summary say it; None for a full run."""
    if state.stopped is not None:
        verb = "was " if state.stopped == _INTERRUPTED else ""
        return f"the session {verb}{state.stopped}"
    if state.last_failed & state.finished:  # --lf narrowed the session to last time's failures
        return "the session reran only the tests that failed last time (--lf)"
    if state.named_tests:
        return "the session ran only the tests named on its command line"
    if state.deselected:
        tests = "test" if state.deselected == 1 else "tests"
        return f"the session deselected {state.deselected} eval {tests} (-k, -m, --deselect, --sw)"
    return None


def _how_stopped(session: pytest.Session, exitstatus: int, finished: int) -> str | None:
    """How the session ended before running every test it collected: ``interrupted`` (Ctrl-C) or ``stopped
    early (why)`` (``-x``/``--maxfail``); None when it ran them all."""
    if exitstatus == pytest.ExitCode.INTERRUPTED:
        return _INTERRUPTED
    if finished < session.testscollected:
        stopped = session.shouldfail or session.shouldstop
        return f"stopped early ({stopped})" if isinstance(stopped, str) else "stopped early"
    return None


def _progress(state: _SessionState) -> tuple[int, int]:
    """``(graded, planned)``: the cases graded, and those plus the cases of every test that did not finish nor
    grade any (as far as a test says before it runs: see :func:`_planned_cases`); under xdist, of the tests the
    stopped workers left (a test one worker left, another may have run)."""
    graded = len(state.recorder.cases)
    done = state.finished | {case.test_id for case in state.recorder.cases}
    plans = {**state.worker_plans, **_plans(state.items, done)}
    return graded, graded + sum(count for test, count in plans.items() if test not in done)


def _plans(items: list[pytest.Item], done: set[str]) -> dict[str, int]:
    """The cases each test of ``items`` not in ``done`` would grade, by test id (tests that grade none left out)."""
    plans = {item.nodeid: _planned_cases(item) for item in items if item.nodeid not in done}
    return {test: count for test, count in plans.items() if count}


def _planned_cases(item: pytest.Item) -> int:
    """How many cases a test grades, known before it runs: one for a test of ``parametrize_eval_cases``, the eval
    file's for an ``eval_test``; none for any other (a test calling ``run_eval`` says so only when it runs)."""
    from tracegrade.models.dataset import EvalCase
    from tracegrade.testing.running import planned_cases

    callspec = getattr(item, "callspec", None)
    if callspec is not None and any(isinstance(value, EvalCase) for value in callspec.params.values()):
        return 1
    return planned_cases(getattr(item, "function", None))


def _write_reports(state: _SessionState, directory: Path) -> None:
    from tracegrade.models.config import ReporterConfig
    from tracegrade.reporters import ReporterManager

    settings = ReporterConfig(console=False, json_report=True, html=True, junit_xml=True, timestamp_files=False)
    output = ReporterManager(settings).run_all(state.report, directory)
    state.written = output.generated_files
    state.problems += [f"{name}: {message}" for name, message in output.errors]


def _failure_reason(exc: Exception) -> str:
    """What went wrong reading or writing a store, as the session's problem or usage line says it.

    Beside tracegrade's own errors, which say it themselves, the store's and the reports' client libraries raise
    their own (http.client's, OSError, DuckDB's, pyarrow's on a damaged stored run): named by their type, for their
    message alone may not say what failed. Either way a line, never pytest's INTERNALERROR traceback."""
    from tracegrade.errors import TracegradeError

    return str(exc) if isinstance(exc, TracegradeError) else f"{type(exc).__name__}: {exc}"


def _load_baseline(config: pytest.Config, ref: str) -> Any:
    from tracegrade.errors import TracegradeError
    from tracegrade.store.lake_location import redacted
    from tracegrade.testing.session_store import load_baseline

    store = config.getoption("tracegrade_store", None)
    try:
        return load_baseline(ref, store or None, os.environ.get("TRACEGRADE_TOKEN"))  # a lake stays a string
    except Exception as exc:
        reason = _failure_reason(exc)
        if not isinstance(exc, TracegradeError):  # a library's words do not say what it was reading
            reason = f"reading it from {redacted(store) if store else ref} failed: {reason}"
        raise pytest.UsageError(f"--tracegrade-baseline {ref!r}: {reason}") from None


def _gate(state: _SessionState, config: pytest.Config) -> None:
    from tracegrade.testing.session_store import GateSettings, gate_session

    settings = GateSettings(
        alpha=config.getoption("tracegrade_alpha"),
        max_drop=config.getoption("tracegrade_max_drop"),
        strict=config.getoption("tracegrade_strict"),
    )
    state.gate = gate_session(state.baseline, state.report, settings)
    if state.gate.paired_cases == 0:  # a baseline of another eval set would pass every change
        state.problems.append(
            f"the baseline {state.gate.baseline} shares no case with this session: nothing was compared"
        )


def _record(state: _SessionState, store: str) -> None:
    """Record the session as a run in ``store``; a failure is the session's problem (shown, the session failed),
    its report files already written."""
    from tracegrade.store.lake_location import redacted
    from tracegrade.testing.session_store import record_session

    try:
        state.recorded_run = record_session(state.report, store, os.environ.get("TRACEGRADE_TOKEN"))
    except Exception as exc:  # the last step of a session: a problem line that says what failed
        reason = _failure_reason(exc)
        state.problems.append(f"the session's run could not be recorded in {redacted(store)}: {reason}")


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    state = config.stash.get(_STATE, None)
    if state is None:
        return

    def write(text: str, **markup: bool) -> None:
        from tracegrade.reporters.text import clean_text

        for line in clean_text(text).split("\n"):
            terminalreporter.write_line(line, **markup)

    if state.report is None:  # stopped before any case was graded: say so when some were to be
        if state.stopped is not None and state.progress[1]:
            terminalreporter.section("tracegrade")
            write(_incomplete_line(state), red=True)
        return
    from tracegrade.reporters.text import one_line
    from tracegrade.testing.explain import explain_case

    tracegrade_store = config.getoption("tracegrade_store", None)
    terminalreporter.section("tracegrade")
    s = state.report.summary
    from tracegrade.models.expectations import XFAILED, XPASSED, case_expectation

    counts = f"{s.total_cases} case(s) graded: {s.passed_cases} passed, {s.failed_cases} failed, {s.error_cases} errors"
    marked = [case_expectation(r) for r in state.report.results]
    xfailed, xpassed = marked.count(XFAILED), marked.count(XPASSED)
    if xfailed or xpassed:  # the cases marked metadata.xfail, as pytest counts them
        counts += f" ({xfailed + xpassed} marked xfail: {xfailed} failed as expected, {xpassed} passed unexpectedly)"
    write(counts)
    # every failed case of a test that failed as expected (an eval_test may grade several), under its test once
    by_test: dict[str, list[Any]] = {}
    for result in state.report.failed_cases:
        if (test := result.metadata.get("pytest_test")) in state.xfailed:
            by_test.setdefault(test, []).append(result)
    for test, results in by_test.items():
        write(f"expected to fail ({one_line(test)}):")
        for line in "\n".join(explain_case(r) for r in results).splitlines():
            write("  " + line)
    if s.pass_rate_ci is not None:
        low, high = s.pass_rate_ci
        write(f"{s.num_runs} trials per case: pass rate 95% interval {low:.1%}-{high:.1%}, {s.flaky_cases} flaky")
    for path in state.written:
        write(f"report: {path}")
    if state.stopped is not None:
        write(_incomplete_line(state), red=True)
    if state.incomplete:
        what = [w for w, asked in (("gated", state.baseline is not None), ("recorded", tracegrade_store)) if asked]
        if what:
            write(f"not {' or '.join(what)}: {state.incomplete}, so these cases are only part of the run", red=True)
    if state.recorded_run is not None:
        from tracegrade.store.lake_location import redacted

        write(f"recorded run {state.recorded_run} in {redacted(tracegrade_store)}")
    if state.gate is not None:
        from tracegrade.testing.session_store import all_flips_hint, gate_lines

        report_json = next((path for path in state.written if path.endswith(".json")), None)
        see_all = all_flips_hint(state.gate.baseline, state.recorded_run, tracegrade_store, report_json)
        for line, red in gate_lines(state.gate, see_all):
            write(line, red=red)
    for problem in state.problems:
        write(f"problem: {problem}", red=True)


def _incomplete_line(state: _SessionState) -> str:
    graded, planned = state.progress
    return f"incomplete: {state.stopped} after {graded} of {planned} cases"


# ---- fixtures ----


@pytest.fixture
def tracegrade_collector() -> Iterator[Any]:
    """A fresh ``TrajectoryCollector`` attached to its own ``TracerProvider`` (``collector.tracer_provider``) and
    ``LoggerProvider`` (``collector.logger_provider``; the process's log records reach it too); both providers
    are shut down after the test."""
    from tracegrade.capture.collector import TrajectoryCollector, make_trajectory_callback

    collector = TrajectoryCollector()
    _, provider = make_trajectory_callback(collector)
    yield collector
    provider.shutdown()
    collector.logger_provider.shutdown()


@pytest.fixture
def tracegrade_app() -> Iterator[Callable[..., tuple[Any, Any]]]:
    """A factory: ``app, collector = tracegrade_app(agent, **create_eval_app_options)``; every provider it
    made is shut down after the test."""
    from tracegrade.evaluation.evaluator import create_eval_app

    made: list[Any] = []

    def make(agent: Any, **options: Any) -> tuple[Any, Any]:
        app, collector = create_eval_app(agent, **options)
        made.append(collector)
        return app, collector

    yield make
    for collector in made:
        for provider in (collector.tracer_provider, collector.logger_provider):
            if provider is not None:
                provider.shutdown()


@pytest.fixture
def tracegrade_store(tmp_path: Path) -> Iterator[Any]:
    """A ``TraceStore`` on a DuckDB file in the test's temporary directory, closed after the test."""
    from tracegrade.store import TraceStore

    store = TraceStore(tmp_path / "tracegrade.duckdb")
    yield store
    store.close()
