"""QueryControl: stop one running store query from another thread (a time limit, a client gone, shutdown).

DuckDB checks for an interrupt between the chunks it processes, so ``cancel`` stops even a runaway cross
join within milliseconds; the query then fails with :class:`~tracegrade.errors.QueryCancelled` naming why.
DuckDB drops an interrupt that reaches a cursor before its statement starts executing (while the store prepares
it), so a cancelled control interrupts its cursor again every ``REINTERRUPT_SECONDS`` until the query is over.
``max_rows`` caps the rows fetched: DuckDB streams a result, so rows past the cap are never produced, and a
result with more is returned cut, marked ``truncated``. ``max_bytes`` caps what the fetched rows hold (their text
and bytes, about what their JSON answer takes), so a few huge values cannot fill the process's memory either.
"""

from __future__ import annotations

import threading
from typing import Any

__all__ = ["REINTERRUPT_SECONDS", "QueryControl", "value_bytes"]

REINTERRUPT_SECONDS = 0.05


class QueryControl:
    """Handed to ``TraceStore.query``; ``cancel(reason)`` interrupts the query it runs (or refuses it
    before it starts). ``timeout`` seconds after it starts, the store cancels the query itself; at most
    ``max_rows`` rows come back, holding at most about ``max_bytes`` (see ``value_bytes``; None: no cap)."""

    def __init__(
        self, timeout: float | None = None, *, max_rows: int | None = None, max_bytes: int | None = None
    ) -> None:
        self.timeout = timeout
        self.max_rows = max_rows
        self.max_bytes = max_bytes
        self.reason: str | None = None
        # given with the reason when the query was stopped through no fault of its own (its server closes the
        # store): the seconds after which it may be sent again
        self.retry_after: float | None = None
        self._cursor: Any = None
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None
        self._again: threading.Timer | None = None  # the next interrupt of a cancelled query

    def attach(self, cursor: Any) -> bool:
        """The query starts on ``cursor``; False if it was cancelled already (do not run it)."""
        with self._lock:
            if self.reason is not None:
                return False
            self._cursor = cursor
            if self.timeout is not None:
                reason = f"it ran longer than its time limit of {self.timeout:g} s (--query-timeout)"
                self._timer = threading.Timer(self.timeout, self.cancel, (reason,))
                self._timer.daemon = True
                self._timer.start()
            return True

    def detach(self) -> None:
        """The query is over (finished, failed or interrupted)."""
        with self._lock:
            self._cursor = None
            for timer in (self._timer, self._again):
                if timer is not None:
                    timer.cancel()
            self._timer = self._again = None

    def cancel(self, reason: str, retry_after: float | None = None) -> None:
        """Stop the query (the first reason given is the one reported, with its ``retry_after``)."""
        with self._lock:
            if self.reason is None:
                self.reason = reason
                self.retry_after = retry_after
            self._interrupt()

    def _interrupt(self) -> None:
        """Interrupt the attached cursor, and again after ``REINTERRUPT_SECONDS`` while it stays attached (the
        lock is held)."""
        if self._cursor is None:
            return
        self._cursor.interrupt()
        if self._again is None:
            self._again = threading.Timer(REINTERRUPT_SECONDS, self._interrupt_again)
            self._again.daemon = True
            self._again.start()

    def _interrupt_again(self) -> None:
        with self._lock:
            self._again = None
            self._interrupt()


_SCALAR_BYTES = 8  # a number, a boolean, a NULL, a date: what its JSON text takes, give or take


def value_bytes(value: Any) -> int:
    """About the bytes ``value`` (a fetched DuckDB value) takes as JSON: the length of its text or bytes, the sum
    over a list, struct or map. An estimate that grows with the value, which is what a memory cap needs."""
    if isinstance(value, str):
        return len(value) + 2
    if isinstance(value, (bytes, bytearray, memoryview)):
        return len(value) * 4 // 3 + 4  # sent as base64
    if isinstance(value, (list, tuple)):
        return sum(value_bytes(item) for item in value) + 2
    if isinstance(value, dict):
        return sum(value_bytes(key) + value_bytes(item) for key, item in value.items()) + 2
    return _SCALAR_BYTES
