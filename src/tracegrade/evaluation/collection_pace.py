"""Fewer full garbage collections while offline grading builds a report of many stored traces.

Grading an eval set from the store keeps every case's result (and, until graded, its execution) alive, so the
heap grows by millions of objects. CPython collects its oldest generation each time that heap has grown by a
quarter after ten collections of the middle one, and each such collection walks the whole heap: on large runs
a large share of the grading's CPU time (figures: bench/RESULTS.md, grading speed). Inside
``fewer_full_collections`` the oldest generation waits for ``FULL_COLLECTION_EVERY`` middle collections
instead; the young generations are collected as usual, so short-lived cycles are still freed at once. The
previous thresholds come back when the last such scope ends (scopes may overlap, in tasks of one loop).
A test grades with and without it and compares the reports.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["FULL_COLLECTION_EVERY", "fewer_full_collections"]

FULL_COLLECTION_EVERY = 100  # middle-generation collections per full one (CPython's default: 10)

_open_scopes = 0
_saved: tuple[int, int, int] = gc.get_threshold()


@contextmanager
def fewer_full_collections() -> Iterator[None]:
    """Collect the oldest generation at most every ``FULL_COLLECTION_EVERY`` middle collections meanwhile."""
    global _open_scopes, _saved
    if _open_scopes == 0:
        _saved = gc.get_threshold()
        young, middle, oldest = _saved
        gc.set_threshold(young, middle, max(oldest, FULL_COLLECTION_EVERY))
    _open_scopes += 1
    try:
        yield
    finally:
        _open_scopes -= 1
        if _open_scopes == 0:
            gc.set_threshold(*_saved)
