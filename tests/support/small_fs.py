"""A small real filesystem for disk-full tests: a tmpfs mounted for the test (CI runs as root).

``fill(mount)`` takes every free byte with a filler file, ``free(mount)`` gives it back, so a test can
make the disk full and then not full again while a real process writes to it.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

__all__ = ["fill", "free", "small_filesystem"]

_FILLER = ".filler"


@contextlib.contextmanager
def small_filesystem(directory: Path, size: str) -> Iterator[Path]:
    """Mount a tmpfs of ``size`` (e.g. ``"32m"``) on ``directory`` for the duration of the block."""
    directory.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(directory)], check=True)
    try:
        yield directory
    finally:
        subprocess.run(["umount", "-l", str(directory)], check=False)


def fill(mount: Path, leave: int = 0) -> None:
    """Take all free space of the filesystem at ``mount`` but ``leave`` bytes."""
    stats = os.statvfs(mount)
    free_bytes = stats.f_bavail * stats.f_frsize - leave
    with open(mount / _FILLER, "ab") as filler:
        chunk = b"\0" * (1 << 20)
        while free_bytes > 0:
            try:
                filler.write(chunk[: min(len(chunk), free_bytes)])
                filler.flush()
            except OSError:
                break
            free_bytes -= len(chunk)


def free(mount: Path) -> None:
    """Give back the space ``fill`` took."""
    (mount / _FILLER).unlink(missing_ok=True)
