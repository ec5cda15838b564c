"""``tracegrade export-cases``: turn stored traces into an editable eval set.

A selection that matches no trace is an error (exit 2) and leaves ``--output`` as it was: an empty eval set
written over a golden file would lose it, and is no eval set ``validate`` accepts anyway.
"""

from __future__ import annotations

from pathlib import Path

import click

from tracegrade.cli.common import UsageProblem, friendly_errors
from tracegrade.cli.grading_store import open_grading_store
from tracegrade.cli.progress import ProgressBar
from tracegrade.cli.store_access import store_options
from tracegrade.evaluation.case_export import cases_from_traces
from tracegrade.evaluation.selection import TraceSelection, selection_where
from tracegrade.models.files import save_model

__all__ = ["command"]


@click.command("export-cases")
@store_options
@click.option("--where", help="SQL predicate over the traces table.")
@click.option("--since", help="Only traces started since (30m, 2h, 7d or an ISO time).")
@click.option("--limit", type=int, default=100, show_default=True)
@click.option("--name", default="exported", show_default=True, help="Eval set id and name.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), required=True)
@friendly_errors
def command(
    store_path: Path, token: str | None, where: str | None, since: str | None, limit: int, name: str, output: Path
) -> None:
    """Write one case per selected trace: its user query, tool calls with arguments, node order, response."""
    selection = TraceSelection(where=where, since=since, limit=limit)
    try:
        clause, params = selection_where(selection)
    except ValueError as exc:
        raise UsageProblem(str(exc)) from None
    with open_grading_store(store_path, token, writable=False) as store:
        try:
            store.reader.query(f"SELECT count(*) FROM traces WHERE {clause}", params)
        except Exception as exc:
            raise UsageProblem(f"--where {where!r} is not a valid predicate over the traces table: {exc}") from None
        with ProgressBar("exporting cases", unit="traces") as bar:
            eval_set = cases_from_traces(store.reader, selection, name=name, progress=bar.update)
    if not len(eval_set):
        raise UsageProblem(f"no trace matched {_described(selection)}; nothing written to {output}")
    save_model(eval_set, output, inputs=[store_path])
    click.echo(f"wrote {len(eval_set)} case(s) to {output}")


def _described(selection: TraceSelection) -> str:
    """The selection as the user gave it, for the message that says it matched nothing."""
    given = [
        f"--where {selection.where!r}" if selection.where else "",
        f"--since {selection.since!r}" if selection.since else "",
    ]
    return " and ".join(g for g in given if g) or "the selection (the store has no traces)"
