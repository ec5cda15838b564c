"""Where ``tracegrade export --format otlp|otlp-json`` writes its requests: a file, gzip'd or not, or stdout.

Two layouts, both what ``tracegrade import`` reads and what the OpenTelemetry Collector's ``file`` exporter writes
(so its ``otlpjsonfile`` receiver and other Collector tooling read them too):

* ``otlp``: binary protobuf requests one after another, each preceded by its length as a 4-byte big-endian
  integer (the ``file`` exporter's ``encoding: proto``). One file rather than one per request: a stream can go
  to stdout or through gzip, an export is one thing to move or delete, and traces and logs requests mix in it
  (import tells them apart by content);
* ``otlp-json``: OTLP/JSON requests, one per line (the ``file`` exporter's default format).

A file is written whole or not at all (``output_files.replacing``: a temporary file renamed over the name at
the end), so a full disk or an interrupted export never leaves part of one under the final name. A name ending
in ``.gz`` is gzip-compressed. ``-`` is standard output, written as it goes (never compressed: pipe it through
gzip).
"""

from __future__ import annotations

import contextlib
import gzip
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

from tracegrade.output_files import replacing

__all__ = ["STDOUT", "RequestWriter", "request_writer"]

STDOUT = "-"
_FRAME_LENGTH_BYTES = 4


class RequestWriter:
    """Writes serialized requests in one of the two layouts (see the module docstring)."""

    def __init__(self, stream: BinaryIO, *, framed: bool) -> None:
        self._stream = stream
        self._framed = framed
        self.requests = 0

    def write(self, request: bytes) -> None:
        if self._framed:
            self._stream.write(len(request).to_bytes(_FRAME_LENGTH_BYTES, "big"))
            self._stream.write(request)
        else:
            self._stream.write(request + b"\n")  # compact JSON holds no newline: one request per line
        self.requests += 1


@contextlib.contextmanager
def request_writer(output: Path, *, framed: bool, inputs: Iterable[str | Path] = ()) -> Iterator[RequestWriter]:
    """A writer of ``output`` (``-``: standard output); the file appears under its name when the block ends
    without an error, and not at all otherwise. ``inputs``: the files it must not be (the store)."""
    if str(output) == STDOUT:
        yield RequestWriter(sys.stdout.buffer, framed=framed)  # checked by the entry point (standard_output)
        sys.stdout.buffer.flush()
        return
    with replacing(output, inputs=inputs) as fh:
        if output.name.lower().endswith(".gz"):
            # mtime 0: the same export gives the same bytes; the name inside is the file's without .gz
            with gzip.GzipFile(filename=output.name[:-3], mode="wb", fileobj=fh, mtime=0) as compressed:
                yield RequestWriter(compressed, framed=framed)  # type: ignore[arg-type]
        else:
            yield RequestWriter(fh, framed=framed)
