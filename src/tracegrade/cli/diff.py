"""``tracegrade diff RUN_A RUN_B``: per case and criterion, what regressed, what improved, what changed."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from tracegrade.cli.common import UsageProblem, friendly_errors
from tracegrade.cli.grading_store import open_grading_store
from tracegrade.cli.store_access import store_options
from tracegrade.evaluation.run_diff import RunDiff, diff_reports
from tracegrade.evaluation.run_records import load_run

__all__ = ["command"]

_STYLE = {"regressed": "bold red", "improved": "green", "changed": "yellow", "added": "cyan", "removed": "magenta"}


@click.command("diff")
@store_options
@click.argument("run_a")
@click.argument("run_b")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.option("--all", "show_all", is_flag=True, help="Also list unchanged cases.")
@click.option("--fail-on-regression", is_flag=True, help="Exit with code 1 when any case regressed.")
@friendly_errors
def command(
    store_path: Path, token: str | None, run_a: str, run_b: str, fmt: str, show_all: bool, fail_on_regression: bool
) -> None:
    """Compare two recorded runs (ids or unique prefixes, see `tracegrade runs`)."""
    with open_grading_store(store_path, token, writable=False) as store:
        try:
            report_a, report_b = load_run(store.reader, run_a), load_run(store.reader, run_b)
        except KeyError as exc:
            raise UsageProblem(str(exc.args[0])) from None
    diff = diff_reports(report_a, report_b, run_a, run_b)
    if fmt == "json":
        click.echo(json.dumps(diff.to_dict(), indent=2, default=str))
    else:
        _print(diff, show_all)
    if fail_on_regression and diff.count("regressed"):
        sys.exit(1)


def _print(diff: RunDiff, show_all: bool) -> None:
    console = Console()
    counts = {k: diff.count(k) for k in ("regressed", "improved", "changed", "unchanged", "added", "removed")}
    console.print(
        f"[bold]{diff.run_a}[/] -> [bold]{diff.run_b}[/]: " + ", ".join(f"{v} {k}" for k, v in counts.items())
    )
    table = Table("case", "change", "status", "criteria", "trajectory", show_lines=True)
    for case in diff.cases:
        if case.kind == "unchanged" and not show_all:
            continue
        crit = "\n".join(
            f"{c.criterion}: {_fmt(c.score_a)} -> {_fmt(c.score_b)} ({c.kind})"
            for c in case.criteria
            if c.kind != "unchanged"
        )
        style = _STYLE.get(case.kind, "")
        table.add_row(
            case.name or case.eval_id,
            f"[{style}]{case.kind}[/]" if style else case.kind,
            f"{case.status_a} -> {case.status_b}",
            crit,
            "\n".join(case.trajectory_changes),
        )
    console.print(table)


def _fmt(score: float | None) -> str:
    return "-" if score is None else f"{score:.2f}"
