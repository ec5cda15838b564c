"""Console report rendered with rich: header, warnings banner, summary, criteria and case tables, details.

Colour is only a bonus: every status also has a word (PASS/FAIL/ERROR/SKIPPED) and an icon, and with
``use_color=False`` (or a non-terminal stream, or ``NO_COLOR``) the output is plain text without any
escape codes. Untrusted text is never parsed as rich markup and its control characters are made visible.
"""

from __future__ import annotations

import errno
import sys
import time
from pathlib import Path
from typing import Any, TextIO

from rich import box
from rich.console import Console, Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from tracegrade.models.results import CriterionResult, EvalCaseResult, EvalReport
from tracegrade.reporters.base import BaseReporter
from tracegrade.reporters.case_view import (
    STATUS_ICONS,
    STATUS_LABELS,
    case_display_name,
    case_outcome,
    case_score,
    case_warnings,
    criterion_status,
    criterion_warnings,
    expectation_counts,
    expectation_note,
    message_views,
    node_visit_names,
    partial_item_text,
    run_status,
    run_trials_text,
    run_warnings,
    samples_text,
    skipped_case_count,
    split_details,
    step_views,
    tool_call_views,
    trials_text,
    turn_views,
)
from tracegrade.reporters.text import (
    clean_text,
    format_cost,
    format_duration,
    format_score,
    format_timestamp,
    format_usage,
    shorten,
    to_json_text,
)
from tracegrade.standard_output import stdout_to_devnull

__all__ = ["ConsoleReporter", "print_report"]

STATUS_STYLES = {
    "pass": "green",
    "fail": "red",
    "error": "bold red",
    "skipped": "dim",
    "xfail": "yellow",
    "xpass": "bold red",
}
RUN_STATUS_STYLES = {
    "ALL PASSED": "bold white on green",
    "ALL FAILED": "bold white on red",
    "PARTIAL": "bold black on yellow",
    "NO CASES": "bold black on white",
}
VALUE_LIMIT = 300  # characters per value in the default view
VERBOSE_VALUE_LIMIT = 2000  # characters per value with verbose=True
NAME_LIMIT = 200  # characters of a name or id in a heading
NON_TERMINAL_WIDTH = 120  # columns used when writing to a file or pipe


class _EncodingSafeStream:
    """Wraps a text stream so characters its encoding cannot hold are replaced instead of raising."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.encoding = getattr(stream, "encoding", None) or "utf-8"

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except UnicodeEncodeError:
            return self._stream.write(text.encode(self.encoding, "replace").decode(self.encoding))

    def flush(self) -> None:
        self._stream.flush()

    def isatty(self) -> bool:
        isatty = getattr(self._stream, "isatty", None)
        return bool(isatty and isatty())


class _PipeAwareConsole(Console):
    """A rich Console that raises BrokenPipeError when its reader goes away (``grade … | head``) instead of
    rich's default, ``SystemExit(1)``, which would end the run before its report files are written and the run
    is recorded."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        raise BrokenPipeError(errno.EPIPE, "the reader of the console report closed the pipe")


def _status_text(status: str) -> Text:
    return Text(f"{STATUS_ICONS[status]} {STATUS_LABELS[status]}", style=STATUS_STYLES[status])


def _skipped_note(report: EvalReport) -> str:
    skipped = skipped_case_count(report)
    return f", {skipped} of them with every criterion skipped" if skipped else ""


def _expectation_rows(report: EvalReport) -> list[tuple[str, str]]:
    """Summary rows for the cases marked ``metadata.xfail`` (none when no case is): they are counted among the
    failed (or passed) cases, but only an unexpected pass fails the run."""
    xfailed, xpassed = expectation_counts(report)
    if not xfailed and not xpassed:
        return []
    return [
        ("Expected failures", f"{xfailed} (marked xfail, failed as expected: not a failure of the run)"),
        ("Unexpected passes", f"{xpassed}" + (" (marked xfail but passed: a failure of the run)" if xpassed else "")),
    ]


def _name(text: str) -> str:
    """A run's or a case's name or id for a heading: made safe and cut, since a name taken from a model's output
    may be a page long (the JSON report keeps it whole)."""
    return shorten(clean_text(text), NAME_LIMIT)


def _rate_icon(rate: float) -> str:
    return "✓" if rate >= 0.9 else "○" if rate >= 0.5 else "✗"


class ConsoleReporter(BaseReporter):
    """Prints a report to a terminal (or any text stream)."""

    def __init__(
        self,
        use_color: bool = True,
        verbose: bool = False,
        output: TextIO | None = None,
        include_trajectory: bool = False,
        include_actual_response: bool = False,
    ) -> None:
        self.use_color = use_color
        self.verbose = verbose
        self.output = output
        self.include_trajectory = include_trajectory
        self.include_actual_response = include_actual_response
        self._limit = VERBOSE_VALUE_LIMIT if verbose else VALUE_LIMIT

    def generate(self, report: EvalReport, output_dir: str | Path | None = None) -> None:
        """Print the report (``output_dir`` is ignored: the console has no file)."""
        self.report(report)

    def report(self, report: EvalReport) -> None:
        """Print the report; a reader that stops reading (a closed pipe) ends the printing, not the caller."""
        console = self._console()
        try:
            for renderable in self.renderables(report):
                console.print(renderable)
        except BrokenPipeError:
            if self.output is None:
                stdout_to_devnull()

    def _console(self) -> Console:
        stream = _EncodingSafeStream(self.output if self.output is not None else sys.stdout)
        return _PipeAwareConsole(
            file=stream,  # type: ignore[arg-type]
            color_system="auto" if self.use_color else None,
            no_color=None if self.use_color else True,
            width=None if stream.isatty() else NON_TERMINAL_WIDTH,
            highlight=False,
            emoji=False,
            soft_wrap=False,
        )

    def _value(self, value: Any) -> str:
        return shorten(clean_text(value if isinstance(value, str) else to_json_text(value)), self._limit)

    # --- sections ---------------------------------------------------------------------------------

    def renderables(self, report: EvalReport) -> list[RenderableType]:
        """Everything :meth:`report` prints, in order."""
        parts: list[RenderableType] = [self._header(report)]
        warnings = run_warnings(report)
        if warnings:
            parts.append(self._warnings_banner(warnings))
        parts.append(self._summary(report))
        if report.summary.criterion_stats:
            parts += [Text(), self._criteria_table(report)]
        if report.results:
            # A clean pass says nothing the summary does not: only verbose lists them (large runs stay readable).
            shown = [r for r in report.results if self.verbose or case_outcome(r) != "pass" or case_warnings(r)]
            if shown:
                parts += [Text(), self._cases_table(shown)]
            hidden = len(report.results) - len(shown)
            if hidden:
                parts.append(
                    Text(
                        f"{hidden:,} passing case{'s' if hidden != 1 else ''} not listed (verbose lists every case)",
                        style="dim",
                    )
                )
            parts += [self._case_details(r) for r in shown]
        parts.append(Text(f"Report generated: {format_timestamp(time.time())}", style="dim"))
        return parts

    @staticmethod
    def _header(report: EvalReport) -> Panel:
        title = Text("Evaluation Report: ", style="bold")
        title.append(_name(report.display_name), style="bold cyan")
        sub = Text(f"eval set {_name(report.eval_set_id)} · run at {format_timestamp(report.timestamp)}", style="dim")
        return Panel(Group(title, sub), box=box.DOUBLE, expand=False)

    @staticmethod
    def _warnings_banner(warnings: list[str]) -> Panel:
        body = Text()
        for i, warning in enumerate(warnings):
            body.append(("\n" if i else "") + "⚠ " + clean_text(warning), style="bold yellow")
        return Panel(
            body, title=f"⚠ WARNINGS ({len(warnings)})", title_align="left", border_style="bold red", box=box.HEAVY
        )

    def _summary(self, report: EvalReport) -> Group:
        s = report.summary
        status = run_status(report)
        heading = Text("Summary: ", style="bold")
        heading.append(f" {status} ", style=RUN_STATUS_STYLES[status])
        grid = Table.grid(padding=(0, 2))
        grid.add_column(style="bold")
        grid.add_column()
        rows = [
            ("Total cases", f"{s.total_cases}"),
            ("Passed", f"{s.passed_cases} ({s.pass_rate * 100:.1f}%){_skipped_note(report)}"),
            ("Failed", f"{s.failed_cases}"),
            ("Errors", f"{s.error_cases}"),
            *_expectation_rows(report),
            *([("Trials", run_trials_text(report))] if run_trials_text(report) else []),
            (
                "Duration",
                f"{format_duration(s.total_duration_seconds)} (avg {format_duration(s.avg_duration_seconds)})",
            ),
        ]
        if not s.agent_token_usage.is_zero():
            rows.append(("Agent tokens", format_usage(s.agent_token_usage)))
        if not s.judge_token_usage.is_zero():
            rows.append(("Judge tokens", format_usage(s.judge_token_usage)))
            rows.append(("Judge cost", format_cost(s.judge_token_usage.cost_usd)))
        for label, value in rows:
            grid.add_row(label, value)
        return Group(Text(), heading, grid)

    def _criteria_table(self, report: EvalReport) -> Table:
        table = Table(title="Criteria", title_justify="left", box=box.SIMPLE_HEAVY, title_style="bold")
        for name in ("Criterion", "Passed", "Failed", "Skipped", "Errors", "Pass rate", "Avg score"):
            table.add_column(name, justify="left" if name == "Criterion" else "right")
        if self.verbose:
            table.add_column("Judge tokens", justify="right")
            table.add_column("Judge cost", justify="right")
        for name, st in report.summary.criterion_stats.items():
            rate = Text(
                f"{_rate_icon(st.pass_rate)} {st.pass_rate * 100:.1f}%",
                style="green" if st.pass_rate >= 0.9 else "yellow" if st.pass_rate >= 0.5 else "red",
            )
            row: list[Any] = [
                Text(clean_text(name)),
                f"{st.passed}/{st.total}",
                str(st.failed),
                str(st.skipped),
                str(st.errors),
                rate,
                format_score(st.avg_score),
            ]
            if self.verbose:
                row += [f"{st.token_usage.total_tokens:,}", format_cost(st.token_usage.cost_usd)]
            table.add_row(*row)
        return table

    def _cases_table(self, results: list[EvalCaseResult]) -> Table:
        table = Table(title="Cases", title_justify="left", box=box.SIMPLE_HEAVY, title_style="bold")
        table.add_column("Status", no_wrap=True)
        table.add_column("Case", overflow="fold")
        table.add_column("Score", justify="right")
        table.add_column("Duration", justify="right")
        if self.verbose:
            table.add_column("Tokens", justify="right")
        table.add_column("Notes", overflow="fold")
        for result in results:
            row: list[Any] = [
                _status_text(case_outcome(result)),
                Text(shorten(clean_text(case_display_name(result)), 80)),
                format_score(case_score(result)),
                format_duration(result.duration_seconds),
            ]
            if self.verbose:
                row.append(f"{result.token_usage.total_tokens:,}")
            row.append(self._case_notes(result))
            table.add_row(*row)
        return table

    @staticmethod
    def _case_notes(result: EvalCaseResult) -> Text:
        notes: list[str] = [note] if (note := expectation_note(result)) else []
        if result.error is not None:
            notes.append(f"error: {shorten(clean_text(result.error).splitlines()[0] if result.error else '', 80)}")
        failed = [c.criterion for c in result.failed_criteria]
        if failed:
            notes.append("failed: " + ", ".join(failed))
        skipped = sum(1 for c in result.criterion_results if c.skipped)
        if skipped:
            notes.append(f"{skipped} skipped")
        warnings = case_warnings(result)
        if warnings:
            notes.append(f"⚠ {len(warnings)} warning{'s' if len(warnings) != 1 else ''}")
        return Text(clean_text("; ".join(notes)), style="yellow" if warnings else "")

    # --- one case ---------------------------------------------------------------------------------

    def _case_details(self, result: EvalCaseResult) -> Group:
        status = case_outcome(result)
        head = _status_text(status)
        head.append("  " + _name(case_display_name(result)), style="bold")
        if result.name:
            head.append(f"  ({_name(result.eval_id)})", style="dim")
        head.append(f"  score {format_score(case_score(result))} · {format_duration(result.duration_seconds)}")
        body = Text()
        note = expectation_note(result)
        if note is not None:
            self._line(body, "XFAIL: " if status == "xfail" else "XPASS: ", note, style=STATUS_STYLES[status])
        if result.error is not None:
            self._line(body, "Error: ", result.error, style="red")
            if self.verbose and result.error_traceback:  # the error line names the user's frame; -v shows the rest
                body.append(clean_text(result.error_traceback).rstrip() + "\n", style="red")
        for warning in case_warnings(result):
            self._line(body, "⚠ WARNING: ", warning, style="bold yellow")
        if result.criterion_results:
            body.append("Criteria:\n", style="bold")
            for c in result.criterion_results:
                self._criterion(body, c)
        if self.include_actual_response:
            self._line(body, "Response: ", result.actual_response or "(empty)")
        if self.verbose:
            self._tool_calls(body, result)
        if self.include_trajectory:
            self._trajectory(body, result)
        if self.verbose:
            self._verbose_extras(body, result)
        body.rstrip()
        return Group(Text(), head, Panel(body, box=box.ROUNDED, border_style=STATUS_STYLES[status]))

    def _line(self, body: Text, label: str, value: Any, style: str = "", indent: int = 0) -> None:
        pad = " " * indent
        text = self._value(value).replace("\n", "\n" + pad + " " * len(label))
        body.append(pad + label, style=style or "bold")
        body.append(text + "\n", style=style)

    def _criterion(self, body: Text, c: CriterionResult) -> None:
        status = criterion_status(c)
        line = Text(f"  {STATUS_ICONS[status]} {STATUS_LABELS[status]:<7} ", style=STATUS_STYLES[status])
        line.append(clean_text(c.criterion), style="bold")
        if status != "skipped":
            line.append(f": {format_score(c.score)} (threshold: {c.threshold})")
            if c.trial_stats is not None:
                line.append(f" - {trials_text(c.trial_stats)}", style="yellow" if c.trial_stats.flaky else "")
            spread = samples_text(c)
            if spread:
                line.append(f" - {clean_text(spread)}", style="yellow" if spread.endswith("split on pass/fail") else "")
        body.append_text(line)
        body.append("\n")
        if c.error is not None:
            self._line(body, "Error: ", c.error, style="red", indent=6)
        reason, partial, rest = split_details(c.details)
        if reason:
            self._line(body, "Reason: ", reason, indent=6)
        for warning in criterion_warnings(c):
            self._line(body, "⚠ ", warning, style="bold yellow", indent=6)
        if status in ("fail", "error") or self.verbose:
            for key, items in partial.items():
                self._line(body, f"{key.capitalize()} ({len(items)}):", "", indent=6)
                for item in items:
                    self._line(body, "- ", partial_item_text(item), indent=8)
            if self.verbose:
                for key, value in rest.items():
                    self._line(body, f"{clean_text(key)}: ", value, indent=6)
        if self.verbose and not c.token_usage.is_zero():
            self._line(body, "Judge: ", format_usage(c.token_usage), indent=6)

    def _tool_calls(self, body: Text, result: EvalCaseResult) -> None:
        calls = tool_call_views(result.actual_tool_calls)
        if not calls:
            return
        body.append(f"Tool calls ({len(calls)}):\n", style="bold")
        for call in calls:
            self._line(body, clean_text(call.name), f"({call.args_text})", indent=2)
            if call.error:
                self._line(body, "error: ", call.error, style="red", indent=6)
            elif not call.result_captured:
                self._line(body, "-> ", "(result not captured)", indent=6)
            elif call.result is not None:
                self._line(body, "-> ", call.result, indent=6)

    def _trajectory(self, body: Text, result: EvalCaseResult) -> None:
        steps = step_views(result.actual_trajectory)
        if not steps:
            return
        body.append(f"Trajectory ({len(steps)} steps):\n", style="bold")
        for i, step in enumerate(steps, 1):
            detail = f" {to_json_text(step.args)}" if step.args else ""
            self._line(body, f"{i:>3}. [{step.kind.upper()}] ", f"{step.name}{detail}", indent=2)

    def _verbose_extras(self, body: Text, result: EvalCaseResult) -> None:
        visits = node_visit_names(result.node_visits)
        if visits:
            self._line(body, "Node visits: ", " → ".join(visits))
        turns = turn_views(result.turn_results)
        if turns:
            body.append(f"Turns ({len(turns)}):\n", style="bold")
            for t in turns:
                self._line(body, f"Turn {t.index} user: ", t.user, indent=2)
                self._line(body, f"Turn {t.index} agent: ", t.agent, indent=2)
        messages = message_views(result.messages)
        if messages:
            body.append(f"Messages ({len(messages)}):\n", style="bold")
            for role, text in messages:
                self._line(body, f"[{clean_text(role) or '?'}] ", text, indent=2)
        if not result.token_usage.is_zero():
            self._line(
                body,
                "Tokens: ",
                f"agent {format_usage(result.agent_token_usage)}; total {format_usage(result.token_usage)}",
            )


def print_report(report: EvalReport, verbose: bool = False, use_color: bool = True) -> None:
    """Print ``report`` to stdout (colour only when the terminal supports it)."""
    ConsoleReporter(use_color=use_color, verbose=verbose).report(report)
