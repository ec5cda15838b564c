"""The rebuilder's pacing under a burst: its writer's backlog, and the machine's processors (/proc/stat)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tracegrade.store import TraceStore
from tracegrade.store.cpu_load import CpuLoad
from tracegrade.store.rebuilder import REBUILD_MIN_INTERVAL, REBUILD_SATURATED_INTERVAL, TrajectoryRebuilder

WINDOW = 0.3


class ProcStat:
    """A /proc/stat file whose aggregate line the test advances: ``busy`` and ``idle`` ticks per step."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.user = self.idle = self.iowait = 0
        self._write()

    def advance(self, busy: int, idle: int, iowait: int = 0) -> None:
        self.user, self.idle, self.iowait = self.user + busy, self.idle + idle, self.iowait + iowait
        self._write()

    def _write(self) -> None:
        self.path.write_text(
            f"cpu  {self.user} 0 0 {self.idle} {self.iowait} 0 0 0 0 0\ncpu0 1 0 0 1 0 0 0 0 0 0\nintr 12 3\n"
        )


def _after_window(load: CpuLoad) -> bool | None:
    time.sleep(WINDOW * 1.2)
    return load.saturated()


def test_the_load_is_judged_over_a_whole_recent_window(tmp_path: Path) -> None:
    stat = ProcStat(tmp_path / "stat")
    load = CpuLoad(stat.path, window_seconds=WINDOW)
    stat.advance(busy=950, idle=50)
    assert load.saturated() is None  # no window has ended yet
    assert _after_window(load) is True
    stat.advance(busy=500, idle=300, iowait=200)  # waiting for the disk is idle time
    assert load.saturated() is True  # the verdict stands until the next window ends ...
    assert _after_window(load) is False  # ... then the new one counts
    stat.advance(busy=1000, idle=0)
    time.sleep(WINDOW * 2.5)  # a reference this old would average in a long-gone load: measure anew
    assert load.saturated() is None
    stat.advance(busy=99, idle=1)
    assert _after_window(load) is True


def test_without_readable_counters_the_machine_never_counts_as_saturated(tmp_path: Path) -> None:
    load = CpuLoad(tmp_path / "absent", window_seconds=WINDOW)
    assert _after_window(load) is False
    for garbled in ("not a stat file\n", "cpu  12 x 3 4 5 6 7 8\n"):
        (tmp_path / "garbled").write_text(garbled)
        assert _after_window(CpuLoad(tmp_path / "garbled", window_seconds=WINDOW)) is False


@pytest.mark.parametrize(
    ("behind", "busy", "spacing"),
    [
        (True, 95, REBUILD_SATURATED_INTERVAL),  # a backlog on saturated processors: claims spaced the most
        (True, 50, REBUILD_MIN_INTERVAL),  # a backlog, idle processors: spaced as before
        (False, 95, None),  # no backlog: the queue alone decides, however busy the machine
    ],
)
def test_claims_are_spaced_by_the_backlog_and_the_machines_load(
    tmp_path: Path, behind: bool, busy: int, spacing: float | None
) -> None:
    stat = ProcStat(tmp_path / "stat")
    with TraceStore(tmp_path / "store.duckdb") as store:
        # the window starts once the store is open: opening it on a busy machine must not age the reference
        load = CpuLoad(stat.path, window_seconds=WINDOW)
        rebuilder = TrajectoryRebuilder(store, behind=lambda: behind, cpu_load=load)
        rebuilder._last_claim = time.monotonic()
        stat.advance(busy=busy, idle=100 - busy)
        time.sleep(WINDOW * 1.2)
        wait = rebuilder._wait_seconds()
    if spacing is None:
        assert wait <= 1.0  # nothing is due in an empty store: the idle poll
    else:
        assert spacing - 1.0 < wait <= spacing


def test_no_claim_is_made_under_a_backlog_before_the_load_is_known(tmp_path: Path) -> None:
    # a window longer than the idle poll and no claim for long: only not knowing the load makes it wait
    load = CpuLoad(ProcStat(tmp_path / "stat").path, window_seconds=5.0)
    with TraceStore(tmp_path / "store.duckdb") as store:
        assert TrajectoryRebuilder(store, behind=lambda: True, cpu_load=load)._wait_seconds() >= 5.0
        assert TrajectoryRebuilder(store, behind=lambda: False, cpu_load=load)._wait_seconds() <= 1.0
