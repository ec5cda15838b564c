"""A precedence chain of readers: each reader takes a span and returns what it found there, or None."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["Chain"]


class Chain:
    """A precedence chain: its readers are asked in order and the first answer wins (``sources.first``)."""

    __slots__ = ("readers",)

    def __init__(self, *readers: Callable[..., Any]) -> None:
        self.readers = readers
