"""Build queues: which traces wait for their trajectory to be (re)built, when each is due, who builds it.

A trace is one tenant's (``TraceKey``: tenant, trace id): two tenants' traces with one id are two builds.

Every store keeps one (``store.builds``), marked by the store's own writes, and the rebuilder claims
from it. A trace is due ``settle_seconds`` after its last record, or ``root_settle_seconds`` when its
root span (one without a parent, which an agent ends and exports last) came in that write. A claim
carries the ``updated_at`` its rows get, stamped after every write it must include; finishing it drops
its traces, unless they were marked again while being built (a late span): they are then due again.

``LocalBuildQueue`` is the DuckDB file's: in memory (one process writes the file), at most ``capacity``
traces; a trace marked while it is full is left out and read back from the store's own record of stale
trajectories (``stale_trajectories``) once the queue has drained. The lake's queue lives in its catalog
(``lake_builds``), so any process may build any trace.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from tracegrade.errors import StoreError
from tracegrade.store.tenancy import TraceKey

__all__ = ["DEFAULT_CAPACITY", "BuildClaim", "BuildQueue", "LocalBuildQueue"]

# traces waiting for a rebuild kept in memory (about 150 bytes each); beyond it the store's own record
# of stale traces takes over
DEFAULT_CAPACITY = 100_000


@dataclass(slots=True)
class BuildClaim:
    """Traces one builder maps now, with the ``updated_at`` their rows get; ``token`` is the queue's own."""

    keys: list[TraceKey]
    updated_at: datetime
    token: object = field(default=None, repr=False)

    def __len__(self) -> int:
        return len(self.keys)


class BuildQueue(Protocol):
    """The traces of one store that wait for a build (see the module docstring)."""

    settle_seconds: float
    root_settle_seconds: float

    def configure(self, *, settle_seconds: float, root_settle_seconds: float, capacity: int) -> None:
        """Set the settle delays (and, for an in-memory queue, how many traces it keeps)."""

    def mark(self, keys: Sequence[TraceKey], rooted: set[TraceKey]) -> None:
        """Traces that gained records in a write just committed (``rooted``: their root span among them)."""

    def claim(self, limit: int, *, due_only: bool = True) -> BuildClaim | None:
        """Up to ``limit`` due traces (any waiting trace when not ``due_only``), or None."""

    def claim_traces(self, keys: Sequence[TraceKey]) -> BuildClaim:
        """Exactly those traces, due or not (a build asked for by name)."""

    def finish(self, claim: BuildClaim, *, built: bool) -> None:
        """The claim's rows are replaced (``built``), or its build failed: due again after the settle delay."""

    def seconds_until_due(self) -> float | None:
        """How long until a claim may find something (None: nothing is waiting that this queue knows of)."""

    def pending(self) -> int:
        """Traces waiting (an estimate for metrics)."""

    def recover(self) -> None:
        """At a writer's start: queue what an earlier process left unbuilt."""

    def close(self) -> None: ...


class LocalBuildQueue:
    """The in-memory queue of one DuckDB file. ``stamp`` gives ``updated_at`` values (under the store's
    write lock, so between two writes) and ``stale`` reads the store's stale traces, oldest first."""

    def __init__(self, stamp: Callable[[], datetime], stale: Callable[[int], list[TraceKey]]) -> None:
        self._stamp = stamp
        self._stale = stale
        self.settle_seconds = 1.0
        self.root_settle_seconds = 0.1
        self.capacity = DEFAULT_CAPACITY
        self.overflowed = False
        self._scan_after = float("-inf")  # no scan for stale traces before (after a failed one)
        # one queue per settle delay, so each stays in due order by appending alone
        self._queues: tuple[dict[TraceKey, float], dict[TraceKey, float]] = ({}, {})
        self._lock = threading.Lock()

    def configure(self, *, settle_seconds: float, root_settle_seconds: float, capacity: int) -> None:
        self.settle_seconds = settle_seconds
        self.root_settle_seconds = min(root_settle_seconds, settle_seconds)
        self.capacity = capacity

    def __len__(self) -> int:
        return sum(map(len, self._queues))

    def pending(self) -> int:
        return len(self)

    def mark(self, keys: Sequence[TraceKey], rooted: set[TraceKey]) -> None:
        now = time.monotonic()
        with self._lock:
            for key in keys:
                soon = key in rooted
                self._mark(key, now + (self.root_settle_seconds if soon else self.settle_seconds), soon=soon)

    def _mark(self, key: TraceKey, due: float, *, soon: bool) -> None:
        known = False
        for queue in self._queues:
            known = queue.pop(key, None) is not None or known
        if not known and len(self) >= self.capacity:
            self.overflowed = True  # the store still knows it is stale: read back once the queues drain
            return
        self._queues[0 if soon else 1][key] = due

    def recover(self) -> None:
        """Queue the traces the store knows are stale, as many as the queue keeps, oldest first.

        Raises StoreError when the store cannot be read.
        """
        stale = self._stale(self.capacity - len(self))
        now = time.monotonic()
        with self._lock:
            self.overflowed = False
            for key in stale:
                self._mark(key, now, soon=True)
            if len(self) >= self.capacity:
                self.overflowed = True

    def _drained_after_overflow(self) -> bool:
        return self.overflowed and not len(self)

    def seconds_until_due(self) -> float | None:
        with self._lock:
            if self._drained_after_overflow():
                at: float | None = self._scan_after
            else:
                heads = [next(iter(q.values())) for q in self._queues if q]
                at = min(heads) if heads else None
        return None if at is None else max(0.0, at - time.monotonic())

    def claim(self, limit: int, *, due_only: bool = True) -> BuildClaim | None:
        if self._drained_after_overflow() and time.monotonic() >= self._scan_after:
            try:
                self.recover()
            except StoreError:
                self._scan_after = time.monotonic() + self.settle_seconds
                raise
        now = None if not due_only else time.monotonic()
        with self._lock:
            due: list[TraceKey] = []
            for queue in self._queues:
                taken: list[TraceKey] = []
                for key, at in queue.items():
                    if len(due) + len(taken) == limit or (now is not None and at > now):
                        break
                    taken.append(key)
                for key in taken:
                    del queue[key]
                due += taken
        return BuildClaim(due, self._stamp()) if due else None

    def claim_traces(self, keys: Sequence[TraceKey]) -> BuildClaim:
        wanted = list(dict.fromkeys(keys))
        with self._lock:
            for queue in self._queues:
                for key in wanted:
                    queue.pop(key, None)
        return BuildClaim(wanted, self._stamp())

    def finish(self, claim: BuildClaim, *, built: bool) -> None:
        if built:
            return  # a trace marked while it was built is in the queue again, due after its new records
        due = time.monotonic() + self.settle_seconds
        with self._lock:
            for key in claim.keys:
                if not any(key in queue for queue in self._queues):
                    self._mark(key, due, soon=False)

    def close(self) -> None:
        pass
