"""glibc's two size thresholds, fixed in the receiver's process.

glibc serves an allocation from its own ``mmap`` (handed back to the system when freed) only when the heap
has no room for it and it is larger than the mmap threshold; and that threshold slides up to the size of
every such block freed, taking the trim threshold (how much free space the top of the heap may keep) to
twice that. After the first few requests, every OTLP/gRPC request body (about 1.3 MB for 512 agent spans)
is therefore carved out of the heap arenas, where the holes they leave are seldom handed back.
``tracegrade serve`` fixes the mmap threshold at ``RECEIVER_MMAP_THRESHOLD`` and the trim threshold at
glibc's default, which lowers the receiver's peak memory at the same speed. A lower mmap threshold saves
more memory but costs throughput, because DuckDB's and Arrow's mid-sized blocks then go through ``mmap``
too. Figures: bench/RESULTS.md, bench_ingest.

Other C libraries (musl) and library users' processes are left alone.
"""

from __future__ import annotations

import ctypes

__all__ = ["RECEIVER_MMAP_THRESHOLD", "RECEIVER_TRIM_THRESHOLD", "fix_malloc_thresholds"]

RECEIVER_MMAP_THRESHOLD = 1024 * 1024
RECEIVER_TRIM_THRESHOLD = 128 * 1024  # glibc's default
_M_TRIM_THRESHOLD = -1  # mallopt's parameter numbers (malloc.h)
_M_MMAP_THRESHOLD = -3


def fix_malloc_thresholds() -> bool:
    """Fix glibc's mmap and trim thresholds for this process from now on; False where the C library
    has no ``mallopt`` or refused a value."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, RECEIVER_MMAP_THRESHOLD)) and bool(
        mallopt(_M_TRIM_THRESHOLD, RECEIVER_TRIM_THRESHOLD)
    )
