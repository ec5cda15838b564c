"""RequestJournal: the append-only, fsync'd file log that makes an acknowledged export durable.

The receiver acknowledges an export once the request's payload is appended here and flushed to disk
(``fdatasync``); the store writer commits its spans to DuckDB later, in large transactions. A segment
file is deleted once every record in it is durable in the store. After a crash, the segments left
behind hold every acknowledged request not yet known to be stored: the receiver decodes them again
and writes them before it serves (the ``spans`` key and the logs' content key make a record that was
stored just before the crash a no-op).

A record is a 13-byte header (magic ``TGJ2``, payload length, record kind, CRC-32 of length, kind and
payload) followed by the payload; segments of the first format (``TGJ1``, whose CRC covered the payload
only) are still read. What recovery finds:

* a record cut short at a segment's tail: a crash during its append, whose fsync never returned, so it
  was never acknowledged (ignored with a note);
* damage anywhere else (a flipped bit, a bad sector): recovery skips to the next intact record and
  reports the segment, offset and bytes skipped as possibly acknowledged data lost; the segment is kept
  aside (``N.tgj.damaged``) for inspection instead of being deleted.

A record that decodes yet cannot be written to a healthy store (the journal replay decides: see
``JournaledWriter.recover``) is set aside as a dead letter, ``<store>.journal.dead/<segment>-<offset><suffix>``,
written and fsync'd before its segment is deleted, so nothing acknowledged is ever deleted.

An append that fails (a full disk, an I/O error) is cut back to the segment's last good length before
the error is reported, so no partial record sits between acknowledged ones; if even that fails, the
next append starts a new segment. Nothing of a failed append is acknowledged.

Thread-safe: the receiver's journal thread appends, the store writer's thread releases.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import struct
import threading
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

from tracegrade.errors import StoreError

__all__ = [
    "DEFAULT_SEGMENT_BYTES",
    "JournalRecord",
    "RecoveredRecord",
    "RequestJournal",
    "dead_letter_directory",
    "fsync_directory",
    "journal_directory",
    "unstored_journal_bytes",
]

log = logging.getLogger(__name__)

DEFAULT_SEGMENT_BYTES = 64 * 1024 * 1024
_MAGIC = b"TGJ2"
_HEADER = struct.Struct("<4sIBI")  # magic, payload length, kind, crc32(length, kind, payload)
_LEGACY_MAGIC = b"TGJ1"
_LEGACY_HEADER = struct.Struct("<4sIIB")  # magic, payload length, crc32(payload), kind
_SUFFIX = ".tgj"
_DAMAGED_SUFFIX = ".damaged"
_SEGMENT_NAME = re.compile(r"^(\d+)\.tgj$")
MAX_RECORD_BYTES = 1 << 31  # larger than any request the receiver accepts: a length beyond it is damage

JournalRecord = tuple[int, bytes]  # (kind, payload); the kind is the caller's (signal and wire format)


class RecoveredRecord(NamedTuple):
    """A record read back at start: where it lies (for precise warnings) and what it holds."""

    segment: Path
    offset: int
    kind: int
    payload: bytes


def fsync_directory(directory: Path) -> None:
    """Make a file's creation or removal in ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _checksum(length: int, kind: int, payload: bytes) -> int:
    return zlib.crc32(payload, zlib.crc32(struct.pack("<IB", length, kind)))


def _header(kind: int, payload: bytes) -> bytes:
    return _HEADER.pack(_MAGIC, len(payload), kind, _checksum(len(payload), kind, payload))


def encode_record(kind: int, payload: bytes) -> bytes:
    """One record as it is written to a segment."""
    return _header(kind, payload) + payload


def journal_directory(store_path: str | Path) -> Path:
    """The request journal of the store at ``store_path``: ``<store>.journal/``."""
    return Path(f"{store_path}.journal")


def dead_letter_directory(journal: Path) -> Path:
    """Where the journal at ``journal`` sets aside the records the store refuses: ``<journal>.dead/``."""
    return journal.with_name(journal.name + ".dead")


def _segment_number(path: Path) -> int | None:
    match = _SEGMENT_NAME.match(path.name)
    return int(match.group(1)) if match else None


def _segments(directory: Path) -> list[Path]:
    """The segment files in ``directory``, oldest first; anything else there is left alone, with a warning."""
    segments: list[tuple[int, Path]] = []
    for path in directory.iterdir():
        number = _segment_number(path)
        if number is not None and path.is_file():
            segments.append((number, path))
        elif not path.name.endswith(_DAMAGED_SUFFIX):
            log.warning("request journal %s: ignoring %s, which is not a journal segment", directory, path.name)
    return [path for _, path in sorted(segments)]


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
            self._recovered = _segments(self.directory)
            # past every numbered name, so a new segment never collides with anything left there
            taken = [number for path in self.directory.iterdir() if (number := _segment_number(path)) is not None]
        except OSError as exc:
            raise StoreError(f"cannot open the request journal directory {self.directory}: {exc}") from None
        self.segment_bytes = segment_bytes
        self._next_number = max(taken, default=0) + 1
        self._damaged: set[Path] = set()  # recovered segments to keep aside rather than delete
        self._pending: dict[int, int] = {}  # segment number -> records not durable in the store yet
        self._active: int | None = None
        self._file: Any = None
        self._size = 0
        self._broken = False  # the active segment's tail could not be cut back: start a new one
        self._lock = threading.Lock()

    # -- recovery ---------------------------------------------------------------------------------------

    def recovered_records(self) -> Iterator[RecoveredRecord]:
        """Every intact record of the recovered segments, oldest first (damage is skipped and reported)."""
        for path in self._recovered:
            try:
                data = path.read_bytes()
            except OSError as exc:
                log.error("request journal: cannot read segment %s (%s); it is kept for inspection", path, exc)
                self._damaged.add(path)
                continue
            yield from self._read_segment(path, data)

    def keep_aside(self, segment: Path, why: str) -> None:
        """Keep a recovered segment for inspection (renamed ``N.tgj.damaged``) instead of deleting it."""
        if segment not in self._damaged:
            log.warning("request journal: segment %s is kept as %s%s: %s", segment, segment.name, _DAMAGED_SUFFIX, why)
        self._damaged.add(segment)

    def set_aside(self, record: RecoveredRecord, data: bytes, suffix: str) -> Path:
        """Write ``data`` (``record``'s request, in a form ``tracegrade import`` reads) to a new dead-letter file
        named after the record's place (``<segment>-<offset><suffix>``), durably, before its segment may go.

        Raises StoreError when it cannot be written (the segment then stays, and the replay is retried)."""
        directory = dead_letter_directory(self.directory)
        stem = f"{record.segment.name.split('.')[0]}-{record.offset}"
        partial: Path | None = None
        try:
            directory.mkdir(exist_ok=True)
            # a segment number is used again once the journal was empty: never overwrite an earlier dead letter
            path, copy = directory / f"{stem}{suffix}", 1
            while path.exists():
                copy += 1
                path = directory / f"{stem}.{copy}{suffix}"
            partial = path.with_name(path.name + ".part")
            with open(partial, "wb") as file:
                _write_all(file.fileno(), data)
                os.fsync(file.fileno())
            partial.replace(path)
            fsync_directory(directory)
        except OSError as exc:
            if partial is not None:
                # a half-written copy helps no one, and on a full disk it holds the room the retry needs
                with contextlib.suppress(OSError):
                    partial.unlink(missing_ok=True)
            raise StoreError(
                f"cannot set a journal record aside in {directory}: {exc}; its segment {record.segment} is kept "
                "and the record is set aside again when the journal is next replayed (free space there, or make it "
                "writable)"
            ) from None
        return path

    def dead_letters(self) -> int:
        """Records set aside so far (files in the dead-letter directory; 0 when there is none)."""
        try:
            return sum(1 for path in dead_letter_directory(self.directory).iterdir() if not path.name.endswith(".part"))
        except OSError:
            return 0

    def drop_recovered(self) -> None:
        """Delete the recovered segments (call once their records are durable in the store); damaged ones
        are renamed aside."""
        for path in self._recovered:
            if path in self._damaged:
                path.replace(path.with_name(path.name + _DAMAGED_SUFFIX))
            else:
                path.unlink(missing_ok=True)
        if self._recovered:
            fsync_directory(self.directory)
        self._recovered = []

    def _read_segment(self, path: Path, data: bytes) -> Iterator[RecoveredRecord]:
        offset = 0
        while offset < len(data):
            record = _record_at(data, offset)
            if record is not None:
                kind, payload, end = record
                yield RecoveredRecord(path, offset, kind, payload)
                offset = end
                continue
            resume = _next_record(data, offset + 1)
            if resume is None and _torn_tail(data, offset):
                log.warning(
                    "request journal %s: ignoring %d bytes after offset %d (a record cut short by a crash; "
                    "it was never acknowledged)",
                    path,
                    len(data) - offset,
                    offset,
                )
                return
            end = len(data) if resume is None else resume
            log.error(
                "request journal %s: %d damaged bytes at offset %d skipped; they may hold acknowledged spans "
                "that are now lost (%s)",
                path,
                end - offset,
                offset,
                "recovery went on at the next intact record" if resume is not None else "up to the segment's end",
            )
            self.keep_aside(path, f"{end - offset} damaged bytes at offset {offset}")
            offset = end

    # -- appending --------------------------------------------------------------------------------------

    def append(self, records: list[JournalRecord]) -> int:
        """Append ``records`` and flush them to disk; returns the segment number that holds them.

        Raises StoreError when the disk refuses (nothing of those records is then in the journal, and the
        caller must not acknowledge them).
        """
        with self._lock:
            return self._append(records)

    def _append(self, records: list[JournalRecord]) -> int:
        data = b"".join([part for kind, payload in records for part in (_header(kind, payload), payload)])
        try:
            if self._file is None or self._broken or self._size >= self.segment_bytes:
                self._rotate()
            _write_all(self._file.fileno(), data)
            os.fdatasync(self._file.fileno())
        except OSError as exc:
            self._cut_back()
            raise StoreError(f"cannot write the request journal in {self.directory}: {exc}") from None
        self._size += len(data)
        assert self._active is not None
        self._pending[self._active] = self._pending.get(self._active, 0) + len(records)
        return self._active

    def _cut_back(self) -> None:
        """Remove what a failed append left of itself, so later records follow the last good one."""
        if self._file is None:
            return
        try:
            os.ftruncate(self._file.fileno(), self._size)
            os.fdatasync(self._file.fileno())
        except OSError as exc:
            log.error("request journal: cannot cut segment %s back after a failed append (%s)", self._active, exc)
            self._broken = True  # recovery skips the torn bytes; new records go to a new segment

    def release(self, segment: int, records: int) -> None:
        """``records`` records of ``segment`` are durable in the store; delete segments fully stored."""
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
        """Close the active segment; delete it when everything in it is stored."""
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
            self._file = None
        number = self._next_number
        self._next_number += 1
        # unbuffered: a failed write leaves nothing behind in a buffer to be flushed later
        self._file = open(self.directory / f"{number}{_SUFFIX}", "ab", buffering=0)  # noqa: SIM115
        fsync_directory(self.directory)
        self._active, self._size, self._broken = number, 0, False
        if previous is not None and not self._pending.get(previous):
            (self.directory / f"{previous}{_SUFFIX}").unlink(missing_ok=True)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _record_at(data: bytes, offset: int) -> tuple[int, bytes, int] | None:
    """(kind, payload, end offset) of an intact record starting at ``offset``, or None."""
    magic = data[offset : offset + 4]
    if magic == _MAGIC and offset + _HEADER.size <= len(data):
        _, length, kind, crc = _HEADER.unpack_from(data, offset)
        start = offset + _HEADER.size
        payload = data[start : start + length]
        if length <= MAX_RECORD_BYTES and len(payload) == length and _checksum(length, kind, payload) == crc:
            return kind, payload, start + length
    elif magic == _LEGACY_MAGIC and offset + _LEGACY_HEADER.size <= len(data):
        _, length, crc, kind = _LEGACY_HEADER.unpack_from(data, offset)
        start = offset + _LEGACY_HEADER.size
        payload = data[start : start + length]
        if len(payload) == length and zlib.crc32(payload) == crc:
            return kind, payload, start + length
    return None


def _next_record(data: bytes, offset: int) -> int | None:
    """The offset of the next intact record at or after ``offset``, or None."""
    while True:
        candidates = [at for at in (data.find(_MAGIC, offset), data.find(_LEGACY_MAGIC, offset)) if at >= 0]
        if not candidates:
            return None
        at = min(candidates)
        if _record_at(data, at) is not None:
            return at
        offset = at + 1


def _torn_tail(data: bytes, offset: int) -> bool:
    """Is what starts at ``offset`` (with no intact record after it) a record cut short by the segment's end?"""
    rest = data[offset:]
    if len(rest) < _HEADER.size:
        return _MAGIC.startswith(rest[:4]) or _LEGACY_MAGIC.startswith(rest[:4])
    if rest[:4] == _MAGIC:
        _, length, _, _ = _HEADER.unpack_from(rest)
        return len(rest) - _HEADER.size < length <= MAX_RECORD_BYTES
    if rest[:4] == _LEGACY_MAGIC:
        _, length, _, _ = _LEGACY_HEADER.unpack_from(rest)
        return len(rest) - _LEGACY_HEADER.size < length
    return False
