"""The reporter interface, and the file-writing steps every file reporter shares."""

from __future__ import annotations

import os
import tempfile
from abc import ABC, abstractmethod
from pathlib import Path

from tracegrade.models.results import EvalReport

__all__ = ["BaseReporter", "FileReporter", "write_text_file"]


def write_text_file(path: str | Path, text: str) -> Path:
    """Write UTF-8 ``text`` atomically (parent directories created); returns the absolute path."""
    target = Path(path).expanduser().absolute()
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


class BaseReporter(ABC):
    """Something that renders an :class:`EvalReport`."""

    @property
    def name(self) -> str:
        return type(self).__name__

    @abstractmethod
    def generate(self, report: EvalReport, output_dir: str | Path | None = None) -> str | None:
        """Render ``report``: into ``output_dir`` (returning the file path) or as a returned string."""


class FileReporter(BaseReporter):
    """A reporter whose output is one text document: subclasses implement :meth:`render`."""

    #: file name used by :meth:`generate` when given a directory
    default_filename = "report.txt"

    @abstractmethod
    def render(self, report: EvalReport) -> str:
        """The whole document as text."""

    def save(self, report: EvalReport, path: str | Path) -> str:
        """Write the document to ``path`` (parent directories created); returns the absolute path."""
        return str(write_text_file(path, self.render(report)))

    def generate(self, report: EvalReport, output_dir: str | Path | None = None) -> str:
        """The document text, or — given ``output_dir`` — the path of ``<output_dir>/<default_filename>``."""
        if output_dir is None:
            return self.render(report)
        return self.save(report, Path(output_dir) / self.default_filename)
