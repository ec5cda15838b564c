"""``tracegrade build``: build the trajectories of a lake's settled traces, beside (or instead of) receivers."""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import click

from tracegrade.cli.common import friendly_errors
from tracegrade.cli.lake_options import checked_lake, lake_options
from tracegrade.cli.mapping_batch_option import mapping_batch_bytes_option
from tracegrade.cli.store_access import open_until_stopped

if TYPE_CHECKING:
    from tracegrade.store.backend import StoreBackend
    from tracegrade.store.rebuilder import TrajectoryRebuilder

__all__ = ["command"]

WATCH_SECONDS = 1.0  # how often a running builder checks that its lake is still usable


@click.command("build")
@lake_options
@click.option("--once", is_flag=True, help="Build every trace waiting now (due or not), then exit.")
@click.option(
    "--mapping-process/--no-mapping-process",
    default=False,
    show_default=True,
    help="Map large batches in a child process at low CPU priority.",
)
@mapping_batch_bytes_option
@friendly_errors
def command(location: str, lake_data: Path | None, once: bool, mapping_process: bool, mapping_batch_bytes: int) -> None:
    """Map a lake's settled traces into trajectory rows, claiming them from the build queue in its catalog.

    Any number of builders (these, and receivers that build) share the queue: each trace is claimed by
    one of them at a time, and a builder that dies leaves its claims to the others when their lease runs
    out. Receivers started with --no-build-trajectories leave all building to these. While the catalog
    or the data path is out of reach it waits and opens the lake again. SIGINT or SIGTERM stops it once
    the batch in progress is built.
    """
    data_path = checked_lake(location, lake_data, "build", "whose trajectories its receiver builds")
    from tracegrade.store.lake import LakeStore
    from tracegrade.store.lake_location import redacted

    if once:
        with LakeStore(location, data_path=data_path) as lake:
            rebuilder = _rebuilder(lake, mapping_process, mapping_batch_bytes)
            built = rebuilder.build_waiting()
        click.echo(
            f"built the trajectories of {built} trace{'s' if built != 1 else ''} "
            f"(spans mapped in {rebuilder.stats.mapping_batches} batch(es))"
        )
        return
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    click.echo(f"tracegrade build: building the trajectories of {redacted(location)} (stop with SIGTERM)")
    built = batches = 0
    while not stop.is_set():
        store = open_until_stopped(lambda: LakeStore(location, data_path=data_path), stop.wait)
        if store is None:
            break
        rebuilder = _rebuilder(store, mapping_process, mapping_batch_bytes)
        rebuilder.start()
        while not stop.wait(WATCH_SECONDS) and store.failure is None:
            pass
        rebuilder.stop(drain=False)
        built, batches = built + rebuilder.stats.traces_rebuilt, batches + rebuilder.stats.rebuild_batches
        if store.failure is not None:
            click.echo(f"the lake failed ({store.failure}); opening it again", err=True)
        store.close()
    click.echo(f"built {built} trace(s) in {batches} batch(es)")


def _rebuilder(store: StoreBackend, mapping_process: bool, max_bytes: int) -> TrajectoryRebuilder:
    from tracegrade.store.mapping_process import MappingProcess
    from tracegrade.store.rebuilder import TrajectoryRebuilder

    mapping = MappingProcess() if mapping_process else MappingProcess(None)
    return TrajectoryRebuilder(store, mapping=mapping, max_bytes=max_bytes)
