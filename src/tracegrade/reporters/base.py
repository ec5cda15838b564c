"""The reporter interface, and the file-writing steps every file reporter shares."""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path

from tracegrade.models.files import write_text_file
from tracegrade.models.results import EvalReport

__all__ = ["BaseReporter", "FileReporter", "write_text_file"]


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
