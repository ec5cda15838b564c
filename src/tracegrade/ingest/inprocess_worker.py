"""One online-grading worker inside ``tracegrade serve`` (``--worker-rules rules.yaml``).

The worker runs on its own thread and event loop, so grading never blocks the receiver's loop. It uses
the server's store: queries run on their own cursors and the store's writes take the same write lock as
the StoreWriter thread, so the server stays the file's single writer and grading writes never interleave
with a span batch. On a lake, the job queue is in the catalog database, shared with every other worker.
After the store failed for a full disk, the worker writes nothing until the disk has room (``disk_room``): its
writes would fail the reopened store again.
Its ``tracegrade_worker_*`` metrics are on the receiver's /metrics and its health on /healthz/worker (see
``ReceiverServer``).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tracegrade.evaluation.worker import GradingWorker, WorkerRules
from tracegrade.evaluation.worker_metrics import BACKLOG_SECONDS, WorkerMetrics

__all__ = ["InProcessWorker", "start_inprocess_worker"]

log = logging.getLogger("tracegrade.worker")


class InProcessWorker:
    """A :class:`GradingWorker` looping on a daemon thread until :meth:`stop`."""

    def __init__(self, worker: GradingWorker) -> None:
        self.worker = worker
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tracegrade-grading-worker", daemon=True)

    def start(self) -> InProcessWorker:
        self._thread.start()
        self._started.wait()
        return self

    def _run(self) -> None:
        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()
            self._started.set()
            await self.worker.run_forever(self._stop)

        try:
            asyncio.run(main())
        except Exception:
            log.exception("the in-process grading worker stopped")
        finally:
            self._started.set()

    @property
    def metrics(self) -> WorkerMetrics:
        """What the worker counts; the receiver renders it on its /metrics and judges /healthz/worker by it."""
        return self.worker.metrics

    def stop(self, timeout: float = 30.0) -> None:
        """Finish the job in hand, then stop (before the store closes)."""
        if self._loop is not None and self._stop is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout)


def start_inprocess_worker(
    writer: Any,
    rules: WorkerRules | str | Path,
    metrics: WorkerMetrics | None = None,
    write_hold: Callable[[], str | None] | None = None,
    worker_id: str | None = None,
) -> InProcessWorker:
    """Start grading with ``rules`` against the store of ``writer`` (a started StoreWriter).

    ``metrics``: those of the worker the receiver ran before its store failed and was opened again, to go on
    counting in (the receiver's /metrics keep their series, and show the outage until a cycle completes).
    ``write_hold``: asked before each cycle, why the worker must write nothing now (see ``DiskRoom.shortage``).
    ``worker_id``: that of the worker before (None: a new one), whose leases the failure left in the store: this
    worker hands them back at its first cycle, and grades those jobs at once without spending an attempt of theirs.

    Raises ValueError / FileFormatError for bad rules before anything starts.
    """
    loaded = rules if isinstance(rules, WorkerRules) else WorkerRules.from_file(rules)
    if loaded.metrics_address is not None:
        log.info(
            "the worker rules' metrics_address (%s) is for `tracegrade worker`: the grading inside the receiver "
            "has its metrics on the receiver's /metrics and its health on /healthz/worker",
            loaded.metrics_address,
        )
    worker = GradingWorker(writer.store, loaded, worker_id=worker_id)
    if metrics is not None:  # before the thread starts: the worker's own, fresh ones are never seen
        metrics.add_rules((rule.tenant, rule.name) for rule in loaded.rules)
        metrics.stall = worker.metrics.stall  # the rules file is read again at each opening
        worker.metrics = metrics
    worker.write_hold = write_hold
    worker.watch_backlog(BACKLOG_SECONDS)
    return InProcessWorker(worker).start()
