"""`tracegrade export`: write store tables to files (one parquet file per table)."""

from __future__ import annotations

from pathlib import Path

import click

from tracegrade.cli.common import friendly_errors
from tracegrade.cli.progress import track
from tracegrade.cli.store_access import reading_store, store_options
from tracegrade.output_files import replacing
from tracegrade.store.schema import TABLES

__all__ = ["command"]


@click.command("export")
@click.option("--format", "fmt", type=click.Choice(["parquet"]), default="parquet", show_default=True)
@click.option(
    "-o",
    "--output",
    "output_dir",
    type=click.Path(file_okay=False, path_type=Path),
    required=True,
    help="Directory to write <table>.parquet files into (created if missing).",
)
@click.option(
    "--table",
    "tables",
    type=click.Choice([*TABLES, "all"]),
    multiple=True,
    default=("all",),
    show_default=True,
    help="Table to export (repeatable); all = every table.",
)
@store_options
@friendly_errors
def command(fmt: str, output_dir: Path, tables: tuple[str, ...], store_path: Path, token: str | None) -> None:
    """Export store tables as parquet files, one per table, for pandas, Spark or DuckDB elsewhere."""
    import pyarrow.parquet as pq

    chosen = list(TABLES) if "all" in tables else list(dict.fromkeys(tables))
    with reading_store(store_path, token) as store:  # checked before the output directory is made
        for table_name in track(chosen, "exporting", unit="tables"):
            table = store.query_arrow(f"SELECT * FROM {table_name}")
            path = output_dir / f"{table_name}.{fmt}"
            with replacing(path, inputs=[store_path]) as fh:  # makes the directory; a refusal names path and reason
                pq.write_table(table, fh)
            click.echo(f"{table_name}: {table.num_rows} rows -> {path}")
