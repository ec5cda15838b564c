"""How busy the machine's processors have been lately, read from Linux's ``/proc/stat``.

The rebuilder paces trajectory builds by its writer's backlog, which one process can see; whether the
processors have any idle time left is what it cannot see from its own threads: two receivers (or a
receiver and the exporters feeding it) on one machine each see only their own backlog. Where there is no
``/proc/stat`` (macOS, Windows) the load is unknown and never counts as saturated.
"""

from __future__ import annotations

import time
from pathlib import Path

__all__ = ["SATURATED_SHARE", "WINDOW_SECONDS", "CpuLoad"]

# busy share of all processors' time over the last window from which the machine counts as saturated
SATURATED_SHARE = 0.9
WINDOW_SECONDS = 1.0  # shorter windows measure scheduler noise, not load
_PROC_STAT = Path("/proc/stat")


class CpuLoad:
    """Whether the machine's processors were saturated over a recent window of ``window_seconds`` or more."""

    def __init__(self, source: Path = _PROC_STAT, window_seconds: float = WINDOW_SECONDS) -> None:
        self._source = source
        self.window_seconds = window_seconds
        self._taken = time.monotonic()
        self._ticks = self._read()
        self._verdict: bool | None = None  # of the window that ended at ``_taken``

    def saturated(self) -> bool | None:
        """Were the processors busy for at least ``SATURATED_SHARE`` of the latest window? None while no
        window ended within the last ``window_seconds`` (one starts then: ask again after it); False where
        the counters cannot be read."""
        now = time.monotonic()
        age = now - self._taken
        if age < self.window_seconds:
            return self._verdict
        ticks = self._read()
        fresh = age <= 2 * self.window_seconds  # an older reference would average in how busy it was long ago
        if fresh and ticks is not None and self._ticks is not None and ticks[1] > self._ticks[1]:
            self._verdict = (ticks[0] - self._ticks[0]) / (ticks[1] - self._ticks[1]) >= SATURATED_SHARE
        else:  # a stale reference: measure from now on (no counters to read: never saturated)
            self._verdict = None if ticks is not None else False
        self._taken, self._ticks = now, ticks
        return self._verdict

    def _read(self) -> tuple[int, int] | None:
        """(busy, total) clock ticks of all processors since boot, from the aggregate ``cpu`` line."""
        try:
            with self._source.open() as stat:
                fields = stat.readline().split()
        except OSError:
            return None
        if len(fields) < 6 or fields[0] != "cpu" or not all(value.isdigit() for value in fields[1:9]):
            return None
        # user nice system idle iowait irq softirq steal (guest time is already counted in user)
        ticks = [int(value) for value in fields[1:9]]
        idle = ticks[3] + ticks[4]
        total = sum(ticks)
        return total - idle, total
