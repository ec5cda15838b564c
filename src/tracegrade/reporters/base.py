"""The reporter interface, and the file-writing steps every file reporter shares."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

from tracegrade.models.files import write_text_file
from tracegrade.models.results import EvalReport
from tracegrade.output_files import replacing

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
    """A reporter whose output is one text document: subclasses implement :meth:`render`, and those whose
    documents grow with the run (HTML, JSON) :meth:`pieces` too, so that the document is written as it is made."""

    #: file name used by :meth:`generate` when given a directory
    default_filename = "report.txt"

    @abstractmethod
    def render(self, report: EvalReport) -> str:
        """The whole document as text."""

    def pieces(self, report: EvalReport) -> Iterator[str]:
        """The document in consecutive pieces that join into :meth:`render`'s text: here the one piece."""
        yield self.render(report)

    def save(self, report: EvalReport, path: str | Path, *, inputs: Iterable[str | Path] = ()) -> str:
        """Write the document to ``path`` piece by piece (parent directories created, the file replaced whole;
        ``inputs``: files it must not be); returns the absolute path."""
        with replacing(path, inputs=inputs) as fh:
            for piece in self.pieces(report):
                fh.write(piece.encode("utf-8"))
        return str(Path(path).expanduser().absolute())

    def write_to(self, report: EvalReport, stream: BinaryIO) -> None:
        """Write the document to ``stream`` (standard output's bytes) piece by piece, as UTF-8."""
        for piece in self.pieces(report):
            stream.write(piece.encode("utf-8"))

    def generate(self, report: EvalReport, output_dir: str | Path | None = None) -> str:
        """The document text, or — given ``output_dir`` — the path of ``<output_dir>/<default_filename>``."""
        if output_dir is None:
            return self.render(report)
        return self.save(report, Path(output_dir) / self.default_filename)
