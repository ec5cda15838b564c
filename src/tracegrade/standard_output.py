"""Standard output of the command line, checked: what a command prints in place of a file (``sql > out.json``,
``report`` without ``-o``, ``export -o -``) arrives whole, or the command fails saying so.

On a full disk that standard output was redirected to, CPython's buffered writer can take a large write, pass
part of it on and return a short count without an error; the rest is dropped, and the command used to exit 0
with its output cut. :func:`guard_stdout` (the entry point calls it) puts a writer behind ``sys.stdout`` that
writes until all is written, so the next attempt raises the disk's error. Any failure to write or flush (a
closed pipe apart) becomes an :class:`~tracegrade.errors.OutputFileError` naming standard output, which every
command reports as its other errors, exit 2; standard output is then pointed at /dev/null, so that the flush
at exit does not fail again. A reader that went away (``| head``) is not the command's failure: its
BrokenPipeError goes on to click, which exits quietly.
"""

from __future__ import annotations

import errno
import io
import os
import sys
from typing import Any, NoReturn

from tracegrade.errors import OutputFileError

__all__ = ["flush_stdout", "guard_stdout", "stdout_to_devnull"]


class _WholeWrites(io.BufferedWriter):
    """A buffered writer whose ``write`` never stops short and whose failures name standard output;
    ``unbuffered``: each write is flushed at once (``python -u``, ``PYTHONUNBUFFERED``: a reader sees each line
    as it is printed)."""

    def __init__(self, raw: io.RawIOBase, *, unbuffered: bool) -> None:
        super().__init__(raw)
        self._unbuffered = unbuffered

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        done = 0
        try:
            while done < len(view):
                written = super().write(view[done:])
                if not written:  # neither progress nor an error: say so rather than try forever
                    raise OSError(errno.EIO, "the write made no progress")
                done += written
        except BrokenPipeError:
            raise
        except OSError as exc:
            _failed(exc)
        if self._unbuffered:
            self.flush()
        return done

    def flush(self) -> None:
        try:
            super().flush()
        except BrokenPipeError:
            raise
        except OSError as exc:
            _failed(exc)


def _failed(exc: OSError) -> NoReturn:
    stdout_to_devnull()
    raise OutputFileError("standard output", exc.strerror or str(exc)) from None


def guard_stdout() -> None:
    """Put a checked writer (see the module docstring) behind ``sys.stdout``, keeping its encoding and buffering
    (line buffering on a terminal, none at all under ``python -u``); nothing changes when standard output is not
    a file descriptor (a test's capture, none at all)."""
    current = sys.stdout
    try:
        fd = current.fileno()
    except (AttributeError, OSError, ValueError):
        return
    current.flush()
    raw = io.FileIO(fd, "w", closefd=False)
    unbuffered = not isinstance(getattr(current, "buffer", None), io.BufferedWriter)
    sys.stdout = io.TextIOWrapper(
        _WholeWrites(raw, unbuffered=unbuffered),
        encoding=current.encoding,
        errors=current.errors,
        line_buffering=bool(getattr(current, "line_buffering", False)),
        write_through=bool(getattr(current, "write_through", False)),
    )


def flush_stdout() -> None:
    """Flush ``sys.stdout`` before the interpreter does, whose failure there would be an "Exception ignored"
    message and exit code 120: here it is one error line and exit code 2."""
    try:
        sys.stdout.flush()
    except OutputFileError as exc:
        sys.stderr.write(f"Error: {exc}\n")
        raise SystemExit(2) from None
    except (BrokenPipeError, ValueError):  # the reader went away (click has said so), or stdout is closed
        pass


def stdout_to_devnull() -> None:
    """Point standard output at /dev/null (its reader closed the pipe, or it failed), so that flushing it at
    exit does not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # no file descriptor behind sys.stdout (a test's capture): nothing to flush
        pass
