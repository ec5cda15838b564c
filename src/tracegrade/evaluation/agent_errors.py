"""Where an agent's exception came from, in the user's own code, and its traceback without tracegrade's frames.

A case whose agent raised is reported with the exception's type and message and the innermost frame of the
user's code it passed through (``ValueError: no such city (at weather_agent.py:12, in lookup)``): the frame a
developer opens, rather than the library's or tracegrade's frame the exception ended in. The full traceback
is kept too (``EvalCaseResult.error_traceback``), with the frames of tracegrade (which ran the turn) and of
the standard library's plumbing above the agent (asyncio, threading) left out: what is left starts at the
agent's entry point.
"""

from __future__ import annotations

import os
import sysconfig
import traceback
from pathlib import Path

__all__ = ["agent_traceback", "describe_agent_exception", "user_frame"]

_TRACEGRADE_DIR = str(Path(__file__).resolve().parent.parent) + os.sep
# the standard library and installed packages: not the user's code (an editable install of the user's own
# project lives elsewhere, in its source tree)
_LIBRARY_DIRS = tuple(
    dict.fromkeys(
        str(Path(path).resolve()) + os.sep
        for name in ("stdlib", "platstdlib", "purelib", "platlib")
        if (path := sysconfig.get_paths().get(name))
    )
)
_STDLIB_DIRS = tuple(
    dict.fromkeys(
        str(Path(path).resolve()) + os.sep
        for name in ("stdlib", "platstdlib")
        if (path := sysconfig.get_paths().get(name))
    )
)


def _resolved(filename: str) -> str:
    try:
        return str(Path(filename).resolve())
    except (OSError, RuntimeError):  # a frame of "<string>" or a path that no longer resolves
        return filename


def _is_tracegrade(filename: str) -> bool:
    return _resolved(filename).startswith(_TRACEGRADE_DIR)


def _is_library(filename: str) -> bool:
    resolved = _resolved(filename)
    # site-packages inside the standard library's directory (a venv's lib/pythonX.Y/site-packages) is a library too
    return resolved.startswith(_LIBRARY_DIRS) or filename.startswith("<frozen ")


def _is_stdlib(filename: str) -> bool:
    resolved = _resolved(filename)
    return (resolved.startswith(_STDLIB_DIRS) and "site-packages" not in resolved) or filename.startswith("<frozen ")


def user_frame(exc: BaseException) -> traceback.FrameSummary | None:
    """The innermost frame of ``exc``'s traceback in the user's code (neither tracegrade, nor the standard
    library, nor an installed package); else the innermost frame outside tracegrade; None when there is none."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not _is_tracegrade(f.filename)]
    own = [f for f in frames if not _is_library(f.filename)]
    chosen = own or frames
    return chosen[-1] if chosen else None


def _shown_path(filename: str) -> str:
    """A frame's file relative to the working directory when it is below it (as a developer would type it)."""
    try:
        return str(Path(filename).resolve().relative_to(Path.cwd().resolve()))
    except (ValueError, OSError, RuntimeError):
        return filename


def describe_agent_exception(exc: BaseException) -> str:
    """``Type: message (at file:line, in function)``: what the agent raised and where in the user's code.

    The place goes on the first line, after the message's first line, and the message's other lines follow:
    a report's one-line views (the console's case table) show only the first line, and it must say where.
    """
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    frame = user_frame(exc)
    if frame is None:
        return text
    first, newline, rest = text.partition("\n")
    return f"{first} (at {_shown_path(frame.filename)}:{frame.lineno}, in {frame.name}){newline}{rest}"


def _trimmed(stack: traceback.StackSummary) -> traceback.StackSummary:
    """``stack`` without tracegrade's frames and without the standard library's frames that lead to the first
    other frame (the event loop or thread that called the agent); a stack of nothing else is kept whole."""
    kept = [f for f in stack if not _is_tracegrade(f.filename)]
    start = next((i for i, f in enumerate(kept) if not _is_stdlib(f.filename)), 0)
    return traceback.StackSummary.from_list(kept[start:] or list(stack))


def agent_traceback(exc: BaseException) -> str:
    """The traceback of ``exc`` (and of the exceptions it was raised from or during) without tracegrade's frames,
    formatted as Python prints one."""
    described = traceback.TracebackException.from_exception(exc)
    seen: set[int] = set()
    pending = [described]
    while pending:  # the chain (cause, context, exception groups' members) trimmed alike
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        current.stack = _trimmed(current.stack)
        pending += [e for e in (current.__cause__, current.__context__) if e is not None]
        pending += list(getattr(current, "exceptions", None) or [])
    return "".join(described.format())
