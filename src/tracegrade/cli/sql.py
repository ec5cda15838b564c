"""`tracegrade sql`: run one read-only SQL statement against the store and print or save the rows."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import click

from tracegrade.cli.common import UsageProblem, friendly_errors
from tracegrade.cli.store_access import emit, reading_store, render_csv, render_json, render_table, store_options
from tracegrade.output_files import replacing
from tracegrade.store.results import QueryResult

__all__ = ["command"]


@click.command("sql")
@click.argument("query")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "csv", "json", "parquet"]),
    default="table",
    show_default=True,
    help="table (rich), csv, json (one array of row objects) or parquet (needs -o).",
)
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="Write to FILE, not stdout.")
@store_options
@friendly_errors
def command(query: str, fmt: str, output: Path | None, store_path: Path, token: str | None) -> None:
    """Run one read-only QUERY (SELECT, WITH, DESCRIBE, SHOW, SUMMARIZE, EXPLAIN) on the store.

    Tables: spans, logs, evaluations, traces, node_visits, tool_calls, llm_calls (traces and their
    trajectories); eval_runs, eval_case_results, eval_results, eval_run_cases, calibrations, grading_jobs
    (grading); schema_version. Their columns: `tracegrade sql "DESCRIBE tool_calls"`.
    Example: tracegrade sql "SELECT name, count(*) FROM tool_calls GROUP BY name"
    """
    if fmt == "parquet" and output is None:
        raise UsageProblem("--format parquet writes a binary file: add -o FILE.parquet")
    with reading_store(store_path, token) as store:
        if fmt == "parquet":
            import pyarrow.parquet as pq

            table = store.query_arrow(query)
            with replacing(output, inputs=[store_path]) as fh:  # type: ignore[arg-type]
                pq.write_table(table, fh)
            click.echo(f"wrote {table.num_rows} rows to {output}", err=True)
            return
        result = store.query(query)
    renderers: dict[str, Callable[[QueryResult], object]] = {
        "table": render_table,
        "csv": render_csv,
        "json": render_json,
    }
    emit(renderers[fmt](result), output, inputs=[store_path])
