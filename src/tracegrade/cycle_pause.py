"""The cyclic garbage collector paused while a block builds millions of objects that hold no cycle.

Each collection of the oldest generation walks every object alive; building many objects sets such collections
off, so a block that builds a large value beside a large heap (a run of 100,000 cases read, then its comparison
turned into JSON) spends much of its time in them (bench/RESULTS.md). Reference counting still frees every object
that holds no cycle; a cycle made meanwhile waits for the next collection after the block.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["no_cycle_collection"]


@contextmanager
def no_cycle_collection() -> Iterator[None]:
    """No cyclic collection inside the block; the collector is enabled again after it if it was before."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
