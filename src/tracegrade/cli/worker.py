"""``tracegrade worker``: keep grading traces as they complete, per the rules file."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from pathlib import Path

import click

from tracegrade.cli.common import UsageProblem, friendly_errors
from tracegrade.cli.progress import ProgressBar
from tracegrade.cli.store_access import lake_data_option, open_writable_store, store_option
from tracegrade.errors import StoreLockedError
from tracegrade.evaluation.worker import GradingWorker, WorkerRules

__all__ = ["command"]


@click.command("worker")
@click.option("--rules", "rules_path", required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@store_option
@lake_data_option
@click.option("--once", is_flag=True, help="Run one enqueue/claim/grade cycle and exit.")
@click.option("--worker-id", help="Name of this worker in job leases (default host:pid:random).")
@friendly_errors
def command(
    rules_path: Path, store_path: Path | str, lake_data: Path | None, once: bool, worker_id: str | None
) -> None:
    """Grade settled traces through durable jobs with leases kept in the store.

    The worker opens the store file read-write; while `tracegrade serve` holds it, run the worker inside
    the server instead (`tracegrade serve --worker-rules RULES`). On a lake (with --lake-data), workers on
    any number of machines share its jobs, which live in the lake's catalog database.
    """
    rules = WorkerRules.from_file(rules_path)
    if isinstance(store_path, Path) and not store_path.exists():
        raise UsageProblem(f"store not found: {store_path} (start `tracegrade serve --store {store_path}` first)")
    try:
        store = open_writable_store(store_path, lake_data, "grading")
    except StoreLockedError as exc:
        raise UsageProblem(
            f"{exc}; to grade while serving, use `tracegrade serve --worker-rules {rules_path}`"
        ) from None
    try:
        try:
            worker = GradingWorker(store, rules, worker_id=worker_id)
        except ValueError as exc:
            raise UsageProblem(f"{rules_path}: {exc}") from None
        if once:
            ran = asyncio.run(worker.run_once())
            click.echo(f"ran {ran} job(s); jobs by status: {worker.job_counts()}")
            return
        asyncio.run(_serve(worker))
    finally:
        store.close()


async def _serve(worker: GradingWorker) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    click.echo(f"worker {worker.worker_id} grading; stop with Ctrl-C", err=True)
    with ProgressBar("grading jobs", unit="jobs") as bar:
        watcher = asyncio.create_task(_show_backlog(worker, bar, stop))
        await worker.run_forever(stop)
        await watcher


async def _show_backlog(worker: GradingWorker, bar: ProgressBar, stop: asyncio.Event) -> None:
    """Every second, the jobs finished (done or failed) out of all jobs enqueued so far."""
    while bar.active and not stop.is_set():
        counts = worker.job_counts()
        bar.update(counts.get("done", 0) + counts.get("failed", 0), sum(counts.values()))
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(stop.wait(), 1.0)
