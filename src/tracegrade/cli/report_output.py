"""The reports a grading command prints and writes (``grade``, ``run``): the ``--format`` choices and the writing of
them, with every report that could not be written named, so that the command can fail on it (exit 2) rather than
leave a CI job reading an old file."""

from __future__ import annotations

from pathlib import Path

import click

from tracegrade.models.config import ReporterConfig
from tracegrade.models.results import EvalReport
from tracegrade.reporters.manager import FILE_REPORTERS, ReporterManager

__all__ = ["FORMATS", "configured_formats", "parse_formats", "write_reports"]

FORMATS = ("console", *FILE_REPORTERS)


def parse_formats(value: str) -> list[str]:
    """The formats of a ``--format`` value (comma-separated), each checked against :data:`FORMATS`."""
    chosen = [f.strip() for f in value.split(",") if f.strip()]
    unknown = [f for f in chosen if f not in FORMATS]
    if unknown:
        raise click.BadParameter(f"unknown format(s) {', '.join(unknown)}; choose from {', '.join(FORMATS)}")
    if not chosen:
        raise click.BadParameter(f"give at least one format: {', '.join(FORMATS)}", param_hint="'--format'")
    return chosen


def configured_formats(reporter: ReporterConfig) -> list[str]:
    """The formats a config's ``reporter`` switches on (none when it is disabled): ``run``'s default."""
    if not reporter.enabled:
        return []
    switched = [name for name, entry in FILE_REPORTERS.items() if getattr(reporter, entry.switch)]
    return (["console"] if reporter.console else []) + switched


def write_reports(
    report: EvalReport,
    reporter: ReporterConfig,
    out_dir: Path,
    formats: list[str],
    verbose: bool,
    *,
    announce: bool = True,
) -> tuple[list[str], list[str]]:
    """Print and write the reports of ``formats`` (the command line's choices over the config's ``reporter``
    settings, which still say what the reports include and whether file names carry a timestamp).

    Returns the files written and why each report that failed did; ``announce`` says each file written on stderr.
    """
    switches = {entry.switch: name in formats for name, entry in FILE_REPORTERS.items()}
    chosen = {"enabled": True, "output_dir": str(out_dir), "console": "console" in formats, "verbose": verbose}
    output = ReporterManager(reporter.model_copy(update=chosen | switches)).run_all(report)
    written = [str(path) for path in output.generated_files]
    if announce:
        for path in written:
            click.echo(f"wrote {path}", err=True)
    return written, [f"{name}: {message}" for name, message in output.errors]
