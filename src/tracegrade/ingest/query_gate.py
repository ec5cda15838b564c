"""QueryGate: the receiver's limits on reads, the same for ``POST /v1/query``, the web UI and the CLI through it.

At most ``max_queries`` run at once (more wait up to ``timeout`` for a turn, then are refused retryably),
each is cancelled ``timeout`` seconds after it starts, and ``cancel_all`` stops every running one (shutdown,
a store being reopened). Runs on the calling thread (an executor thread of the receiver's loop).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from tracegrade.ingest.intake import Overloaded
from tracegrade.store.query_control import QueryControl
from tracegrade.store.results import QueryResult

__all__ = ["GatedStore", "QueryGate"]


class QueryGate:
    """Turns, time limits and the byte cap of results for the queries of one receiver."""

    def __init__(self, max_queries: int, timeout: float, max_bytes: int | None = None) -> None:
        self.max_queries = max_queries
        self.timeout = timeout
        self.max_bytes = max_bytes
        self._turns = threading.BoundedSemaphore(max_queries)
        self._running: set[QueryControl] = set()
        self._lock = threading.Lock()

    def run(
        self, store: Any, sql: str, params: Sequence[Any] | None = None, control: QueryControl | None = None
    ) -> QueryResult:
        """Run ``store.query`` within the limits; ``control`` (made here when None) may cancel it from elsewhere."""
        if not self._turns.acquire(timeout=self.timeout):
            raise Overloaded(
                f"{self.max_queries} queries have been running for {self.timeout:g} s (--max-queries); retry later",
                self.timeout,
            )
        control = control if control is not None else QueryControl(self.timeout)
        control.timeout = self.timeout if control.timeout is None else min(control.timeout, self.timeout)
        if self.max_bytes is not None:  # the receiver's memory is everyone's: no caller reads past its cap
            control.max_bytes = self.max_bytes if control.max_bytes is None else min(control.max_bytes, self.max_bytes)
        with self._lock:
            self._running.add(control)
        try:
            result: QueryResult = store.query(sql, params, control=control)
            return result
        finally:
            with self._lock:
                self._running.discard(control)
            self._turns.release()

    def cancel_all(self, reason: str) -> None:
        with self._lock:
            running = list(self._running)
        for control in running:
            control.cancel(reason)


class GatedStore:
    """A store whose ``query`` goes through a QueryGate (what the web UI reads through inside ``serve``)."""

    def __init__(self, store: Any, gate: QueryGate) -> None:
        self._store = store
        self._gate = gate

    def query(
        self, sql: str, params: Sequence[Any] | None = None, *, control: QueryControl | None = None
    ) -> QueryResult:
        return self._gate.run(self._store, sql, params, control)

    def __getattr__(self, name: str) -> Any:  # everything else (paths, closed, …) is the store's own
        return getattr(self._store, name)
