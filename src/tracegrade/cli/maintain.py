"""``tracegrade maintain``: compact a lake store (merge small files, expire snapshots, delete old files)."""

from __future__ import annotations

import signal
import threading
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import click

from tracegrade.cli.common import Duration, friendly_errors
from tracegrade.cli.lake_options import checked_lake, lake_options

if TYPE_CHECKING:
    from tracegrade.store.lake import LakeStore

__all__ = ["command"]


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
@friendly_errors
def command(location: str, lake_data: Path | None, every: timedelta | None, keep: timedelta) -> None:
    """Merge a lake's small Parquet files, flush inlined rows, expire old snapshots and delete old files.

    Safe while receivers write: each step is a DuckLake commit, retried when it races theirs. With
    --every, SIGINT or SIGTERM stops it once the pass in progress is done. A DuckDB
    store file needs none of this (it checkpoints itself), so a file store is refused.
    """
    data_path = checked_lake(location, lake_data, "maintain", "which needs no maintenance (it checkpoints itself)")
    interval = every.total_seconds() if every else None

    from tracegrade.store.lake import LakeStore

    store = LakeStore(location, data_path=data_path)
    try:
        if interval is None:
            _one_pass(store, keep, stop_on_error=True)
            return
        stop = threading.Event()
        for signum in (signal.SIGINT, signal.SIGTERM):  # stop after the pass in progress, not inside a commit
            signal.signal(signum, lambda *_: stop.set())
        while not stop.is_set():
            _one_pass(store, keep, stop_on_error=False)
            stop.wait(interval)
    finally:
        store.close()


def _one_pass(store: LakeStore, keep: timedelta, *, stop_on_error: bool) -> None:
    """One pass, its summary on stdout; a failed step (a lost race, the catalog away) fails a single run
    and is reported and retried at the next interval by ``--every``."""
    import duckdb

    from tracegrade.store.lake_location import redacted

    try:
        done = store.maintain(keep=keep)
    except duckdb.Error as exc:
        message = f"maintenance of {store.path} failed: {redacted(str(exc).splitlines()[0])}"
        if stop_on_error:
            raise click.ClickException(message + " (run it again; nothing was lost)") from None
        click.echo(f"{message}; retrying at the next interval", err=True)
        return
    click.echo(done.summary())
