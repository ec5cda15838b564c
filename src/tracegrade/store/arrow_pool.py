"""Which allocator Arrow uses in the receiver's processes.

pyarrow's Linux wheels allocate through mimalloc by default, which keeps freed pages in its heaps for
reuse. The receiver builds an Arrow table per export request and drops it once committed, so what
mimalloc keeps adds up: at the ingest peak it held several times the live Arrow data resident.

* The receiver allocates through Arrow's bundled jemalloc, which returns pages unused for
  ``RECEIVER_DECAY_MS`` to the system: a lower peak than on mimalloc at the same CPU time. Returning them
  at once (no decay) costs much more CPU. pyarrow builds without jemalloc keep their default.
* The trajectory mapping process allocates through the C library's malloc, on which its peak is lower.

Figures: bench/RESULTS.md, bench_ingest.

Library users' processes are left alone.
"""

from __future__ import annotations

import pyarrow as pa

__all__ = ["RECEIVER_DECAY_MS", "use_receiver_allocator", "use_system_allocator"]

RECEIVER_DECAY_MS = 1000


def use_receiver_allocator() -> None:
    """Make Arrow's jemalloc, returning pages after ``RECEIVER_DECAY_MS``, this process's default pool."""
    try:
        pool = pa.jemalloc_memory_pool()
    except NotImplementedError:
        return  # this pyarrow was built without jemalloc
    pa.jemalloc_set_decay_ms(RECEIVER_DECAY_MS)
    pa.set_memory_pool(pool)


def use_system_allocator() -> None:
    """Make the C library's malloc the default Arrow memory pool of this process."""
    pa.set_memory_pool(pa.system_memory_pool())
