"""`tracegrade import FILE…`: load OTLP files into the store and build their trajectories.

Formats (recognised by content): OTLP/JSON requests, JSON lines as the Collector's file exporter writes
them, and protobuf. Import opens the store read-write, so it cannot run while `tracegrade serve` holds
the file: it then says so and suggests sending the file to that server instead.
"""

from __future__ import annotations

from pathlib import Path

import click

from tracegrade.cli.common import UsageProblem, friendly_errors
from tracegrade.cli.progress import ProgressBar, track
from tracegrade.cli.store_access import store_option
from tracegrade.errors import StoreLockedError
from tracegrade.store.access import read_sidecar
from tracegrade.store.trace_store import TraceStore

__all__ = ["command"]

_SHOWN_REJECTIONS = 20


def _open_for_import(store_path: Path) -> TraceStore:
    try:
        return TraceStore(store_path)
    except StoreLockedError as exc:
        server = read_sidecar(store_path)
        if server is None:
            raise
        raise UsageProblem(
            f"store {store_path} is held by `tracegrade serve` (pid {server.pid}, {server.http_url}); import "
            f"cannot write to it while the server runs. Send the file to the server instead, e.g. "
            f"`curl -H 'Content-Type: application/json' --data-binary @FILE.json {server.http_url}/v1/traces` "
            "(use application/x-protobuf for .pb files), or stop the server and import again"
        ) from exc


@click.command("import")
@click.argument("files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@store_option
@friendly_errors
def command(files: tuple[Path, ...], store_path: Path) -> None:
    """Import OTLP files (JSON, JSON lines, protobuf) into the store and map their trajectories.

    Prints, per file, the spans and log records imported, duplicates skipped (already stored), and
    rejected records with the reason. Exits 1 when any record was rejected.
    """
    from tracegrade.ingest.decode import read_otlp_file

    # Decode everything before writing anything.
    decoded = [(path, *read_otlp_file(path)) for path in track(files, "decoding", unit="files")]
    rejected_total = 0
    store_path.parent.mkdir(parents=True, exist_ok=True)
    with _open_for_import(store_path) as store:
        touched: set[str] = set()
        for path, traces, logs in decoded:
            result = store.write(traces.spans, logs.records)
            touched |= result.trace_ids
            rejections = [*traces.rejected, *logs.rejected]
            rejected_total += len(rejections)
            click.echo(
                f"{path}: {result.spans_inserted} spans imported, {result.spans_duplicate} duplicates skipped, "
                f"{result.logs_inserted} log records imported, {len(rejections)} rejected"
            )
            for rejection in rejections[:_SHOWN_REJECTIONS]:
                click.echo(f"  rejected at {rejection.where}: {rejection.reason}", err=True)
            if len(rejections) > _SHOWN_REJECTIONS:
                click.echo(f"  … and {len(rejections) - _SHOWN_REJECTIONS} more rejected", err=True)
        with ProgressBar(f"mapping {len(touched):,} traces"):
            mapped = store.rebuild_trajectories(sorted(touched))
    click.echo(f"{mapped} trace{'s' if mapped != 1 else ''} mapped into {store_path}")
    if rejected_total:
        raise SystemExit(1)
