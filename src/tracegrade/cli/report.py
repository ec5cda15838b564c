"""``tracegrade report REPORT.json``: re-render a saved evaluation report as html, junit, console or json."""

from __future__ import annotations

import io
import sys
from pathlib import Path
from typing import TextIO

import click
from pydantic import ValidationError

from tracegrade.cli.common import friendly_errors
from tracegrade.cli.file_kinds import KIND_NAMES, document_kind, file_kind
from tracegrade.errors import FileFormatError
from tracegrade.models.config import ReporterConfig
from tracegrade.models.files import read_json_file, validation_problems
from tracegrade.models.results import EvalReport
from tracegrade.output_files import write_text_file
from tracegrade.reporters import ConsoleReporter, JUnitXMLReporter
from tracegrade.reporters.base import FileReporter
from tracegrade.reporters.manager import FILE_REPORTERS

__all__ = ["command"]

FORMATS = ("console", *FILE_REPORTERS)
_KIND = "report"
# what to do instead with a file that is not a report, by its kind
_INSTEAD = {
    "evalset": "grade it with `tracegrade grade --evalset FILE` (or check it with `tracegrade validate`)",
    "config": "pass it to `tracegrade grade --config FILE` (or check it with `tracegrade validate`)",
    "otlp-traces": "load it with `tracegrade import FILE`",
    "otlp-logs": "load it with `tracegrade import FILE`",
    "otlp-json-lines": "load it with `tracegrade import FILE`",
    "binary": "`tracegrade import FILE` loads OTLP protobuf files",
}


def load_report(path: Path) -> EvalReport:
    """The saved report at ``path``; any other kind of file is refused, naming what it looks like instead."""
    try:
        data = read_json_file(path, _KIND, strict=False)
    except FileFormatError:
        kind = file_kind(path)
        if kind is None or (kind == "binary" and _starts_like_json(path)):
            raise  # the reader's own words: a JSON file with bytes that are not UTF-8 says at which byte
        raise _not_a_report(path, kind) from None
    kind = document_kind(data)
    if kind != "report":
        if kind is None:
            keys = sorted(data)[:8] if isinstance(data, dict) else type(data).__name__
            raise FileFormatError(
                str(path),
                [("$", f"not a tracegrade report: it has none of a report's keys (results, summary); found {keys}")],
                _KIND,
            )
        raise _not_a_report(path, kind)
    try:
        return EvalReport.model_validate(data)  # one without a summary gets its results' (see EvalReport)
    except ValidationError as exc:
        raise FileFormatError(str(path), validation_problems(exc), _KIND) from None


def _starts_like_json(path: Path) -> bool:
    """Whether the file opens as a JSON object or array does (after white space): a report with a stray byte
    that is not UTF-8 is still a report to fix, not "binary data"."""
    try:
        with path.open("rb") as handle:
            head = handle.read(4096).lstrip(b" \t\r\n\xef\xbb\xbf")  # a UTF-8 byte order mark too
    except OSError:
        return False
    return head[:1] in (b"{", b"[")


def _not_a_report(path: Path, kind: str) -> FileFormatError:
    instead = _INSTEAD.get(kind)
    hint = f"; {instead}" if instead else ""
    return FileFormatError(
        str(path), [("$", f"not a tracegrade report: it looks like {KIND_NAMES[kind]}{hint}")], _KIND
    )


def _console_reporter(stream: TextIO | None, *, use_color: bool, verbose: bool) -> ConsoleReporter:
    """Verbose re-rendering shows everything the saved report holds, response and trajectory included."""
    return ConsoleReporter(
        use_color=use_color, verbose=verbose, output=stream, include_actual_response=verbose, include_trajectory=verbose
    )


def _file_reporter(fmt: str, suite_name: str) -> FileReporter:
    reporter = FILE_REPORTERS[fmt].build(ReporterConfig())
    if isinstance(reporter, JUnitXMLReporter):
        reporter.suite_name = suite_name
    return reporter


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
    help="Write to this file instead of standard output (parent directories are created; never REPORT_FILE "
    "itself, nor a directory, FIFO or device).",
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
    report = load_report(report_file)
    if fmt == "console":
        if output is None:
            _console_reporter(None, use_color=not no_color, verbose=verbose).report(report)
            return
        buffer = io.StringIO()
        _console_reporter(buffer, use_color=False, verbose=verbose).report(report)
        click.echo(f"wrote {write_text_file(output, buffer.getvalue(), inputs=[report_file])}", err=True)
        return
    # written as it is rendered, never the whole document in memory at once (a page of 10,000 cases)
    reporter = _file_reporter(fmt, suite_name)
    if output is None:
        sys.stdout.flush()  # what was printed before stays before
        reporter.write_to(report, sys.stdout.buffer)  # bytes as rendered: no newline translation
        return
    click.echo(f"wrote {reporter.save(report, output, inputs=[report_file])}", err=True)
