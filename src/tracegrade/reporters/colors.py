"""``Colors``: the ANSI colour codes of console output, as the reference exposes them.

The console reporter renders with rich; ``Colors`` is for code that prints its own lines in the same
palette. Codes are per instance: ``Colors(enabled=False).RED == ""``, and ``Colors()`` turns itself off
for a stream that is not a terminal or when ``NO_COLOR`` is set. The reference's ``Colors.disable()``
blanks the class constants for the whole process; it is kept (deprecated) for code that relies on it,
with ``Colors.enable()`` to undo it.
"""

from __future__ import annotations

import os
import sys
import warnings
from typing import ClassVar, TextIO

__all__ = ["Colors"]

_CODES: dict[str, str] = {
    "RESET": "\033[0m",
    "BOLD": "\033[1m",
    "DIM": "\033[2m",
    "RED": "\033[91m",
    "GREEN": "\033[92m",
    "YELLOW": "\033[93m",
    "BLUE": "\033[94m",
    "MAGENTA": "\033[95m",
    "CYAN": "\033[96m",
    "WHITE": "\033[97m",
}


class Colors:
    """ANSI codes as class constants (``Colors.GREEN``) and per instance (``Colors(enabled=False).GREEN``)."""

    RESET: ClassVar[str] = _CODES["RESET"]
    BOLD: ClassVar[str] = _CODES["BOLD"]
    DIM: ClassVar[str] = _CODES["DIM"]
    RED: ClassVar[str] = _CODES["RED"]
    GREEN: ClassVar[str] = _CODES["GREEN"]
    YELLOW: ClassVar[str] = _CODES["YELLOW"]
    BLUE: ClassVar[str] = _CODES["BLUE"]
    MAGENTA: ClassVar[str] = _CODES["MAGENTA"]
    CYAN: ClassVar[str] = _CODES["CYAN"]
    WHITE: ClassVar[str] = _CODES["WHITE"]

    def __init__(self, enabled: bool | None = None, stream: TextIO | None = None) -> None:
        """``enabled=None``: colour only when ``stream`` (default stdout) is a terminal and ``NO_COLOR`` is unset."""
        if enabled is None:
            out = stream if stream is not None else sys.stdout
            enabled = bool(getattr(out, "isatty", lambda: False)()) and "NO_COLOR" not in os.environ
        self.enabled = enabled
        for name in _CODES:
            setattr(self, name, getattr(type(self), name) if enabled else "")

    def paint(self, text: str, *codes: str) -> str:
        """``text`` wrapped in ``codes`` (names such as ``"RED"``, ``"BOLD"``) and a reset; plain when disabled."""
        if not self.enabled or not codes:
            return text
        return "".join(getattr(self, code) for code in codes) + text + self.RESET

    @classmethod
    def disable(cls) -> None:
        """Deprecated: blank the class constants for the whole process (use ``Colors(enabled=False)``)."""
        warnings.warn(
            "Colors.disable() changes colours for the whole process; use Colors(enabled=False) instead",
            DeprecationWarning,
            stacklevel=2,
        )
        for name in _CODES:
            setattr(cls, name, "")

    @classmethod
    def enable(cls) -> None:
        """Restore the class constants after :meth:`disable`."""
        for name, code in _CODES.items():
            setattr(cls, name, code)
