"""`tracegrade import FILE…`: load OTLP files into the store and build their trajectories.

Formats (recognised by content): OTLP/JSON requests, JSON lines as the Collector's file exporter writes
them, and protobuf. Import opens the store read-write; while `tracegrade serve` holds the file it sends
the records through that server instead. A lake (with --lake-data) is written directly, receivers or not.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from tracegrade.cli.common import friendly_errors
from tracegrade.cli.mapping_batch_option import mapping_batch_bytes_given, mapping_batch_bytes_option
from tracegrade.cli.progress import ProgressBar, track
from tracegrade.cli.store_access import chosen_tenant, lake_data_option, open_writable_store, store_options
from tracegrade.errors import StoreLockedError
from tracegrade.store.lake_location import redacted

if TYPE_CHECKING:
    from tracegrade.ingest.decode.results import DecodedLogs, DecodedTraces, Rejection
    from tracegrade.store.backend import StoreBackend

__all__ = ["command"]

_SHOWN_REJECTIONS = 20
_STDIN = "-"
Decoded = list[tuple[Path, "DecodedTraces", "DecodedLogs"]]


@click.command("import")
@click.argument("files", nargs=-1, required=True, type=click.Path(exists=True, allow_dash=True, path_type=Path))
@store_options
@lake_data_option
@mapping_batch_bytes_option
@friendly_errors
def command(
    files: tuple[Path, ...], store_path: Path | str, token: str | None, lake_data: Path | None, mapping_batch_bytes: int
) -> None:
    """Import OTLP files (JSON, JSON lines, protobuf; gzip'd or not) into the store and map their trajectories.

    FILES may be directories (every file under them, in name order, hidden ones left out) and `-` (standard
    input). Prints, per file, the spans and log records imported, duplicates skipped (already stored), and
    rejected records with the reason. While `tracegrade serve` holds the store, the records are sent
    through it (with --token) and it reports what it accepted and rejected. Exits 1 when any record
    was rejected. --mapping-batch-bytes applies to what it maps itself (a server maps with its own, which import
    says when it is given one).
    """
    # Decode everything before writing anything.
    decoded = [_decoded(path) for path in track(_expanded(files), "decoding", unit="files")]
    try:
        store = open_writable_store(store_path, lake_data, "importing")
    except StoreLockedError as locked:
        rejected_total = _through_server(Path(store_path), token, decoded, locked)  # only a file has one holder
    else:
        try:
            rejected_total = _into_store(store, store_path, decoded, mapping_batch_bytes)
        finally:
            store.close()
    if rejected_total:
        raise SystemExit(1)


def _expanded(files: tuple[Path, ...]) -> list[Path]:
    """The files to import: each file as given, each directory as the files under it (sorted; hidden files and
    directories, such as an editor's or git's, left out), and ``-`` (standard input) once."""
    if sum(1 for path in files if str(path) == _STDIN) > 1:
        raise click.UsageError("'-' (standard input) is given more than once: it can be read only once")
    expanded: list[Path] = []
    for path in files:
        if str(path) == _STDIN or not path.is_dir():
            expanded.append(path)
            continue
        found = sorted(
            found
            for found in path.rglob("*")
            if found.is_file() and not any(part.startswith(".") for part in found.relative_to(path).parts)
        )
        if not found:
            raise click.UsageError(f"directory {path} holds no file to import")
        expanded += found
    return expanded


def _decoded(path: Path) -> tuple[Path, DecodedTraces, DecodedLogs]:
    """``path``'s spans and log records (``-``: what standard input holds, named ``<stdin>``)."""
    import sys

    from tracegrade.ingest.decode import read_otlp_file

    if str(path) == _STDIN:
        named = Path("<stdin>")
        return (named, *read_otlp_file(named, data=sys.stdin.buffer.read()))
    return (path, *read_otlp_file(path))


def _into_store(store: StoreBackend, store_path: Path | str, decoded: Decoded, max_bytes: int) -> int:
    """Write every file into the open store (as the ``--tenant``'s) and map the traces they touched, ``max_bytes``
    of spans at a time; the number of rejected records."""
    from tracegrade.store.prepared import prepare_write
    from tracegrade.store.rebuilder import RebuildStats, rebuild_traces
    from tracegrade.store.tenancy import DEFAULT_TENANT

    tenant = chosen_tenant() or DEFAULT_TENANT
    rejected_total = 0
    touched: set[str] = set()
    for path, traces, logs in decoded:
        result = store.write_batch([prepare_write(traces.spans, logs.records, tenant)]).results[0]
        touched |= result.trace_ids
        rejections = [*traces.rejected, *logs.rejected]
        rejected_total += len(rejections)
        click.echo(
            f"{path}: {result.spans_inserted} spans imported, {result.spans_duplicate} duplicates skipped, "
            f"{result.logs_inserted} log records imported, {len(rejections)} rejected"
        )
        _show_rejections(rejections)
    with ProgressBar(f"mapping {len(touched):,} traces"):
        stats = RebuildStats()
        mapped = rebuild_traces(
            store, [(tenant, trace_id) for trace_id in sorted(touched)], max_bytes=max_bytes, stats=stats
        )
    click.echo(
        f"{mapped} trace{'s' if mapped != 1 else ''} mapped into {redacted(store_path)} "
        f"(in {stats.mapping_batches} batch(es))"
    )
    return rejected_total


def _through_server(store_path: Path, token: str | None, decoded: Decoded, locked: StoreLockedError) -> int:
    """Send every file through the server that holds ``store_path``; the number of rejected records.

    With no live server announced for the file (another process holds it), ``locked`` is raised as is.
    """
    from tracegrade.cli.remote_import import send_to_server
    from tracegrade.store.access import read_sidecar, server_holding

    token = token or None  # --token given empty (TRACEGRADE_TOKEN set to nothing) is no token
    server = read_sidecar(store_path)
    if server is None or server_holding(store_path, token) is None:
        raise locked
    if (tenant := chosen_tenant()) is not None:
        # the server stores what it is sent as its token's tenant: ignoring --tenant would file the records
        # under another tenant than the one asked for (a dead letter's, say), where that tenant cannot see them
        raise click.UsageError(
            f"--tenant {tenant} does not apply through a server: {server.http_url} (pid {server.pid}) holds "
            f"{store_path} and stores what it is sent as its token's tenant. Pass a token of tenant {tenant} with "
            "--token and leave out --tenant, or stop the server and import with --tenant"
        )
    click.echo(f"store {store_path} is held by `tracegrade serve` (pid {server.pid}); sending to {server.http_url}")
    if (given := mapping_batch_bytes_given()) is not None:
        click.echo(
            f"note: {given} does not apply here: the server at {server.http_url} maps the trajectories of what it is "
            "sent with its own setting (its --mapping-batch-bytes)",
            err=True,
        )
    rejected_total = 0
    for path, traces, logs in decoded:
        with ProgressBar(f"sending {len(traces.spans):,} spans and {len(logs.records):,} log records"):
            sent = send_to_server(server.http_url, token, traces.spans, logs.records)
        rejections = [*traces.rejected, *logs.rejected]
        rejected = len(rejections) + sent.spans_rejected + sent.logs_rejected
        rejected_total += rejected
        click.echo(
            f"{path}: {sent.spans_accepted} spans accepted, {sent.logs_accepted} log records accepted, "
            f"{rejected} rejected"
        )
        _show_rejections(rejections)
        for message in sent.messages:
            click.echo(f"  rejected by the server: {message}", err=True)
    click.echo("the server stores them (a span it already has is kept once) and maps their trajectories")
    return rejected_total


def _show_rejections(rejections: list[Rejection]) -> None:
    for rejection in rejections[:_SHOWN_REJECTIONS]:
        click.echo(f"  rejected at {rejection.where}: {rejection.reason}", err=True)
    if len(rejections) > _SHOWN_REJECTIONS:
        click.echo(f"  … and {len(rejections) - _SHOWN_REJECTIONS} more rejected", err=True)
