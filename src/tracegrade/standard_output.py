"""Writing to standard output checked: what a command prints in place of a file (``-o -``, a report without
``--out``) must fail the command when it does not arrive whole, as a file's writer does.

On a full disk that standard output was redirected to, ``sys.stdout.buffer.write`` can return a short count
instead of raising (the rest is dropped, and the command exited 0 with its output cut), and an error at the
final flush is lost at the interpreter's exit: these write until all is written, flush before returning, and
turn the failure into an :class:`~tracegrade.errors.OutputFileError` naming standard output. A reader that
went away (``| head``) is not an error of the command's: its BrokenPipeError goes on to click, which exits
quietly.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
from collections.abc import Iterator
from typing import BinaryIO

from tracegrade.errors import OutputFileError

__all__ = ["stdout_errors", "stdout_to_devnull", "write_all", "write_stdout"]


@contextlib.contextmanager
def stdout_errors() -> Iterator[None]:
    """Writes to standard output inside the block, then a flush: a failure of either (not a closed pipe)
    raises OutputFileError naming standard output and the reason."""
    try:
        yield
        sys.stdout.flush()
        sys.stdout.buffer.flush()
    except BrokenPipeError:
        raise
    except OSError as exc:
        raise OutputFileError("standard output", exc.strerror or str(exc)) from None


def write_all(stream: BinaryIO, data: bytes) -> None:
    """Write ``data`` to ``stream`` whole: after a short count the next write raises the reason (ENOSPC)."""
    rest = memoryview(data)
    while rest:
        written = stream.write(rest)
        if not written:  # neither progress nor an error: say so rather than try forever
            raise OSError(errno.EIO, "the write made no progress")
        rest = rest[written:]


def write_stdout(data: bytes) -> None:
    """Write ``data`` to standard output as bytes (no newline translation), whole or failing as above."""
    with stdout_errors():
        sys.stdout.flush()  # text printed before stays before
        write_all(sys.stdout.buffer, data)


def stdout_to_devnull() -> None:
    """Point a standard output whose reader closed the pipe at /dev/null, so that flushing it at exit does
    not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # no file descriptor behind sys.stdout (a test's capture): nothing to flush
        pass
