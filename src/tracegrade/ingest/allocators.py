"""Allocator settings of the ``tracegrade serve`` process: freed memory goes back to the system sooner.

The receiver's memory comes in waves: decoded requests, Arrow batches waiting on the write queue, DuckDB's
blocks between checkpoints. By default the allocators holding it keep what was freed for reuse, so the
process stays near its highest wave. ``tracegrade serve`` changes two of them before anything else loads:

* the C library's malloc (glibc): at most ``ARENA_MAX`` arenas instead of eight per core (each thread
  that allocates can otherwise get its own arena, each keeping its own free memory), and the top of a
  heap is returned once ``TRIM_THRESHOLD`` bytes are free there (the default threshold grows up to 32 MiB);
* pyarrow's mimalloc: freed pages are returned at once (``MIMALLOC_PURGE_DELAY=0``) instead of when the
  same heap is next busy. mimalloc reads the variable when pyarrow loads, so this must come first.

Measured with ``bench/bench_ingest.py`` (200,000 agent spans; peak RSS of the receiver plus its mapping
child; three runs per protocol, interleaved with the defaults; medians): OTLP/gRPC 588 against 690 MB,
OTLP/HTTP 599 against 619 MB (and 589 against 681 MB in a second set with the same settings made through
the environment). The cost is a little CPU for the memory given back and taken again: receiver CPU per
200,000 spans 13.5 against 13.0 s (gRPC) and 13.6 against 13.5 s (HTTP), within the run-to-run noise of
this 2-core machine; throughput stayed within its noise (19,600 against 21,300 spans/s over gRPC, 21,300
against 21,400 over HTTP). Once a burst is over the receiver keeps much less: while the trajectories of 200,000
spans were catching up after one, 393 MB instead of 576 MB (one run each). An environment that already
sets ``MALLOC_ARENA_MAX``, ``MALLOC_TRIM_THRESHOLD_`` or ``MIMALLOC_PURGE_DELAY`` keeps its own value.
Library users' processes are left alone: only ``serve`` calls :func:`return_freed_memory_sooner`.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import platform
import sys
from dataclasses import dataclass

__all__ = ["ARENA_MAX", "TRIM_THRESHOLD", "AllocatorSettings", "return_freed_memory_sooner"]

log = logging.getLogger(__name__)

ARENA_MAX = 2
TRIM_THRESHOLD = 1024 * 1024
# mallopt parameter numbers, from glibc's <malloc.h>
_M_TRIM_THRESHOLD = -1
_M_ARENA_MAX = -8


@dataclass(frozen=True)
class AllocatorSettings:
    """What :func:`return_freed_memory_sooner` changed; None where it left a setting alone."""

    arena_max: int | None
    trim_threshold: int | None
    mimalloc_purge_delay: str | None


def return_freed_memory_sooner() -> AllocatorSettings:
    """Apply the settings above to this process (call once, before pyarrow is imported); None in a field
    means that setting was left alone (set by the environment, not glibc, or pyarrow already loaded)."""
    arena_max = trim_threshold = None
    libc = _glibc()
    if libc is not None:
        if "MALLOC_ARENA_MAX" not in os.environ and libc.mallopt(_M_ARENA_MAX, ARENA_MAX) == 1:
            arena_max = ARENA_MAX
        if "MALLOC_TRIM_THRESHOLD_" not in os.environ and libc.mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1:
            trim_threshold = TRIM_THRESHOLD
    purge_delay = None
    if "pyarrow" not in sys.modules and "MIMALLOC_PURGE_DELAY" not in os.environ:
        os.environ["MIMALLOC_PURGE_DELAY"] = purge_delay = "0"  # child processes inherit it
    settings = AllocatorSettings(arena_max, trim_threshold, purge_delay)
    log.debug("allocator settings: %r", settings)
    return settings


def _glibc() -> ctypes.CDLL | None:
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return None
    name = ctypes.util.find_library("c") or "libc.so.6"
    try:
        return ctypes.CDLL(name)
    except OSError:
        return None
