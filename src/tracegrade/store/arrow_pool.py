"""Which allocator Arrow uses in tracegrade's own long-running processes (the receiver and its child).

pyarrow's Linux wheels allocate through mimalloc, which keeps the pages freed in each thread's heap for
reuse. The receiver builds Arrow batches on its decode threads and frees them on the store writer's
thread, so those heaps only grow: under a 200,000-span load the system allocator kept the receiver's
peak RSS about 100 MB lower (in-process measurement, gRPC, two runs each: 476 / 494 MB against
596 / 583 MB). Library users' processes are left alone: only ``tracegrade serve`` calls this.
"""

from __future__ import annotations

import pyarrow as pa

__all__ = ["use_system_allocator"]


def use_system_allocator() -> None:
    """Make the C library's malloc the default Arrow memory pool of this process."""
    pa.set_memory_pool(pa.system_memory_pool())
