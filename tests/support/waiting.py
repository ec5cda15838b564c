"""Polling until something another thread or process does becomes visible (no fixed sleeps in tests)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

__all__ = ["wait_for_value", "wait_until"]

T = TypeVar("T")


def wait_until(
    condition: Callable[[], object],
    what: str,
    timeout: float = 30.0,
    interval: float = 0.05,
    *,
    explain: Callable[[], str] | None = None,
) -> None:
    """Poll ``condition`` until it is true; after ``timeout`` seconds fail, saying ``what`` never happened.

    ``explain`` is called only on failure, for what the failure message should carry besides (a server's log, its
    metrics): a wait that runs out in CI is otherwise hard to tell from a slow machine.
    """
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            message = f"timed out after {timeout:g}s waiting for {what}"
            raise AssertionError(f"{message}\n{_explained(explain)}" if explain is not None else message)
        time.sleep(interval)


def _explained(explain: Callable[[], str]) -> str:
    try:
        return explain()
    except Exception as exc:  # the timeout is the failure to report, not this
        return f"(could not say more: {exc!r})"


def wait_for_value(read: Callable[[], T], expected: T, what: str, timeout: float = 30.0, interval: float = 0.2) -> T:
    """Poll ``read()`` until it returns ``expected``; after ``timeout`` seconds fail with the last value.

    An exception from ``read`` counts as "not yet" (a table may appear only with a worker's first cycle) and
    is reported as the last value if it never clears.
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            last: object = read()
        except Exception as exc:
            last = exc
        if last == expected:
            return expected
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} gave {last!r} after {timeout:g}s, expected {expected!r}")
        time.sleep(interval)
