"""Runs the reporters a :class:`ReporterConfig` enables; one failing reporter never stops the others."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from tracegrade.models.config import ReporterConfig
from tracegrade.models.results import EvalReport
from tracegrade.reporters.base import FileReporter
from tracegrade.reporters.console import ConsoleReporter
from tracegrade.reporters.html import HTMLReporter
from tracegrade.reporters.json_reporter import JSONReporter
from tracegrade.reporters.junit import JUnitXMLReporter

__all__ = ["ReporterManager", "ReporterOutput", "report_file_stem"]

MAX_STEM_LENGTH = 100


@dataclass
class ReporterOutput:
    """What :meth:`ReporterManager.run_all` produced: file paths, whether it printed, and failures."""

    json_path: str | None = None
    html_path: str | None = None
    junit_path: str | None = None
    console_output: bool = False
    errors: list[tuple[str, str]] = field(default_factory=list)  # (reporter or "directory", message)

    @property
    def has_errors(self) -> bool:
        return bool(self.errors)

    @property
    def generated_files(self) -> list[str]:
        return [p for p in (self.json_path, self.html_path, self.junit_path) if p is not None]


def report_file_stem(report: EvalReport, timestamp_files: bool = True) -> str:
    """``<eval_set_id>`` with every character other than letters, digits, ``-`` and ``_`` made ``_``
    (``eval`` when empty), plus ``_YYYYmmdd_HHMMSS`` (local time of the report) when asked."""
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in report.eval_set_id)[:MAX_STEM_LENGTH]
    stem = safe or "eval"
    if timestamp_files:
        stem += time.strftime("_%Y%m%d_%H%M%S", time.localtime(report.timestamp))
    return stem


def _error_message(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


class ReporterManager:
    """Prints and writes the reports ``config`` asks for (console, ``<stem>.json``, ``<stem>.html``,
    ``<stem>_junit.xml``). ``console_stream`` redirects the console report (default: stdout)."""

    def __init__(self, config: ReporterConfig | None = None, *, console_stream: TextIO | None = None) -> None:
        self.config = config or ReporterConfig()
        self.console_stream = console_stream

    def _file_reporters(self) -> list[tuple[bool, str, str, Callable[[], FileReporter]]]:
        """``(enabled, ReporterOutput attribute, file suffix, factory)`` for each file reporter, in order."""
        c = self.config
        detail = {
            "include_details": c.include_details,
            "include_trajectory": c.include_trajectory,
            "include_node_responses": c.include_node_responses,
            "include_actual_response": c.include_actual_response,
            "include_tool_call_details": c.include_tool_call_details,
        }
        return [
            (c.json_report, "json_path", ".json", lambda: JSONReporter(**detail)),
            (c.html, "html_path", ".html", lambda: HTMLReporter(**detail)),
            (c.junit_xml, "junit_path", "_junit.xml", JUnitXMLReporter),
        ]

    def run_all(self, report: EvalReport, output_dir: str | Path | None = None) -> ReporterOutput:
        """Run every enabled reporter; each failure is recorded in ``errors`` and the rest still run."""
        out = ReporterOutput()
        c = self.config
        if not c.enabled:
            return out
        directory = Path(output_dir if output_dir is not None else c.output_dir).expanduser().absolute()
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            out.errors.append(("directory", _error_message(exc)))
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
        for enabled, attribute, suffix, factory in self._file_reporters():
            if not enabled:
                continue
            reporter = factory()
            try:
                setattr(out, attribute, reporter.save(report, directory / f"{stem}{suffix}"))
            except Exception as exc:
                out.errors.append((reporter.name, _error_message(exc)))
        return out
