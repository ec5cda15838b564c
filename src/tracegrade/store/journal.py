"""RequestJournal: the append-only, fsync'd file log that makes an acknowledged export durable.

The receiver acknowledges an export once the request's payload is appended here and flushed to disk
(``fdatasync``); the store writer commits its spans to DuckDB later, in large transactions. A segment
file is deleted once every record in it is committed to the store. After a crash, the segments left
behind hold every acknowledged request not yet known to be committed: the receiver decodes them again
and writes them before it serves (the ``spans`` key and the logs' content key make a record that was
committed just before the crash a no-op).

A record is a 13-byte header (magic ``TGJ1``, payload length, CRC-32 of the payload, record kind)
followed by the payload. A record cut short by a crash is at a segment's tail and was never
acknowledged (its fsync never returned); recovery stops reading that segment there.

Thread-safe: the receiver's journal thread appends, the store writer's thread releases.
"""

from __future__ import annotations

import logging
import os
import struct
import threading
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tracegrade.errors import StoreError

__all__ = ["DEFAULT_SEGMENT_BYTES", "JournalRecord", "RequestJournal", "journal_directory", "unstored_journal_bytes"]

log = logging.getLogger(__name__)

DEFAULT_SEGMENT_BYTES = 64 * 1024 * 1024
_MAGIC = b"TGJ1"
_HEADER = struct.Struct("<4sIIB")  # magic, payload length, crc32(payload), kind
_SUFFIX = ".tgj"

JournalRecord = tuple[int, bytes]  # (kind, payload); the kind is the caller's (signal and wire format)


def _fsync_directory(directory: Path) -> None:
    """Make a file's creation or removal in ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def journal_directory(store_path: str | Path) -> Path:
    """The request journal of the store at ``store_path``: ``<store>.journal/``."""
    return Path(f"{store_path}.journal")


def unstored_journal_bytes(store_path: str | Path) -> int:
    """Bytes of journaled export requests the store at ``store_path`` may not hold yet (0: none).

    Segments outlive the receiver only when it stopped before committing them (a crash, a kill); the next
    ``tracegrade serve`` on the store writes them before it serves. A running receiver's active segment
    counts too: read through the server then, which sees everything it acknowledged.
    """
    try:
        return sum(path.stat().st_size for path in journal_directory(store_path).glob(f"*{_SUFFIX}"))
    except OSError:  # a segment deleted while we looked, or an unreadable directory
        return 0


class RequestJournal:
    """Segment files ``<n>.tgj`` in ``directory``; appends go to the newest, which rotates at ``segment_bytes``."""

    def __init__(self, directory: str | Path, *, segment_bytes: int = DEFAULT_SEGMENT_BYTES) -> None:
        self.directory = Path(directory)
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create the request journal directory {self.directory}: {exc}") from None
        self.segment_bytes = segment_bytes
        self._recovered = sorted(self.directory.glob(f"*{_SUFFIX}"), key=lambda p: int(p.stem))
        self._next_number = int(self._recovered[-1].stem) + 1 if self._recovered else 1
        self._pending: dict[int, int] = {}  # segment number -> records not committed to the store yet
        self._active: int | None = None
        self._file: Any = None
        self._size = 0
        self._lock = threading.Lock()

    # -- recovery ---------------------------------------------------------------------------------------

    def recovered_records(self) -> Iterator[JournalRecord]:
        """Every whole record of the recovered segments, oldest first."""
        for path in self._recovered:
            yield from _read_segment(path)

    def drop_recovered(self) -> None:
        """Delete the recovered segments (call once their records are committed to the store)."""
        for path in self._recovered:
            path.unlink(missing_ok=True)
        if self._recovered:
            _fsync_directory(self.directory)
        self._recovered = []

    # -- appending --------------------------------------------------------------------------------------

    def append(self, records: list[JournalRecord]) -> int:
        """Append ``records`` and flush them to disk; returns the segment number that holds them.

        Raises StoreError when the disk refuses (the caller must not acknowledge those records).
        """
        with self._lock:
            return self._append(records)

    def _append(self, records: list[JournalRecord]) -> int:
        try:
            if self._file is None or self._size >= self.segment_bytes:
                self._rotate()
            chunks: list[bytes] = []
            for kind, payload in records:
                chunks.append(_HEADER.pack(_MAGIC, len(payload), zlib.crc32(payload), kind))
                chunks.append(payload)
            data = b"".join(chunks)
            self._file.write(data)
            self._file.flush()
            os.fdatasync(self._file.fileno())
        except OSError as exc:
            raise StoreError(f"cannot write the request journal in {self.directory}: {exc}") from None
        self._size += len(data)
        assert self._active is not None
        self._pending[self._active] = self._pending.get(self._active, 0) + len(records)
        return self._active

    def release(self, segment: int, records: int) -> None:
        """``records`` records of ``segment`` are committed to the store; delete segments fully committed."""
        with self._lock:
            self._release(segment, records)

    def _release(self, segment: int, records: int) -> None:
        left = self._pending.get(segment, 0) - records
        if left > 0:
            self._pending[segment] = left
            return
        self._pending.pop(segment, None)
        if segment != self._active:
            (self.directory / f"{segment}{_SUFFIX}").unlink(missing_ok=True)

    def close(self) -> None:
        """Close the active segment; delete it when everything in it is committed."""
        with self._lock:
            self._close()

    def _close(self) -> None:
        if self._file is None:
            return
        self._file.close()
        self._file = None
        if self._active is not None and not self._pending.get(self._active):
            (self.directory / f"{self._active}{_SUFFIX}").unlink(missing_ok=True)
        self._active = None

    def _rotate(self) -> None:
        previous = self._active
        if self._file is not None:
            self._file.close()
        number = self._next_number
        self._next_number += 1
        self._file = open(self.directory / f"{number}{_SUFFIX}", "ab")  # noqa: SIM115 (kept open for appends)
        _fsync_directory(self.directory)
        self._active, self._size = number, 0
        if previous is not None and not self._pending.get(previous):
            (self.directory / f"{previous}{_SUFFIX}").unlink(missing_ok=True)


def _read_segment(path: Path) -> Iterator[JournalRecord]:
    data = path.read_bytes()
    offset = 0
    while offset + _HEADER.size <= len(data):
        magic, length, crc, kind = _HEADER.unpack_from(data, offset)
        start = offset + _HEADER.size
        payload = data[start : start + length]
        if magic != _MAGIC or len(payload) < length or zlib.crc32(payload) != crc:
            break
        yield kind, payload
        offset = start + length
    if offset < len(data):
        log.warning(
            "request journal %s: ignoring %d bytes after offset %d (a record cut short by a crash; "
            "it was never acknowledged)",
            path,
            len(data) - offset,
            offset,
        )
