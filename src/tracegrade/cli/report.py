"""``tracegrade report REPORT.json``: re-render a saved evaluation report as html, junit, console or json."""

from __future__ import annotations

from pathlib import Path
from typing import TextIO

import click

from tracegrade.cli.common import UsageProblem, friendly_errors
from tracegrade.models.results import EvalReport
from tracegrade.reporters import ConsoleReporter, HTMLReporter, JSONReporter, JUnitXMLReporter
from tracegrade.reporters.base import FileReporter, write_text_file

__all__ = ["command"]

FORMATS = ("console", "html", "junit", "json")


def _console_reporter(stream: TextIO | None, *, use_color: bool, verbose: bool) -> ConsoleReporter:
    """Verbose re-rendering shows everything the saved report holds, response and trajectory included."""
    return ConsoleReporter(
        use_color=use_color, verbose=verbose, output=stream, include_actual_response=verbose, include_trajectory=verbose
    )


def _file_reporter(fmt: str, suite_name: str) -> FileReporter:
    if fmt == "html":
        return HTMLReporter()
    if fmt == "junit":
        return JUnitXMLReporter(suite_name=suite_name)
    return JSONReporter()


@click.command("report")
@click.argument("report_file", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "-f",
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default="console",
    show_default=True,
    help="Output format.",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write to this file instead of standard output (parent directories are created).",
)
@click.option("-v", "--verbose", is_flag=True, help="Console: show every case in full, with tokens and details.")
@click.option("--no-color", is_flag=True, help="Console: plain text even on a colour terminal.")
@click.option("--suite-name", default="agent-evaluation", show_default=True, help="JUnit: the test suite name.")
@friendly_errors
def command(report_file: Path, fmt: str, output: Path | None, verbose: bool, no_color: bool, suite_name: str) -> None:
    """Re-render a saved report (REPORT_FILE, as written by the JSON reporter or EvalReport.to_file).

    \b
    Examples:
      tracegrade report eval_reports/capitals.json
      tracegrade report eval_reports/capitals.json -f html -o report.html
      tracegrade report eval_reports/capitals.json -f junit > junit.xml
    """
    report = EvalReport.from_file(report_file)
    try:
        _render(report, fmt, output, verbose=verbose, no_color=no_color, suite_name=suite_name)
    except OSError as exc:
        raise UsageProblem(f"cannot write {output}: {exc.strerror or exc}") from None


def _render(
    report: EvalReport, fmt: str, output: Path | None, *, verbose: bool, no_color: bool, suite_name: str
) -> None:
    if fmt == "console":
        if output is None:
            _console_reporter(None, use_color=not no_color, verbose=verbose).report(report)
            return
        output.parent.mkdir(parents=True, exist_ok=True)
        with output.open("w", encoding="utf-8") as fh:
            _console_reporter(fh, use_color=False, verbose=verbose).report(report)
        click.echo(f"wrote {output.absolute()}", err=True)
        return
    text = _file_reporter(fmt, suite_name).render(report)
    if output is None:
        click.get_binary_stream("stdout").write(text.encode("utf-8"))
        return
    click.echo(f"wrote {write_text_file(output, text)}", err=True)
