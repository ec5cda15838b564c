"""``tracegrade run``: a live run from the command line — drive an agent through an eval set, grade each case
and write the reports (``AgentEvaluator``). Ctrl-C stops it cleanly: the cases that finished are reported,
marked incomplete, with one line saying so and exit code 130; SIGTERM (a CI runner cancelling the job) stops it
the same way, with exit code 143."""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, cast

import click

from tracegrade.cli.common import UsageProblem, friendly_errors, no_config_default, refuse_unreachable_judges
from tracegrade.cli.report_output import FORMATS, configured_formats, parse_formats, write_reports
from tracegrade.errors import RunInterrupted
from tracegrade.models.expectations import run_succeeded

if TYPE_CHECKING:
    from tracegrade.models.config import ReporterConfig
    from tracegrade.models.results import EvalReport

__all__ = ["command"]

EXIT_INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for a command stopped by Ctrl-C
EXIT_TERMINATED = 143  # 128 + SIGTERM


@click.command("run")
@click.argument("agent")
@click.option(
    "--evalset", "evalset_path", required=True, type=click.Path(dir_okay=False, path_type=Path), help="Eval set to run."
)
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="EvalConfig file (default: trajectory and rouge_match, no LLM judge).",
)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Report directory (default: the config's reporter.output_dir, eval_reports).",
)
@click.option(
    "--format",
    "formats",
    help="Comma-separated: " + ",".join(FORMATS) + " (default: those the config's reporter switches on, "
    "console,json,html without --config).",
)
@click.option("-v", "--verbose", is_flag=True, help="Print each case as it finishes; list every case in full.")
@friendly_errors
def command(
    agent: str,
    evalset_path: Path,
    config_path: Path | None,
    out_dir: Path | None,
    formats: str | None,
    verbose: bool,
) -> None:
    """Run AGENT through --evalset, grade each case and write the reports.

    AGENT is a .py file (run from anywhere: its directory is importable, as with `python agent.py`), a package
    directory (as `adk run` takes one: the package, else its agent.py) or a module name importable from the
    current directory, e.g. `my_pkg.agent`. It must define one of graph, compiled_graph, agent_graph, app, agent
    or root_agent (the first found is used): a LangGraph graph, a pydantic-ai Agent, a Google ADK or OpenAI
    Agents SDK agent, or a sync or async callable taking the user's message.

    A case whose metadata.xfail gives a reason is expected to fail, as pytest's strict xfail: reported XFAIL with
    the reason, it does not fail the run; reported XPASS when it passes, it does.

    Exit code 0 when every case passes (or fails as expected), 1 when one fails, 2 for bad input (a report that
    cannot be written included), 130 when stopped by Ctrl-C and 143 by SIGTERM (the finished cases are then
    reported, marked incomplete).
    """
    from tracegrade.evaluation.checks import checked_config, checked_eval_set
    from tracegrade.evaluation.evaluator import AgentEvaluator, interruption_of

    chosen = parse_formats(formats) if formats is not None else None
    # every input checked before the agent is loaded (importing it may be slow or have effects)
    eval_set = checked_eval_set(evalset_path)
    config = checked_config(config_path) if config_path else no_config_default()
    refuse_unreachable_judges(config)
    app, collector = _loaded(agent)
    reporter = config.reporter
    chosen = configured_formats(reporter) if chosen is None else chosen
    directory = out_dir if out_dir is not None else Path(reporter.output_dir)
    # the reports are written here rather than by the evaluator, which would only log a report it cannot write
    quiet = config.model_copy(update={"reporter": reporter.model_copy(update={"enabled": False})})
    with _sigterm_as_interrupt() as terminated:
        try:
            report = AgentEvaluator(app, collector, quiet).evaluate_sync(eval_set, verbose=verbose)
        except (RunInterrupted, asyncio.CancelledError) as exc:
            # a cancelled run (SIGTERM with SIGINT ignored: _cancel_run) carries its report on the cancellation
            stopped = interruption_of(exc)
            if stopped is None:
                raise
            partial = cast("EvalReport", stopped.report)  # RunInterrupted types it loosely: errors.py imports no model
            written, unwritten = _write(partial, reporter, directory, chosen, verbose, announce=False)
            click.echo(_stopped_line(stopped, written, unwritten, terminated=bool(terminated)), err=True)
            sys.exit(EXIT_TERMINATED if terminated else EXIT_INTERRUPTED)
    _, unwritten = _write(report, reporter, directory, chosen, verbose, announce=True)
    if unwritten:  # a report asked for is missing: a CI job would read an old file or none
        raise UsageProblem("the run was graded, but not every report asked for was written: " + "; ".join(unwritten))
    # a case marked metadata.xfail must fail (pytest's strict xfail): then it does not fail the run, a pass does
    sys.exit(0 if run_succeeded(report.results) else 1)


def _write(
    report: EvalReport, reporter: ReporterConfig, directory: Path, formats: list[str], verbose: bool, *, announce: bool
) -> tuple[list[str], list[str]]:
    """:func:`write_reports`, or nothing when no format is chosen. The report states the reporter settings of the
    config given, not those of the copy the evaluator ran with (reporting switched off there)."""
    report.config_used["reporter"] = reporter.model_dump(mode="json")
    if not formats:  # the config switches every report off and --format chose none
        return [], []
    return write_reports(report, reporter, directory, formats, verbose, announce=announce)


def _stopped_line(stopped: RunInterrupted, written: list[str], unwritten: list[str], *, terminated: bool) -> str:
    """One line: how far the run got when Ctrl-C (or SIGTERM) stopped it, where its partial report is, and what
    could not be written."""
    how = "terminated (SIGTERM)" if terminated else "interrupted"
    line = f"{how}: {stopped.finished} of {stopped.total} cases finished"
    if written:
        line += f"; partial report (marked incomplete): {', '.join(written)}"
    if unwritten:
        line += f"; not written: {'; '.join(unwritten)}"
    return line


def _loaded(agent: str) -> tuple[Any, Any]:
    """``(app, collector)`` for AGENT, or a UsageProblem saying what went wrong where (the file and line of a syntax
    error or of the line that raised while the module was imported) rather than a traceback and exit code 1."""
    from tracegrade.errors import TracegradeError
    from tracegrade.evaluation.agent_loading import load_agent
    from tracegrade.evaluation.evaluator import create_eval_app

    try:
        found = load_agent(agent)
    except TracegradeError:
        raise  # a missing file: friendly_errors words it
    except SyntaxError as exc:
        raise UsageProblem(
            f"cannot load the agent {agent!r}: syntax error at {exc.filename}:{exc.lineno}: {exc.msg}"
        ) from None
    except (ImportError, AttributeError) as exc:
        raise UsageProblem(f"cannot load the agent {agent!r}: {exc}{_import_hint(agent, exc)}") from None
    except Exception as exc:  # the agent module's own code failed while it was imported
        raise UsageProblem(
            f"cannot load the agent {agent!r}: importing it raised {type(exc).__name__}: {exc}{_raised_at(exc)}"
        ) from None
    try:
        return create_eval_app(found)
    except TypeError as exc:  # not an agent tracegrade can drive
        raise UsageProblem(f"cannot run the agent found in {agent!r}: {exc}") from None


def _import_hint(agent: str, exc: BaseException) -> str:
    if isinstance(exc, ModuleNotFoundError) and not agent.endswith(".py"):
        return " (AGENT is a .py file or a module importable from the current directory, or a package's directory)"
    return ""


def _raised_at(exc: BaseException) -> str:
    """`` (at FILE:LINE)`` of the innermost frame of the agent's own code that ``exc`` came through (not the
    library or importlib frame it ended in: see :func:`~tracegrade.evaluation.agent_errors.user_frame`)."""
    from tracegrade.evaluation.agent_errors import user_frame

    frame = user_frame(exc)
    return f" (at {frame.filename}:{frame.lineno})" if frame is not None else ""


def _cancel_run() -> None:
    """Stop the run on this thread's event loop as ``asyncio.run``'s Ctrl-C handler does: cancel its tasks and wake
    the loop, so that the run reports the cases it finished. ``asyncio.run`` installs that handler only over
    Python's own SIGINT handler, so with SIGINT ignored (a shell script's background job, ``tracegrade run … &``)
    SIGTERM has none to go through; a KeyboardInterrupt raised here instead would leave the loop with the run's
    task unfinished and its report lost. With no loop running (the run not started yet), it is a KeyboardInterrupt.
    """
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        raise KeyboardInterrupt from None
    for task in asyncio.all_tasks(loop):
        task.cancel()
    loop.call_soon_threadsafe(lambda: None)  # a loop waiting in select() would not see the cancellations


@contextmanager
def _sigterm_as_interrupt() -> Iterator[list[bool]]:
    """Within the block, SIGTERM stops the run as Ctrl-C does (the finished cases reported); the list it yields
    holds True once SIGTERM arrived. A CI runner cancelling a job sends SIGTERM: without this the process dies
    at once and the cases it finished are lost."""
    terminated: list[bool] = []

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        if terminated:
            # the run is already stopping and writing its partial report: a second SIGTERM (a runner or a user
            # repeating it) would break off that writing, as a second Ctrl-C forces asyncio.run's stop, and lose
            # the report the first one promised; SIGKILL stays the way to end the process at once
            return
        terminated.append(True)
        # through SIGINT's own handler (asyncio.run's, which cancels the run), so both signals take one path
        handler = signal.getsignal(signal.SIGINT)
        if callable(handler):
            handler(signal.SIGINT, frame)
        else:
            _cancel_run()

    try:
        previous = signal.signal(signal.SIGTERM, on_sigterm)
    except ValueError:  # not the main thread: SIGTERM keeps its handler
        yield terminated
        return
    try:
        yield terminated
    finally:
        signal.signal(signal.SIGTERM, previous)
