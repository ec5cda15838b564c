"""One exception tree for tracegrade: every error says what was wrong, where, and how to fix it."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = [
    "ConfigError",
    "DecodeError",
    "EvalSetError",
    "EventLoopError",
    "FileFormatError",
    "InvalidStateError",
    "InvalidValueError",
    "JudgeError",
    "MissingFileError",
    "NoCriteriaError",
    "NotFoundError",
    "OutputFileError",
    "QueryCancelled",
    "QueryPreempted",
    "QueryRefused",
    "RunInterrupted",
    "StoreError",
    "StoreLockedError",
    "StoreMissingError",
    "TracegradeError",
    "WorkerIdInUseError",
    "did_you_mean",
]


def did_you_mean(name: object, known: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` when ``name`` is a likely misspelling of one of the ``known`` names, else empty:
    what follows the name in an "unknown name" message."""
    # stricter than difflib's 0.6, which offers rouge_match for exact_match (a criterion with no slot)
    close = difflib.get_close_matches(str(name), list(known), n=1, cutoff=0.75)
    return f" (did you mean {close[0]!r}?)" if close else ""


class TracegradeError(Exception):
    """Base class of every error tracegrade raises on purpose."""


class InvalidValueError(TracegradeError, ValueError):
    """An argument, option or setting has a value tracegrade cannot use; the message names it and what it accepts."""


class InvalidStateError(TracegradeError, RuntimeError):
    """An API was called where it cannot act (outside the block it belongs to, inside an event loop...)."""


class EventLoopError(InvalidStateError):
    """A blocking ``*_sync`` call was made inside a running event loop; await the async form there instead."""


class MissingFileError(TracegradeError, FileNotFoundError):
    """A file tracegrade was pointed at does not exist; the message names it."""


class OutputFileError(TracegradeError, OSError):
    """A file cannot be written where asked: the path is not a regular file (a directory, FIFO or device), it
    is the same file as an input, or the system refused (no such directory, permission denied…)."""

    def __init__(self, path: object, reason: str) -> None:
        super().__init__(f"cannot write {path}: {reason}")
        self.path = str(path)
        self.reason = reason

    def __str__(self) -> str:  # OSError's str() of one argument is that argument; said explicitly for clarity
        return str(self.args[0])


class NotFoundError(TracegradeError, KeyError):
    """Something looked up by name or id is not there (a run, a rule, a criterion slot)."""

    def __str__(self) -> str:
        # KeyError's str() is the repr of its argument (quotes and escapes): show the message as written
        return str(self.args[0]) if len(self.args) == 1 else super().__str__()


class JudgeError(TracegradeError, RuntimeError):
    """An LLM judge could not give a verdict: no provider serves its model, or its calls failed for good."""


class FileFormatError(TracegradeError, ValueError):
    """A file (eval set, config, report, OTLP dump) could not be loaded.

    ``problems`` lists ``(json_path, message)`` pairs, one per problem found, so a user can fix
    them all in one pass. Nothing of the file has been loaded when this is raised.
    """

    def __init__(self, path: str, problems: list[tuple[str, str]], kind: str = "file") -> None:
        self.path = str(path)
        self.problems = problems
        self.kind = kind
        lines = [f"{kind} {self.path} is invalid ({len(problems)} problem{'s' if len(problems) != 1 else ''}):"]
        lines += [f"  at {where}: {what}" for where, what in problems]
        super().__init__("\n".join(lines))


class EvalSetError(FileFormatError):
    """An eval-set file is malformed."""

    def __init__(self, path: str, problems: list[tuple[str, str]]) -> None:
        super().__init__(path, problems, kind="eval set")


class ConfigError(FileFormatError):
    """A configuration file is malformed or names unknown keys."""

    def __init__(self, path: str, problems: list[tuple[str, str]]) -> None:
        super().__init__(path, problems, kind="config")


class NoCriteriaError(TracegradeError, ValueError):
    """A run was asked to grade with a configuration that enables no criterion."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(
            message
            or "the evaluation config enables no criterion; enable at least one slot in "
            "EvalConfig.criteria (for example CriterionConfig.trajectory()) before running"
        )


class DecodeError(TracegradeError, ValueError):
    """An OTLP payload could not be decoded at all (a whole-request failure)."""


class StoreError(TracegradeError):
    """The trace store could not be opened, read or written."""


class StoreLockedError(StoreError):
    """The store is busy: another process holds the DuckDB file for writing and no server answers for it, or runs
    a maintenance pass on the lake (one at a time)."""


class StoreMissingError(StoreError):
    """The store to open does not exist yet: no file at its path, or no lake in its catalog's database. The first
    writer creates it (``tracegrade serve``, ``import``, a pytest session recording its run)."""


class QueryRefused(StoreError):
    """A query the read-only sandbox does not run: not one SELECT, or it reaches outside the store."""


class QueryCancelled(StoreError):
    """A query stopped before it finished: it ran past its time limit, or its client went away."""


class QueryPreempted(QueryCancelled):
    """A query a receiver stopped to close its store (a purge, a reopening after a failure, a stop): not the query's
    fault, so sent again after ``retry_after`` seconds it is answered (HTTP 503 with ``Retry-After``)."""

    http_status = 503

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class WorkerIdInUseError(TracegradeError, RuntimeError):
    """A grading worker's id is held by another running worker on the same lake: two workers of one id would hand
    back and finish each other's jobs. The message says who holds it and how to give each worker its own id."""


class RunInterrupted(KeyboardInterrupt):
    """A live run stopped by Ctrl-C (SIGINT) before every case finished.

    A ``KeyboardInterrupt`` (not a :class:`TracegradeError`), so code that does not expect it stops as Ctrl-C
    stops it. ``report`` holds the cases that finished, marked ``metadata["incomplete"]``; ``written`` the
    reports written for it; ``str()`` is one line saying how far the run got.
    """

    def __init__(self, report: object, finished: int, total: int, written: list[str]) -> None:
        self.report = report
        self.finished = finished
        self.total = total
        self.written = list(written)
        where = f"; partial report (marked incomplete): {', '.join(self.written)}" if self.written else ""
        super().__init__(f"interrupted: {finished} of {total} cases finished{where}")
