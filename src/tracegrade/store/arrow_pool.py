"""Which allocator Arrow uses in the receiver's trajectory mapping process.

pyarrow's Linux wheels allocate through mimalloc, which keeps freed pages in its heaps for reuse. The
mapping process builds and drops a set of Arrow tables per job; on the C library's allocator its peak
RSS under a 200,000-span load was 96 MB instead of 118 MB. The receiver's own process stays on
mimalloc: there the system allocator saved no measurable memory (receiver peak RSS, medians of four
runs: 574 against 581 MB) and cost about 0.7 s more CPU per 200,000 spans (medians 11.8 against
11.0 s). Library users' processes are left alone.
"""

from __future__ import annotations

import pyarrow as pa

__all__ = ["use_system_allocator"]


def use_system_allocator() -> None:
    """Make the C library's malloc the default Arrow memory pool of this process."""
    pa.set_memory_pool(pa.system_memory_pool())
