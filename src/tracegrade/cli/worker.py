"""``tracegrade worker``: keep grading traces as they complete, per the rules file."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import click

from tracegrade.cli.common import UsageProblem, friendly_errors, log_to_stderr
from tracegrade.cli.progress import ProgressBar
from tracegrade.cli.store_access import lake_data_option, open_until_stopped, open_writable_store, store_option
from tracegrade.errors import StoreError, StoreLockedError
from tracegrade.evaluation.worker import GradingWorker, WorkerRules
from tracegrade.evaluation.worker_endpoint import WorkerEndpoint, parse_listen_address
from tracegrade.evaluation.worker_metrics import BACKLOG_SECONDS

if TYPE_CHECKING:
    from tracegrade.store.backend import StoreBackend

__all__ = ["command"]


@click.command("worker")
@click.option("--rules", "rules_path", required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@store_option
@lake_data_option
@click.option("--once", is_flag=True, help="Run one enqueue/claim/grade cycle and exit.")
@click.option(
    "--worker-id",
    help="Name of this worker in job leases (default host:pid:random; one per running worker). A worker started "
    "again with its id hands back at once, without counting an attempt, the jobs it held when it stopped. On a lake, "
    "a worker given the id of one still running is refused (exit 2).",
)
@click.option(
    "--metrics-address",
    metavar="HOST:PORT",
    help="Serve Prometheus /metrics and /healthz here, e.g. 0.0.0.0:9464 (port 0: a free one); off by default. "
    "Also `metrics_address:` in the rules file; this option wins.",
)
@friendly_errors
def command(
    rules_path: Path,
    store_path: Path | str,
    lake_data: Path | None,
    once: bool,
    worker_id: str | None,
    metrics_address: str | None,
) -> None:
    """Grade settled traces through durable jobs with leases kept in the store.

    The worker opens the store file read-write; while `tracegrade serve` holds it, run the worker inside
    the server instead (`tracegrade serve --worker-rules RULES`). On a lake (with --lake-data), workers on
    any number of machines share its jobs, which live in the lake's catalog database. A store that fails
    under a running worker (a lake's catalog or data path out of reach) is opened again, and grading goes on.
    With --metrics-address, the worker serves Prometheus metrics on /metrics and its health on /healthz (503
    with the reason while no cycle completes or the store is out of reach).
    """
    rules = WorkerRules.from_file(rules_path)
    if once and metrics_address is not None:
        raise UsageProblem("--metrics-address serves a worker that keeps running; --once runs one cycle and exits")
    if isinstance(store_path, Path) and not store_path.exists():
        raise UsageProblem(f"store not found: {store_path} (start `tracegrade serve --store {store_path}` first)")
    address = None if once else metrics_address or rules.metrics_address
    # bound first: a bad address or a port in use stops the worker at start, not after it opened the store
    endpoint = WorkerEndpoint(parse_listen_address(address)) if address else None
    try:
        _grade(rules, rules_path, store_path, lake_data, once, worker_id, endpoint)
    finally:
        if endpoint is not None:
            endpoint.stop()


def _grade(
    rules: WorkerRules,
    rules_path: Path,
    store_path: Path | str,
    lake_data: Path | None,
    once: bool,
    worker_id: str | None,
    endpoint: WorkerEndpoint | None,
) -> None:
    """Open the store and grade: one cycle (``once``), or until stopped, serving metrics at ``endpoint``."""
    open_store = functools.partial(open_writable_store, store_path, lake_data, "grading")
    try:
        store = open_store()
    except StoreLockedError as exc:
        raise UsageProblem(
            f"{exc}; to grade while serving, use `tracegrade serve --worker-rules {rules_path}`"
        ) from None
    try:
        try:
            worker = GradingWorker(store, rules, worker_id=worker_id)
        except ValueError as exc:
            raise UsageProblem(f"{rules_path}: {exc}") from None
        worker.hold_id()  # a worker given the id of one still running stops here, before it touches a job
        if endpoint is not None:
            endpoint.start(worker.metrics)
            worker.watch_backlog(BACKLOG_SECONDS)
    except BaseException:
        store.close()
        raise
    if once:
        try:
            ran = asyncio.run(worker.run_once())
            click.echo(f"ran {ran} job(s); jobs by status: {worker.job_counts()}")
        finally:
            store.close()
        return
    log_to_stderr()
    if endpoint is not None:
        click.echo(f"worker metrics on {endpoint.url}/metrics, health on {endpoint.url}/healthz", err=True)
    asyncio.run(_serve(worker, store, open_store))


async def _serve(worker: GradingWorker, store: StoreBackend, open_store: Callable[[], StoreBackend]) -> None:
    """Grade until SIGINT/SIGTERM; a store that fails is closed and opened again (retrying while it is out
    of reach), and the same worker (its leases are its own) goes on with it."""
    stop = asyncio.Event()
    stopping = threading.Event()  # the same, for the thread that opens the store again
    loop = asyncio.get_running_loop()

    def request_stop() -> None:
        stop.set()
        stopping.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, request_stop)
    click.echo(f"worker {worker.worker_id} grading; stop with Ctrl-C", err=True)
    with ProgressBar("grading jobs", unit="jobs") as bar:
        watcher = asyncio.create_task(_show_backlog(worker, bar, stop))
        while True:
            try:
                await worker.run_forever(stop)
            finally:
                store.close()
            if stop.is_set():
                break
            click.echo(f"the store failed ({store.failure}); opening it again", err=True)
            reopened = await loop.run_in_executor(None, open_until_stopped, open_store, stopping.wait)
            if reopened is None:
                break
            store = reopened
            worker.use_store(store)
        stop.set()
        await watcher


async def _show_backlog(worker: GradingWorker, bar: ProgressBar, stop: asyncio.Event) -> None:
    """Every second, the jobs finished (done or failed) out of all jobs enqueued so far."""
    while bar.active and not stop.is_set():
        try:
            counts = worker.job_counts()
        except StoreError:  # the store is out of reach: the worker opens it again
            counts = {}
        bar.update(counts.get("done", 0) + counts.get("failed", 0), sum(counts.values()))
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(stop.wait(), 1.0)
