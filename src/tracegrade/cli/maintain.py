"""``tracegrade maintain``: compact a lake store (merge small files, expire snapshots, delete old files) after
finishing its interrupted forgets, and expire old traces from a lake or a DuckDB file (``--retain``).

``--purge-deleted`` on a DuckDB file that `tracegrade serve` holds asks that server to purge it (``POST
/v1/purge``, with ``--token``), as ``forget`` asks it to forget."""

from __future__ import annotations

import functools
import signal
import threading
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import click

from tracegrade.cli.common import Duration, UsageProblem, friendly_errors
from tracegrade.cli.lake_options import checked_lake, lake_options
from tracegrade.cli.store_access import token_option

if TYPE_CHECKING:
    from tracegrade.store.retention import RetentionPolicy
    from tracegrade.store.trace_store import TraceStore

__all__ = ["command"]

PURGE_ANSWER_SECONDS = 6 * 3600.0  # how long a purge through a server may take: it copies the whole file


@click.command("maintain")
@lake_options
@click.option(
    "--every",
    type=Duration(),
    help="Keep maintaining at this interval (30s, 5m, 1h); default: one pass, then exit.",
)
@click.option(
    "--keep",
    type=Duration(allow_zero=True),  # 0s: expire every snapshot but the current one, files dropped at once
    default="15m",
    show_default=True,
    help="Snapshots younger than this, and files dropped less than this ago, are kept: a query running "
    "shorter than this is never disturbed.",
)
@click.option(
    "--purge-deleted",
    is_flag=True,
    help="Rewrite what holds deleted rows (of forgotten or expired traces) without them, so their bytes leave "
    "the disk: a lake's data files that hold any (the files replaced go once older than --keep), or a whole "
    "DuckDB store file (once, without --every; the server that holds it, if one does, purges it itself, "
    "refusing exports and queries retryably meanwhile).",
)
@click.option(
    "--retain",
    type=Duration(),
    help="First delete each trace of which nothing was received for this long (30d, 12h): its spans, log "
    "records, trajectory and grading jobs (recorded runs stay). Also takes a DuckDB store file that no "
    "server holds (a server's file: give `tracegrade serve` --retain).",
)
@click.option(
    "--retain-tenants",
    metavar="TENANT=DURATION,…",
    help="Tenants whose traces are kept for another time than --retain's (acme=7d,umbrella=forever); "
    "the other tenants' go by --retain (kept, without it).",
)
@token_option
@friendly_errors
def command(
    location: str,
    lake_data: Path | None,
    token: str | None,
    every: timedelta | None,
    keep: timedelta,
    purge_deleted: bool,
    retain: timedelta | None,
    retain_tenants: str | None,
) -> None:
    """Merge a lake's small Parquet files, flush inlined rows, expire old snapshots and delete old files;
    with --retain, delete the traces older than that first; with --purge-deleted, rewrite what still holds the
    bytes of deleted rows (a lake's data files, or a whole DuckDB store file).

    Each pass on a lake first finishes any forget that died before its deletions committed: the rows the lake
    still holds of traces listed as forgotten are deleted.

    Safe while receivers write: each step is a DuckLake commit, retried when it races theirs. With
    --every, SIGINT or SIGTERM stops it once the pass in progress is done. A DuckDB store file needs none
    of the lake's steps (it checkpoints itself), so a file store is refused without --retain, --retain-tenants or
    --purge-deleted.
    """
    from tracegrade.errors import InvalidValueError
    from tracegrade.store.lake_location import is_lake_location
    from tracegrade.store.retention import RetentionPolicy

    try:
        tenants = RetentionPolicy.parse_tenants(retain_tenants or "", "--retain-tenants")
    except InvalidValueError as exc:
        raise click.BadParameter(str(exc).removeprefix("--retain-tenants: "), param_hint="--retain-tenants") from None
    policy = RetentionPolicy(retain, tenants)
    retention = policy if policy.shortest is not None else None
    if purge_deleted and not is_lake_location(location):
        _purge_file(Path(location), retention, every, token)
        return
    if retention is not None and not is_lake_location(location):
        opener: Callable[[], TraceStore] = functools.partial(_open_file_store, Path(location))
    else:
        reason = (
            "which needs no maintenance (it checkpoints itself); --retain or --retain-tenants deletes its old "
            "traces, --purge-deleted rewrites it without the bytes of deleted rows"
        )
        data_path = checked_lake(location, lake_data, "maintain", reason)
        from tracegrade.store.lake import LakeStore

        # maintenance looks after a lake: a mistyped dbname must not get a new, empty one
        opener = functools.partial(LakeStore, location, data_path=data_path, create=False)
    opened = opener()
    store: TraceStore | None = opened
    interval = every.total_seconds() if every else None
    try:
        if interval is None:
            _one_pass(opened, keep, purge_deleted, retention, stop_on_error=True)
            return
        stop = threading.Event()
        for signum in (signal.SIGINT, signal.SIGTERM):  # stop after the pass in progress, not inside a commit
            signal.signal(signum, lambda *_: stop.set())
        while not stop.is_set():
            if store is None:
                store = _reopened(opener, location)
            if store is not None and not _one_pass(store, keep, purge_deleted, retention, stop_on_error=False):
                # A failed pass may leave the store unusable for good: a lake marks itself failed when its catalog
                # was out of reach, and DuckDB invalidates a database after an internal error in a commit. Every
                # later pass would fail the same way, so the next one opens the store again.
                store.close()
                store = None
            stop.wait(interval)
    finally:
        if store is not None:
            store.close()


def _reopened(opener: Callable[[], TraceStore], location: str) -> TraceStore | None:
    """The store opened again after a failed pass, or None (said on stderr) while it cannot be."""
    from tracegrade.errors import StoreError
    from tracegrade.store.lake_location import redacted

    try:
        return opener()
    except (StoreError, click.ClickException) as exc:
        message = exc.message if isinstance(exc, click.ClickException) else str(exc)
        click.echo(f"opening {redacted(location)} again failed: {message}; retrying at the next interval", err=True)
        return None


def _purge_file(path: Path, retention: RetentionPolicy | None, every: timedelta | None, token: str | None) -> None:
    """--purge-deleted on a DuckDB file: its old traces expired first (with --retain), then the file rewritten,
    here or by the server that holds it."""
    from tracegrade.errors import StoreError, StoreLockedError
    from tracegrade.store.access import server_holding
    from tracegrade.store.file_purge import purge_deleted_rows

    if every is not None:
        raise click.UsageError("--purge-deleted rewrites a whole DuckDB store file: run it once, without --every")
    if retention is not None:
        store = _open_file_store(path)
        try:
            _one_pass(store, timedelta(0), False, retention, stop_on_error=True)
        finally:
            store.close()
    try:
        purged = purge_deleted_rows(path)
    except StoreLockedError as exc:
        server = server_holding(path, token)
        if server is None:
            # a held store is exit 2 here as for every store command (forget, mcp…): not a failed maintenance
            raise UsageProblem(
                f"{exc}. A purge rewrites the whole file: nothing may hold it meanwhile but the server that holds "
                "it (a running `tracegrade serve` purges its own file)"
            ) from None
        server.timeout = PURGE_ANSWER_SECONDS
        try:
            purged = server.purge_deleted()
        except StoreError as refused:  # a failed maintenance, as on a lake: the server's answer says what to do
            raise click.ClickException(str(refused)) from None
    click.echo(purged.summary())


def _open_file_store(path: Path) -> TraceStore:
    """The DuckDB store file read-write, unless a server holds it (then the server must expire its traces)."""
    from tracegrade.errors import StoreLockedError
    from tracegrade.store.database import store_not_found
    from tracegrade.store.trace_store import TraceStore

    if not path.exists():
        raise store_not_found(path)
    try:
        return TraceStore(path)
    except StoreLockedError as exc:
        raise UsageProblem(
            f"{exc}. If that is `tracegrade serve`, give it --retain instead: a store file has one writer"
        ) from None


def _one_pass(
    store: TraceStore, keep: timedelta, purge_deleted: bool, retention: RetentionPolicy | None, *, stop_on_error: bool
) -> bool:
    """One pass, its summary on stdout; whether it went through. A failed step (a lost race, the catalog away)
    fails a single run and is reported and retried at the next interval by ``--every``."""
    import duckdb

    from tracegrade.errors import StoreError, StoreLockedError
    from tracegrade.store.lake import LakeStore
    from tracegrade.store.lake_location import redacted
    from tracegrade.store.lake_maintenance import TRY_LATER
    from tracegrade.store.rows import utc_now

    try:
        if retention is not None:
            click.echo(retention.apply(store, utc_now()).summary("expired"))
        if isinstance(store, LakeStore):
            click.echo(store.maintain(keep=keep, purge_deleted=purge_deleted).summary())
    except StoreLockedError as exc:  # another process's pass: the lake is busy, not failed (exit 2, as for a file)
        if stop_on_error:
            raise UsageProblem(str(exc)) from None
        click.echo(f"{str(exc).removesuffix(TRY_LATER)}this one tries again at the next interval", err=True)
        return True  # the store is fine: no need to open it again
    except (duckdb.Error, StoreError) as exc:
        message = f"maintenance of {store.path} failed: {redacted(str(exc).splitlines()[0])}"
        if stop_on_error:
            raise click.ClickException(message + " (run it again; nothing was lost)") from None
        click.echo(f"{message}; retrying at the next interval", err=True)
        return False
    return True
