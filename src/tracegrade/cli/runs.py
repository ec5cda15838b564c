"""``tracegrade runs``: list the grading runs recorded in a store."""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.console import Console
from rich.measure import Measurement
from rich.table import Column, Table
from rich.text import Text

from tracegrade.cli.common import friendly_errors
from tracegrade.cli.grading_store import open_grading_store
from tracegrade.cli.store_access import store_options, terminal_text
from tracegrade.evaluation.run_records import list_runs

__all__ = ["command"]


@click.command("runs")
@store_options
@click.option("--limit", default=20, show_default=True, type=int)
@click.option(
    "--kind", type=click.Choice(["eval_set", "reference_free", "worker", "live"]), help="Only runs of this kind."
)
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@friendly_errors
def command(store_path: Path, token: str | None, limit: int, kind: str | None, fmt: str) -> None:
    """Recorded grading runs, newest first."""
    with open_grading_store(store_path, token, writable=False) as store:
        runs = list_runs(store.reader, limit=limit, kind=kind)
    if fmt == "json":
        click.echo(json.dumps([r.__dict__ for r in runs], default=str, indent=2))
        return
    if not runs:
        click.echo("no grading runs recorded yet (run `tracegrade grade`)")
        return
    console = Console()
    # a run id is copied into `report`/`diff`: no cell wraps, the table is as wide as it needs to be
    headers = ("run id", "recorded", "kind", "eval set", "cases", "passed", "failed", "errors", "pass rate")
    table = Table(*(Column(h, no_wrap=True) for h in headers))
    for r in runs:
        table.add_row(  # Text: an eval set id is the eval set file's, and "[/]" in it is not markup
            Text(terminal_text(r.run_id)),
            str(r.created_at)[:19],
            r.kind,
            Text(terminal_text(r.eval_set_id or "")),
            str(r.total_cases),
            str(r.passed_cases),
            str(r.failed_cases),
            str(r.error_cases),
            f"{r.pass_rate:.0%}",
        )
    needed = Measurement.get(console, console.options.update_width(10_000), table).maximum
    console.width = max(console.width, needed)
    console.print(table)
