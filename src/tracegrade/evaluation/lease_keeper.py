"""LeaseKeeper: renew a worker's leases on the jobs it is grading until it is done with them.

A lease is how the job queue tells a dead worker from a live one: a job whose lease ran out is taken over.
A live worker whose batch takes longer than the lease (a judge that stalls, a slow criterion) renews its
leases every so often, on a thread of its own so that a criterion holding the event loop cannot stop it,
and stops when the batch is done; a worker that died renews nothing, and its jobs are taken over as before.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from types import TracebackType

__all__ = ["LeaseKeeper"]

log = logging.getLogger("tracegrade.worker")


class LeaseKeeper:
    """Within ``with``, calls ``renew`` every ``every`` seconds on a daemon thread; a failed renewal is logged
    and tried again at the next turn (the leases may still run out: the queue then gives the jobs to another
    worker, and only the new holder's results finish them)."""

    def __init__(self, renew: Callable[[], object], every: float) -> None:
        self._renew = renew
        self._every = every
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tracegrade-lease-keeper", daemon=True)

    def __enter__(self) -> LeaseKeeper:
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self._done.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._done.wait(self._every):
            try:
                self._renew()
            except Exception as exc:  # the store or catalog may be briefly away: try again at the next turn
                log.warning("renewing the leases of the jobs in hand failed: %s", exc)
