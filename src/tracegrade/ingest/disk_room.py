"""Room on the disk of a store that failed for want of it: the receiver's grading worker waits for it.

DuckDB invalidates a database whose write or checkpoint failed, and the receiver then reopens the store and
replays its journal (``ReceiverServer``). On a full disk the reopening itself usually succeeds: the replay is
small and fits in the blocks the failed checkpoint left free. The in-process worker's next write (a claim, a batch
of results) did not fit, failed the store again, and the receiver reopened it again: a receiver with
``--worker-rules`` on a full disk reopened its store every second or two for as long as the disk stayed full,
refusing exports and cancelling queries at each reopening, and spending an attempt of every job whose results
could not be written. The trajectory rebuilder's next build did the same (a lake's builds of the traces queued
before the disk filled failed every reopened lake, with or without ``--worker-rules``). So once the store failed
for a full disk, :class:`DiskRoom` says the worker and the rebuilder must not write until the store's filesystem
has ``WORKER_ROOM_BYTES`` free again (a tenth of a smaller filesystem). It reads the
free space (``statvfs``, no probe write) when the worker asks, before each of its cycles; exports are journaled
and stored meanwhile as far as the disk allows.
"""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import Callable
from pathlib import Path

__all__ = ["WORKER_ROOM_BYTES", "WORKER_ROOM_SHARE", "DiskRoom", "says_disk_full"]

# What a grading cycle may need to write: its claim, a batch of results and the blocks DuckDB's checkpoint
# rewrites around them (whole row groups of the jobs and results tables) fit many times over. A receiver whose
# disk has less than this left after a full-disk failure would fail again at the worker's next batch. A small
# filesystem is asked for a share of its size instead, so that grading is not held for good on one.
WORKER_ROOM_BYTES = 16 * 1024 * 1024
WORKER_ROOM_SHARE = 0.1

# how a full disk reads in a failure's text: DuckDB's "Could not write file ...: No space left on device", an
# OSError's "[Errno 28] ...", and a quota that ran out
_FULL_DISK_TEXTS = tuple(os.strerror(code) for code in (errno.ENOSPC, errno.EDQUOT))


def says_disk_full(reason: str) -> bool:
    """Whether a store's failure ``reason`` is a full disk (or an exhausted quota)."""
    return any(text in reason for text in _FULL_DISK_TEXTS)


def _free_and_size(directory: Path) -> tuple[int, int]:
    """The bytes free (to an unprivileged writer) and the size of the filesystem holding ``directory``."""
    stats = os.statvfs(directory)
    return stats.f_bavail * stats.f_frsize, stats.f_blocks * stats.f_frsize


class DiskRoom:
    """Whether the disk under ``directory`` (the store file's, or a lake's data path) has room for the grading
    worker's writes: kept by the receiver across the reopenings of its store, asked by each worker it starts.

    ``room`` reads the free space and the size of the filesystem holding a directory (``statvfs``)."""

    def __init__(self, directory: Path, room: Callable[[Path], tuple[int, int]] = _free_and_size) -> None:
        self.directory = directory
        self._room = room
        self._full: str | None = None  # the failure that said the disk is full, until it has room again
        self._lock = threading.Lock()  # the receiver's loop marks, the worker's thread asks

    def store_failed(self, reason: str) -> None:
        """The store failed for ``reason``: when that is a full disk, the worker waits for room from now on."""
        if says_disk_full(reason):
            with self._lock:
                self._full = reason

    def shortage(self) -> str | None:
        """Why the worker must not write now (the store failed for a full disk, which still lacks room), or None."""
        with self._lock:
            if self._full is None:
                return None
            try:
                free, size = self._room(self.directory)
            except OSError as exc:  # the directory unreadable: no sign of room, so no write that could fail the store
                return f"the free space of {self.directory} cannot be read ({exc}) since the store failed: {self._full}"
            needed = min(WORKER_ROOM_BYTES, int(size * WORKER_ROOM_SHARE))
            if free < needed:
                return (
                    f"the disk holding the store has {free // 1024} KiB free, less than the {needed // 1024} KiB "
                    f"grading waits for, since the store failed for a full disk ({self._full}); free space in "
                    f"{self.directory} and grading goes on by itself"
                )
            self._full = None  # the worker says in its log that it writes again
            return None
