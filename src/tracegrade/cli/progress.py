"""Progress bars on stderr for long CLI work, shown only when stderr is an interactive terminal.

Piped or redirected stderr, CI logs (``CI`` set) and dumb terminals get nothing: a bar's redraws would
only be noise there. rich is imported only when a bar is actually shown, so commands stay quick to start.
The bar is transient: it is erased when the work is done, leaving the command's own output alone.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator, Sized
from types import TracebackType
from typing import Any, TypeVar

__all__ = ["ProgressBar", "progress_enabled", "track"]

T = TypeVar("T")


def progress_enabled() -> bool:
    """True when stderr is a terminal a person is watching (not a pipe, a file, a CI log or ``TERM=dumb``)."""
    if os.environ.get("CI") or os.environ.get("TERM") == "dumb":
        return False
    isatty = getattr(sys.stderr, "isatty", None)
    return bool(isatty and isatty())


class ProgressBar:
    """One task's bar: ``with ProgressBar("grading", total) as bar: bar.advance()``.

    Every method is a no-op when :func:`progress_enabled` is false. ``total=None`` shows a counter
    without a bar (for work whose size is not known yet); :meth:`update` can set it later.
    """

    def __init__(self, description: str, total: int | None = None, *, unit: str = "") -> None:
        self.description = description
        self.total = total
        self.unit = unit
        self._progress: Any = None
        self._task: Any = None

    def __enter__(self) -> ProgressBar:
        if progress_enabled():
            self._start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    def _start(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        columns = [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn()]
        if self.unit:
            columns.append(TextColumn(self.unit))
        self._progress = Progress(
            *columns,
            TimeElapsedColumn(),
            console=Console(file=sys.stderr),
            transient=True,
            # Lines printed meanwhile go above the bar; stdout only when it is that same terminal.
            redirect_stdout=sys.stdout.isatty(),
            redirect_stderr=True,
        )
        self._task = self._progress.add_task(self.description, total=self.total)
        self._progress.start()

    @property
    def active(self) -> bool:
        """Whether a bar is shown (callers skip work that only feeds the bar)."""
        return self._progress is not None

    def update(self, done: int, total: int | None = None) -> None:
        """Set how much is done (and the total, when it became known)."""
        if self._progress is not None:
            if total is not None:
                self.total = total
            self._progress.update(self._task, completed=done, total=self.total)

    def advance(self, step: int = 1) -> None:
        if self._progress is not None:
            self._progress.advance(self._task, step)


def track(items: Iterable[T], description: str, total: int | None = None, *, unit: str = "") -> Iterator[T]:
    """Yield ``items`` while a bar counts them (the total is ``len(items)`` when not given)."""
    if total is None and isinstance(items, Sized):
        total = len(items)
    with ProgressBar(description, total, unit=unit) as bar:
        for item in items:
            yield item
            bar.advance()
