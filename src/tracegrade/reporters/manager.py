"""Runs the reporters a :class:`ReporterConfig` enables; one failing reporter never stops the others.

``FILE_REPORTERS`` names each file reporter (the names ``--format`` accepts): the file it writes, the
``ReporterConfig`` switch that enables it, and how it is built from the config. A new file reporter is one
entry there.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from tracegrade.errors import OutputFileError, TracegradeError
from tracegrade.models.config import ReporterConfig
from tracegrade.models.results import EvalReport
from tracegrade.output_files import special_file_kind
from tracegrade.reporters.base import FileReporter
from tracegrade.reporters.console import ConsoleReporter
from tracegrade.reporters.html import HTMLReporter
from tracegrade.reporters.json_reporter import JSONReporter
from tracegrade.reporters.junit import JUnitXMLReporter

__all__ = ["FILE_REPORTERS", "FileReporterEntry", "ReporterManager", "ReporterOutput", "report_file_stem"]

MAX_STEM_LENGTH = 100
# Linux file systems take file names of up to 255 bytes; the longest report name, ``<stem>_YYYYmmdd_HHMMSS_junit.xml``,
# adds 26 to the stem and the writer's temporary file beside it 14 more: a stem of 200 bytes leaves room.
MAX_STEM_BYTES = 200


def _detail_options(c: ReporterConfig) -> dict[str, bool]:
    """What the JSON and HTML reports include, from the config."""
    return {
        "include_details": c.include_details,
        "include_trajectory": c.include_trajectory,
        "include_node_responses": c.include_node_responses,
        "include_actual_response": c.include_actual_response,
        "include_tool_call_details": c.include_tool_call_details,
    }


@dataclass(frozen=True)
class FileReporterEntry:
    """A file reporter: the suffix of ``<stem><suffix>``, the ``ReporterConfig`` field that enables it, and
    how it is built from the config."""

    suffix: str
    switch: str
    build: Callable[[ReporterConfig], FileReporter]


# in the order the manager writes them
FILE_REPORTERS: dict[str, FileReporterEntry] = {
    "json": FileReporterEntry(".json", "json_report", lambda c: JSONReporter(**_detail_options(c))),
    "html": FileReporterEntry(".html", "html", lambda c: HTMLReporter(**_detail_options(c))),
    "junit": FileReporterEntry("_junit.xml", "junit_xml", lambda c: JUnitXMLReporter()),
}


@dataclass
class ReporterOutput:
    """What :meth:`ReporterManager.run_all` produced: the files written (by reporter name, in the order
    written), whether it printed, and failures."""

    files: dict[str, str] = field(default_factory=dict)
    console_output: bool = False
    errors: list[tuple[str, str]] = field(default_factory=list)  # (reporter or "directory", message)

    @property
    def has_errors(self) -> bool:
        return bool(self.errors)

    @property
    def generated_files(self) -> list[str]:
        return list(self.files.values())

    @property
    def json_path(self) -> str | None:
        return self.files.get("json")

    @property
    def html_path(self) -> str | None:
        return self.files.get("html")

    @property
    def junit_path(self) -> str | None:
        return self.files.get("junit")


def report_file_stem(report: EvalReport, timestamp_files: bool = True) -> str:
    """``<eval_set_id>`` with every character other than letters, digits, ``-`` and ``_`` made ``_``
    (``eval`` when empty), cut to 100 characters and 200 bytes of UTF-8 (a name of 100 CJK characters would
    be 300, too long for a file name), plus ``_YYYYmmdd_HHMMSS`` (local time of the report) when asked."""
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in report.eval_set_id)[:MAX_STEM_LENGTH]
    safe = safe.encode("utf-8")[:MAX_STEM_BYTES].decode("utf-8", "ignore")  # "ignore": a character cut in two
    stem = safe or "eval"
    if timestamp_files:
        stem += time.strftime("_%Y%m%d_%H%M%S", time.localtime(report.timestamp))
    return stem


def _error_message(exc: BaseException) -> str:
    """What went wrong, as a user reads it: our errors and the system's say it themselves; a bug names its type."""
    if isinstance(exc, TracegradeError):
        return str(exc)
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return f"{type(exc).__name__}: {exc}"


def _not_a_directory(path: Path) -> str:
    """Why the reports cannot go into ``path``, which exists and is no directory: what it is instead."""
    try:
        kind = special_file_kind(path.stat().st_mode) or "a regular file"
    except OSError:  # a link to nowhere (mkdir does not follow it), or it went away meanwhile
        kind = "a broken symbolic link" if path.is_symlink() else "something that cannot be examined"
    return f"it is {kind}, not a directory; give a directory for the reports (it is created when missing)"


class ReporterManager:
    """Prints and writes the reports ``config`` asks for (console, ``<stem>.json``, ``<stem>.html``,
    ``<stem>_junit.xml``). ``console_stream`` redirects the console report (default: stdout)."""

    def __init__(self, config: ReporterConfig | None = None, *, console_stream: TextIO | None = None) -> None:
        self.config = config or ReporterConfig()
        self.console_stream = console_stream

    def run_all(self, report: EvalReport, output_dir: str | Path | None = None) -> ReporterOutput:
        """Run every enabled reporter; each failure is recorded in ``errors`` and the rest still run."""
        out = ReporterOutput()
        c = self.config
        if not c.enabled:
            return out
        directory = Path(output_dir if output_dir is not None else c.output_dir).expanduser().absolute()
        try:
            directory.mkdir(parents=True, exist_ok=True)
            usable = directory.is_dir()
        except FileExistsError:  # something other than a directory is there: say what, not "File exists"
            usable = False
            out.errors.append(("directory", f"cannot write {directory}: {_not_a_directory(directory)}"))
        except OSError as exc:
            usable = False
            out.errors.append(("directory", f"cannot write {directory}: {_error_message(exc)}"))
        if not usable and not out.errors:
            out.errors.append(("directory", f"cannot write {directory}: {_not_a_directory(directory)}"))
        if c.console:
            console = ConsoleReporter(
                verbose=c.verbose,
                output=self.console_stream,
                include_trajectory=c.include_trajectory,
                include_actual_response=c.include_actual_response,
            )
            try:
                console.report(report)
                out.console_output = True
            except Exception as exc:
                out.errors.append((console.name, _error_message(exc)))
        stem = report_file_stem(report, c.timestamp_files)
        for name, entry in FILE_REPORTERS.items():
            if not getattr(c, entry.switch) or not usable:  # no directory: its error says why for every file
                continue
            reporter = entry.build(c)
            target = directory / f"{stem}{entry.suffix}"
            try:
                out.files[name] = reporter.save(report, target)
            except OutputFileError as exc:  # it names the file and the reason
                out.errors.append((reporter.name, str(exc)))
            except Exception as exc:  # named by the file asked for: the error may name a temporary file beside it
                out.errors.append((reporter.name, f"cannot write {target}: {_error_message(exc)}"))
        return out
