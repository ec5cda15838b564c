"""The temp directories a lake store's DuckDB connections spill to: one per connection, under the system's temp
directory (TMPDIR), removed when the connection closes or the process exits.

A process killed (SIGKILL, the OOM killer, a power cut) removes nothing, and spill files can be hundreds of MB. So
each directory holds an owner file that its process keeps locked (``flock``) while the connection is open: the lock
goes with the process however it ends, and a store that opens removes the directories whose lock it can take
(``remove_abandoned``), never one whose owner lives (another receiver on the machine may be spilling into it). A
lock, not a pid in the name: pids are reused, and processes in other pid namespaces share one /tmp.
"""

from __future__ import annotations

import atexit
import fcntl
import os
import shutil
import tempfile
import threading
from pathlib import Path

__all__ = ["SPILL_PREFIX", "new_spill_directory", "remove_abandoned", "remove_spill_directory"]

SPILL_PREFIX = "tracegrade-lake-spill-"
_OWNER = ".tracegrade-owner"  # the lock file; directories without one (older tracegrade's) are left alone
_OPEN: dict[str, int] = {}  # the directories of connections not closed yet, each with its owner file's descriptor
_OPEN_LOCK = threading.Lock()


def new_spill_directory() -> str:
    """A new directory, private to this user (0700: spilled rows are trace data), its owner file locked."""
    spill = tempfile.mkdtemp(prefix=SPILL_PREFIX)
    try:
        # locked before it takes its name: a store opening meanwhile finds either no owner file or a locked one
        fd, locking = tempfile.mkstemp(dir=spill, prefix=".locking-")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            os.rename(locking, os.path.join(spill, _OWNER))
        except BaseException:
            os.close(fd)
            raise
    except BaseException:
        shutil.rmtree(spill, ignore_errors=True)
        raise
    with _OPEN_LOCK:
        _OPEN[spill] = fd
    return spill


def remove_spill_directory(spill: str) -> None:
    """Remove ``spill`` (its connection closed), then let go of its lock."""
    with _OPEN_LOCK:
        fd = _OPEN.pop(spill, None)
    shutil.rmtree(spill, ignore_errors=True)
    if fd is not None:
        os.close(fd)


@atexit.register
def _remove_open() -> None:
    # a process that ends without closing its store (DuckDB removes only its own files from a directory it did not
    # make) would leave one behind each run
    with _OPEN_LOCK:
        left = list(_OPEN)
    for spill in left:
        remove_spill_directory(spill)


def remove_abandoned() -> list[str]:
    """Remove this user's spill directories under the temp directory whose process is gone; the ones removed."""
    removed: list[str] = []
    root = Path(tempfile.gettempdir())
    try:
        entries = [entry for entry in os.scandir(root) if entry.name.startswith(SPILL_PREFIX)]
    except OSError:
        return removed  # no temp directory to look in: nothing was spilled there either
    for entry in entries:
        try:
            # a real directory of this user's (not a link another user planted in a shared /tmp)
            if not entry.is_dir(follow_symlinks=False) or entry.stat(follow_symlinks=False).st_uid != os.getuid():
                continue
        except OSError:
            continue  # removed meanwhile
        if _remove_if_abandoned(entry.path):
            removed.append(entry.path)
    return removed


def _remove_if_abandoned(spill: str) -> bool:
    with _OPEN_LOCK:
        if spill in _OPEN:  # this process's own: never taken by a lock where flock is per process (NFS emulates it)
            return False
    try:
        fd = os.open(os.path.join(spill, _OWNER), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False  # no owner file: whose it is cannot be told
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False  # its owner lives (in this process too: each open of the file locks apart)
        shutil.rmtree(spill, ignore_errors=True)
        return True
    finally:
        os.close(fd)
