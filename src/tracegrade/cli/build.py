"""``tracegrade build``: build the trajectories of a lake's settled traces, beside (or instead of) receivers."""

from __future__ import annotations

import signal
import threading
from pathlib import Path

import click

from tracegrade.cli.common import friendly_errors
from tracegrade.cli.lake_options import checked_lake, lake_options

__all__ = ["command"]


@click.command("build")
@lake_options
@click.option("--once", is_flag=True, help="Build every trace waiting now (due or not), then exit.")
@click.option(
    "--mapping-process/--no-mapping-process",
    default=False,
    show_default=True,
    help="Map large batches in a child process at low CPU priority.",
)
@friendly_errors
def command(location: str, lake_data: Path | None, once: bool, mapping_process: bool) -> None:
    """Map a lake's settled traces into trajectory rows, claiming them from the build queue in its catalog.

    Any number of builders (these, and receivers that build) share the queue: each trace is claimed by
    one of them at a time, and a builder that dies leaves its claims to the others when their lease runs
    out. Receivers started with --no-build-trajectories leave all building to these. SIGINT or SIGTERM
    stops it once the batch in progress is built.
    """
    data_path = checked_lake(location, lake_data, "build", "whose trajectories its receiver builds")
    from tracegrade.store.lake import LakeStore
    from tracegrade.store.mapping_process import MappingProcess
    from tracegrade.store.rebuilder import TrajectoryRebuilder

    store = LakeStore(location, data_path=data_path)
    try:
        mapping = MappingProcess() if mapping_process else MappingProcess(in_process_spans=None)
        rebuilder = TrajectoryRebuilder(store, mapping=mapping)
        if once:
            built = rebuilder.build_waiting()
            mapping.close()
            click.echo(f"built the trajectories of {built} trace{'s' if built != 1 else ''}")
            return
        stop = threading.Event()
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: stop.set())
        rebuilder.start()
        click.echo(f"tracegrade build: building trajectories of {store.path} (stop with Ctrl-C or SIGTERM)")
        stop.wait()
        rebuilder.stop(drain=False)
        stats = rebuilder.stats
        click.echo(f"built {stats.traces_rebuilt} trace(s) in {stats.rebuild_batches} batch(es)")
    finally:
        store.close()
