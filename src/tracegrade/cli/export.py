"""`tracegrade export`: write store tables to Parquet files (one per table), or the stored spans and log records
as OTLP requests (protobuf or OTLP/JSON lines) that ``tracegrade import`` and the OpenTelemetry Collector read."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from pathlib import Path

import click

from tracegrade.cli.common import UsageProblem, friendly_errors
from tracegrade.cli.progress import ProgressBar, track
from tracegrade.cli.store_access import chosen_tenant, reading_store, store_options
from tracegrade.output_files import replacing
from tracegrade.store.schema import TABLES

__all__ = ["command"]

_TRACE_ID = re.compile(r"^[0-9a-fA-F]{32}$")
_EPOCH = datetime(1970, 1, 1)
_OTLP_ONLY = ("trace_ids", "since", "until")  # the selection options of the OTLP formats


@click.command("export")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["parquet", "otlp", "otlp-json"]),
    default="parquet",
    show_default=True,
    help="parquet: one file per table; otlp: spans and log records as length-prefixed protobuf requests; "
    "otlp-json: as OTLP/JSON requests, one per line (the Collector file exporter's formats, read by import).",
)
@click.option(
    "-o",
    "--output",
    "output",
    type=click.Path(path_type=Path, allow_dash=True),
    required=True,
    help="parquet: the directory to write <table>.parquet files into (created if missing). otlp, otlp-json: the "
    "file to write (gzip'd when it ends in .gz), or - for standard output.",
)
@click.option(
    "--table",
    "tables",
    type=click.Choice([*TABLES, "all"]),
    multiple=True,
    default=("all",),
    show_default=True,
    help="Table to export (repeatable); all = every table. parquet only.",
)
@click.option(
    "--trace-id",
    "trace_ids",
    multiple=True,
    help="otlp, otlp-json: only this trace's spans and log records (repeatable; 32 hex digits).",
)
@click.option("--since", help="otlp, otlp-json: only spans that started (log records timed) at or after this: "
              "a duration ago (15m, 2h, 1d) or an ISO time.")  # fmt: skip
@click.option("--until", help="otlp, otlp-json: only spans that started (log records timed) before this: a "
              "duration ago or an ISO time.")  # fmt: skip
@store_options
@friendly_errors
def command(
    fmt: str,
    output: Path,
    tables: tuple[str, ...],
    trace_ids: tuple[str, ...],
    since: str | None,
    until: str | None,
    store_path: Path,
    token: str | None,
) -> None:
    """Export store tables as parquet files (for pandas, Spark or DuckDB elsewhere), or spans and log records as
    OTLP files (for `tracegrade import` into another store, or any OpenTelemetry backend).

    OTLP carries no tenant: export one tenant at a time (--tenant, or a tenant's --token through a server).
    Each record keeps its whole OTLP envelope (resource and scope, their attributes, schema URLs and dropped
    counts); records stored before schema version 12 export without scope attributes and schema URLs.
    """
    if fmt == "parquet":
        _refuse_otlp_options(trace_ids, since, until)
        _export_parquet(output, tables, store_path, token)
    else:
        _refuse_parquet_options(fmt)
        _export_otlp(fmt, output, trace_ids, since, until, store_path, token)


def _refuse_otlp_options(trace_ids: tuple[str, ...], since: str | None, until: str | None) -> None:
    given = [name for name, value in zip(("--trace-id", "--since", "--until"), (trace_ids, since, until)) if value]
    if given:
        raise UsageProblem(
            f"{', '.join(given)} select{'s' if len(given) == 1 else ''} spans and log records for --format otlp or "
            "otlp-json; --format parquet exports whole tables (select rows with `tracegrade sql --format parquet`)"
        )


def _refuse_parquet_options(fmt: str) -> None:
    ctx = click.get_current_context()
    if ctx.get_parameter_source("tables") is not click.core.ParameterSource.DEFAULT:
        raise UsageProblem(
            f"--table applies to --format parquet; --format {fmt} exports spans and log records "
            "(select them with --trace-id, --since, --until)"
        )


def _export_parquet(output_dir: Path, tables: tuple[str, ...], store_path: Path, token: str | None) -> None:
    import pyarrow.parquet as pq

    if str(output_dir) == "-":
        raise UsageProblem("--format parquet writes a directory of files: give its path with -o, not -")
    chosen = list(TABLES) if "all" in tables else list(dict.fromkeys(tables))
    with reading_store(store_path, token) as store:  # checked before the output directory is made
        for table_name in track(chosen, "exporting", unit="tables"):
            table = store.query_arrow(f"SELECT * FROM {table_name}")
            path = output_dir / f"{table_name}.parquet"
            with replacing(path, inputs=[store_path]) as fh:  # makes the directory; a refusal names path and reason
                pq.write_table(table, fh)
            click.echo(f"{table_name}: {table.num_rows} rows -> {path}")


def _export_otlp(
    fmt: str,
    output: Path,
    trace_ids: tuple[str, ...],
    since: str | None,
    until: str | None,
    store_path: Path,
    token: str | None,
) -> None:
    from tracegrade.cli.otlp_export import export_otlp
    from tracegrade.cli.stored_records import Selection, tenants_of

    selection = Selection(
        trace_ids=_trace_ids(trace_ids), since_ns=_moment_ns(since, "--since"), until_ns=_moment_ns(until, "--until")
    )
    if selection.since_ns is not None and selection.until_ns is not None and selection.since_ns >= selection.until_ns:
        raise UsageProblem(f"--since {since!r} is not before --until {until!r}: nothing lies between them")
    to_stdout = str(output) == "-"
    with reading_store(store_path, token) as store:  # checked before the output file is made
        if chosen_tenant() is None:
            tenants = tenants_of(store, selection)
            if len(tenants) > 1:
                click.echo(
                    f"warning: the export holds the records of several tenants ({', '.join(tenants)}), and OTLP "
                    "carries no tenant: an import files them all under one. Export each with --tenant",
                    err=True,
                )
        with ProgressBar("exporting", unit="records") as bar:
            exported = export_otlp(store, selection, output, fmt, inputs=[store_path], progress=bar.advance)
    click.echo(
        f"{exported.spans} spans and {exported.logs} log records in {exported.requests} requests -> "
        f"{'standard output' if to_stdout else output}",
        err=to_stdout,  # standard output carries the export itself
    )


def _trace_ids(values: tuple[str, ...]) -> tuple[str, ...]:
    for value in values:
        if not _TRACE_ID.match(value):
            raise UsageProblem(f"--trace-id {value!r} is not a trace id: give its 32 hex digits")
    return tuple(dict.fromkeys(value.lower() for value in values))


def _moment_ns(value: str | None, option: str) -> int | None:
    """``value`` (a ``--since``-style time) as Unix nanoseconds, or None when not given."""
    if value is None:
        return None
    from tracegrade.timespec import parse_since

    return (parse_since(value, option) - _EPOCH) // timedelta(microseconds=1) * 1_000
