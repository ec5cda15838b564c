"""Counting the Python lines a call executes: work measured without a clock, for tests that a cost does not grow
with the input (a timed test flakes on a shared machine)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

__all__ = ["python_lines"]


def python_lines(run: Callable[[], object]) -> int:
    """How many Python lines ``run()`` executes (the standard library's included)."""
    seen = 0

    def tracer(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal seen
        seen += event == "line"
        return tracer

    sys.settrace(tracer)
    try:
        run()
    finally:
        sys.settrace(None)
    return seen
