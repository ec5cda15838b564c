"""Fewer and shorter garbage collections while offline grading builds a report of many stored traces.

Grading an eval set from the store keeps every case's result (and, until graded, its execution) alive, so the
heap grows by millions of objects that live until the report is done. CPython collects its oldest generation each
time that heap has grown by a quarter after ten collections of the middle one, and each such collection walks the
whole heap; every younger collection walks whatever survived since the last one: on large runs a large share of
the grading's CPU time (figures: bench/RESULTS.md, grading speed). Inside ``fewer_full_collections``:

* the oldest generation waits for ``FULL_COLLECTION_EVERY`` middle collections instead of ten;
* with ``SET_ASIDE_LONG_LIVED``, :func:`set_aside_long_lived` (called by the grading as it starts, with the eval set
  in hand, and every so many graded cases) moves every object alive at that moment out of the collector's reach
  (``gc.freeze``); they are handed back to the oldest generation (``gc.unfreeze``) when the last scope ends, so a
  cycle among them that died meanwhile is freed by the next full collection. Nothing is set aside when someone
  else froze objects first (handing those back would undo their freeze).
* :func:`building_long_lived` wraps the building of many objects that outlive the block (a group of loaded
  executions): no collection runs while they are built (each young collection would walk them only to find them
  all alive), and they are set aside at its end.

Outside those blocks the young generations are collected as usual, so short-lived cycles are still freed at once.
The previous thresholds come back when the last scope ends (scopes may overlap, in tasks of one loop). A test
grades with and without all this and compares the reports.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = [
    "FULL_COLLECTION_EVERY",
    "SET_ASIDE_LONG_LIVED",
    "building_long_lived",
    "fewer_full_collections",
    "set_aside_long_lived",
]

FULL_COLLECTION_EVERY = 100  # middle-generation collections per full one (CPython's default: 10)
SET_ASIDE_LONG_LIVED = True

_open_scopes = 0
_saved: tuple[int, int, int] = gc.get_threshold()
_setting_aside = False


@contextmanager
def fewer_full_collections() -> Iterator[None]:
    """Collect the oldest generation at most every ``FULL_COLLECTION_EVERY`` middle collections meanwhile, and let
    :func:`set_aside_long_lived` work."""
    global _open_scopes, _saved, _setting_aside
    if _open_scopes == 0:
        _saved = gc.get_threshold()
        young, middle, oldest = _saved
        gc.set_threshold(young, middle, max(oldest, FULL_COLLECTION_EVERY))
        _setting_aside = SET_ASIDE_LONG_LIVED and gc.get_freeze_count() == 0
    _open_scopes += 1
    try:
        yield
    finally:
        _open_scopes -= 1
        if _open_scopes == 0:
            gc.set_threshold(*_saved)
            if _setting_aside:
                _setting_aside = False
                gc.unfreeze()


def set_aside_long_lived() -> None:
    """Inside ``fewer_full_collections``: every object alive now is expected to live until the grading ends; keep
    the collector from walking it again until then (see the module docstring). Elsewhere it does nothing."""
    if _setting_aside:
        gc.freeze()


@contextmanager
def building_long_lived() -> Iterator[None]:
    """Inside ``fewer_full_collections``: what the block builds is expected to outlive it; the collector pauses
    meanwhile and sets it aside at the end (with everything else alive then). Elsewhere it does nothing."""
    if not _setting_aside:
        yield
        return
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if collecting:
            gc.enable()
