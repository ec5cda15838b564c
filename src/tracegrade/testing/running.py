"""Running evaluations from tests: ``run_eval`` / ``run_eval_sync`` and the ``eval_test`` decorator.

Every report they produce goes to the pytest session's recorder (when the tracegrade plugin is loaded), so
``--tracegrade-report`` writes the session's cases once, in one report. They never write report files or
print on their own: in the reference every call printed a console report and wrote files into
``./eval_reports``, once per test.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, cast

from tracegrade.criteria.base import BaseCriterion
from tracegrade.models.config import EvalConfig
from tracegrade.models.dataset import EvalCase, EvalSet
from tracegrade.models.results import EvalReport
from tracegrade.testing.assertions import assert_pass_rate
from tracegrade.testing.cases import case_origin
from tracegrade.testing.recording import active_recorder

__all__ = ["EVAL_FILE_CANDIDATES", "eval_test", "planned_cases", "run_eval", "run_eval_sync"]

#: where ``eval_test`` looks for ``<name>.evalset.json`` (name = the test function's name without ``test_``)
EVAL_FILE_CANDIDATES = ("tests/fixtures/{}.evalset.json", "tests/eval/{}.evalset.json", "eval/{}.evalset.json")

EvalTarget = EvalSet | EvalCase | Sequence[EvalCase] | str | Path

# the attribute of an ``eval_test`` wrapper holding how to count its cases (for a session stopped before it ran)
_CASE_COUNT = "_tracegrade_case_count"


def _as_eval_set(target: EvalTarget) -> EvalSet | str | Path:
    if isinstance(target, EvalCase):
        eval_set_id, name = case_origin(target) or (target.eval_id, target.name)
        return EvalSet(eval_set_id=eval_set_id, name=name, eval_cases=[target])
    if isinstance(target, (EvalSet, str, Path)):
        return target
    cases = list(target)
    return EvalSet(eval_set_id=cases[0].eval_id if len(cases) == 1 else "cases", eval_cases=cases)


def _quiet(config: EvalConfig | None) -> EvalConfig:
    """The run's config without reporters (the plugin reports), with the session's ``--tracegrade-num-runs``."""
    config = config or EvalConfig.default()
    update: dict[str, Any] = {"reporter": config.reporter.model_copy(update={"enabled": False})}
    recorder = active_recorder()
    if recorder is not None and recorder.num_runs is not None:
        update["num_runs"] = recorder.num_runs
    return config.model_copy(update=update)


async def run_eval(
    agent: Any,
    collector: Any = None,
    eval_set: EvalTarget | None = None,
    config: EvalConfig | None = None,
    verbose: bool = False,
    *,
    extra_criteria: Sequence[BaseCriterion] = (),
) -> EvalReport:
    """Evaluate ``agent`` (an app from ``create_eval_app``/``tracegrade_app`` and its collector, or any agent
    ``AgentEvaluator`` takes) on an eval set, a file, one case or a list of cases; returns the report.

    ``config`` defaults to ``EvalConfig.default()``; its reporters are switched off (the plugin reports). Stopped
    by Ctrl-C, the cases that finished still go to the session's report (marked incomplete, as the session is).
    """
    from tracegrade.evaluation.evaluator import AgentEvaluator, interruption_of

    if eval_set is None:
        raise TypeError("run_eval needs the eval set (an EvalSet, a file path, an EvalCase or a list of cases)")
    evaluator = AgentEvaluator(agent, collector, config=_quiet(config), extra_criteria=extra_criteria)
    recorder = active_recorder()
    try:
        report = await evaluator.evaluate(_as_eval_set(eval_set), verbose=verbose)
    except (asyncio.CancelledError, KeyboardInterrupt) as exc:
        # stopped (Ctrl-C): the cases that finished are the session's too, in the report it writes as incomplete
        stopped = interruption_of(exc)
        if recorder is not None and stopped is not None:
            recorder.record(cast(EvalReport, stopped.report))  # RunInterrupted types it loosely (errors.py)
        raise
    if recorder is not None:
        recorder.record(report)
    return report


def run_eval_sync(
    agent: Any,
    collector: Any = None,
    eval_set: EvalTarget | None = None,
    config: EvalConfig | None = None,
    verbose: bool = False,
    *,
    extra_criteria: Sequence[BaseCriterion] = (),
) -> EvalReport:
    """:func:`run_eval` for a plain (non-async) test; not usable inside a running event loop (EventLoopError).

    Stopped by Ctrl-C, it raises :class:`~tracegrade.errors.RunInterrupted` (a ``KeyboardInterrupt``) carrying
    the cases that finished, as ``evaluate_sync`` does.
    """
    from tracegrade.evaluation.evaluator import run_blocking

    return run_blocking(
        run_eval(agent, collector, eval_set, config, verbose, extra_criteria=extra_criteria), "run_eval"
    )


def _find_eval_file(eval_file: str | Path | None, test: Callable[..., Any]) -> Path:
    import pytest

    here = Path(inspect.getfile(test)).resolve().parent
    if eval_file is not None:
        names = [Path(eval_file)]
    else:
        stem = test.__name__.removeprefix("test_")
        names = [Path(pattern.format(stem)) for pattern in EVAL_FILE_CANDIDATES]
    tried = []
    for name in names:
        for candidate in [name] if name.is_absolute() else [here / name, Path.cwd() / name]:
            tried.append(str(candidate))
            if candidate.is_file():
                return candidate
    pytest.fail(f"Eval file not found: tried {', '.join(dict.fromkeys(tried))}", pytrace=False)  # once each


def _agent_of(returned: Any) -> tuple[Any, Any]:
    import pytest

    if returned is None:
        pytest.skip("the test returned no agent")
    if isinstance(returned, tuple):
        if len(returned) != 2:
            pytest.fail(f"an eval_test must return (app, collector) or an agent, got a {len(returned)}-tuple")
        return returned
    return returned, None


def _check_eval_test(report: EvalReport, threshold: float) -> None:
    """The verdict of an ``eval_test``, as the session report and ``tracegrade run`` give it for cases marked
    ``metadata.xfail`` (pytest's strict xfail): a marked case that passed fails the test; the unmarked cases must
    reach ``threshold``; then a marked case that failed as expected makes the test XFAIL rather than fail."""
    import pytest

    from tracegrade.models.expectations import XFAILED, XPASSED, case_expectation, xfail_reason
    from tracegrade.reporters.text import clean_text  # ids and reasons from the eval set, shown on the terminal

    marked = [(r, case_expectation(r)) for r in report.results]
    xpassed = [r for r, expectation in marked if expectation == XPASSED]
    if xpassed:
        lines = [f"  {r.eval_id}: {xfail_reason(r.metadata) or 'marked xfail'}" for r in xpassed]
        pytest.fail(
            f"[XPASS(strict)] {len(xpassed)} case(s) marked metadata.xfail passed; remove the mark if they are "
            "fixed:\n" + clean_text("\n".join(lines)),
            pytrace=False,
        )
    unmarked = [r for r, expectation in marked if expectation is None]
    if unmarked or not marked:  # an empty report fails as assert_eval_passed fails it
        try:
            assert_pass_rate(unmarked, threshold)
        except AssertionError as exc:  # the explanation once, not chained to the AssertionError that said it
            raise pytest.fail.Exception(str(exc), pytrace=False) from None
    xfailed = [r for r, expectation in marked if expectation == XFAILED]
    if xfailed:
        pytest.xfail(
            clean_text("; ".join(f"{r.eval_id}: {xfail_reason(r.metadata) or 'marked xfail'}" for r in xfailed))
        )


def planned_cases(test: Any) -> int:
    """How many cases the ``eval_test`` ``test`` grades (the cases of its eval file); 0 for any other test, or
    when its file cannot be found or read (running the test would say why)."""
    import pytest

    count = getattr(test, _CASE_COUNT, None)
    if count is None:
        return 0
    try:
        return int(count())
    except (Exception, pytest.fail.Exception):  # a file not found fails through pytest.fail: the count is unknown
        return 0


def eval_test(
    eval_file: str | Path | None = None, config: EvalConfig | None = None, threshold: float = 1.0
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorate a test (sync or async) that returns ``(app, collector)`` or an agent: the agent is evaluated on
    ``eval_file`` (else the first of :data:`EVAL_FILE_CANDIDATES` that exists, next to the test file or in the
    working directory) and the test fails, with every failed case explained, when fewer than ``threshold``
    of the cases pass; like :func:`run_eval`, it prints nothing on its own. Returning None skips the test.

    Cases marked ``metadata.xfail`` count as pytest's strict xfail, as in the session report: left out of the
    threshold, one that failed makes the test XFAIL (once the other cases pass), one that passed fails it.
    """

    def decorate(test: Callable[..., Any]) -> Callable[..., Any]:
        def count() -> int:
            return len(EvalSet.from_file(_find_eval_file(eval_file, test)).eval_cases)

        wrapper: Callable[..., Any]
        if inspect.iscoroutinefunction(test):

            @functools.wraps(test)
            async def run_async(*args: Any, **kwargs: Any) -> None:
                agent, collector = _agent_of(await test(*args, **kwargs))
                path = _find_eval_file(eval_file, test)
                _check_eval_test(await run_eval(agent, collector, path, config), threshold)

            wrapper = run_async
        else:

            @functools.wraps(test)
            def run(*args: Any, **kwargs: Any) -> None:
                agent, collector = _agent_of(test(*args, **kwargs))
                path = _find_eval_file(eval_file, test)
                _check_eval_test(run_eval_sync(agent, collector, path, config), threshold)

            wrapper = run
        setattr(wrapper, _CASE_COUNT, count)
        return wrapper

    return decorate
