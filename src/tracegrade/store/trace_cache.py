"""Recently written traces kept in memory, so a settling trace is mapped without re-reading the store.

``RecentTraces`` holds, by trace id, the span and log records the writer committed, but only for
traces whose every stored record went through it ("complete" entries): a trace is new — nothing of it
stored before — when its id is not in ``SeenTraceIds``, a Bloom filter of every trace id in the store
(filled from the store when the writer starts, then from each write). The cache is bounded by an
estimate of its memory; the least recently written trace goes first. A trace without a complete entry
(stored before the writer started, evicted, or a filter false positive) is loaded from the store when
it is mapped, so the cache only ever saves reads: it never changes what is mapped.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field

from tracegrade.models.span import LogRecordData, SpanRecord

__all__ = ["CachedTrace", "RecentTraces", "SeenTraceIds"]

# Python objects of a decoded record (dict, strings, dataclass) take about twice their Arrow size,
# plus a fixed part
_OBJECT_FACTOR = 2.0
_RECORD_OVERHEAD = 400


def _span_order(span: SpanRecord) -> tuple[int, str]:
    return span.start_ns, span.span_id


def _log_order(record: LogRecordData) -> int:
    return record.time_ns


class SeenTraceIds:
    """A Bloom filter of trace ids: ``trace_id in seen`` is True for every id added (and, rarely, for
    others). Sized for ``expected`` ids at about 16 bits each (under 0.5% false positives); more ids
    only raise that rate."""

    _HASHES = 3

    def __init__(self, expected: int = 0) -> None:
        bits = 1 << max(23, (16 * expected).bit_length())  # at least 1 MiB
        self._mask = bits - 1
        self._bits = bytearray(bits // 8)

    def _positions(self, trace_id: str) -> list[int]:
        h = hash(trace_id)  # per-process salt is fine: the filter lives in memory only
        step = (h >> 32) | 1
        return [(h + i * step) & self._mask for i in range(self._HASHES)]

    def add(self, trace_id: str) -> None:
        for bit in self._positions(trace_id):
            self._bits[bit >> 3] |= 1 << (bit & 7)

    def update(self, trace_ids: Iterable[str]) -> None:
        for trace_id in trace_ids:
            self.add(trace_id)

    def __contains__(self, trace_id: str) -> bool:
        return all(self._bits[bit >> 3] & (1 << (bit & 7)) for bit in self._positions(trace_id))


@dataclass(slots=True)
class CachedTrace:
    """Every stored record of one trace. ``has_rows``: trajectory rows may exist (a rebuild must
    delete them first); False only for a trace first stored by this writer and not mapped yet.
    ``rooted``: its root span (one without a parent) is among the spans."""

    spans: list[SpanRecord] = field(default_factory=list)
    logs: list[LogRecordData] = field(default_factory=list)
    size: int = 0
    has_rows: bool = False
    rooted: bool = False


class RecentTraces:
    """Complete records of recently written traces, bounded to about ``max_bytes`` of memory."""

    def __init__(self, seen: SeenTraceIds, max_bytes: int) -> None:
        self.seen = seen
        self.max_bytes = max_bytes
        self._entries: OrderedDict[str, CachedTrace] = OrderedDict()
        self._bytes = 0
        self.evicted = 0

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def size_bytes(self) -> int:
        return self._bytes

    def add(self, spans: list[SpanRecord], logs: list[LogRecordData], bytes_per_record: float) -> None:
        """Record what one committed write inserted (records stored for the first time only)."""
        record_size = int(bytes_per_record * _OBJECT_FACTOR) + _RECORD_OVERHEAD
        touched: dict[str, CachedTrace | None] = {}
        for records, is_span in ((spans, True), (logs, False)):
            for record in records:
                trace_id = record.trace_id
                if not trace_id:
                    continue
                entry = touched.get(trace_id, False)
                if entry is False:
                    entry = touched[trace_id] = self._entry_for(trace_id)
                if entry is None:
                    continue
                if is_span:
                    entry.spans.append(record)  # type: ignore[arg-type]
                    entry.rooted = entry.rooted or not record.parent_span_id  # type: ignore[union-attr]
                else:
                    entry.logs.append(record)  # type: ignore[arg-type]
                entry.size += record_size
                self._bytes += record_size
        self._evict()

    def _entry_for(self, trace_id: str) -> CachedTrace | None:
        """The entry to extend (moved to the most recent end), a new one for a new trace, else None."""
        entry = self._entries.get(trace_id)
        if entry is not None:
            self._entries.move_to_end(trace_id)
            return entry
        if trace_id in self.seen:  # stored before (or evicted): the cache cannot know all its records
            return None
        self.seen.add(trace_id)
        entry = self._entries[trace_id] = CachedTrace()
        return entry

    def _evict(self) -> None:
        while self._bytes > self.max_bytes and self._entries:
            _, entry = self._entries.popitem(last=False)
            self._bytes -= entry.size
            self.evicted += 1

    def take_for_mapping(self, trace_id: str) -> CachedTrace | None:
        """A snapshot of the trace's records for mapping it now (None: load it from the store).

        The entry stays cached for late records; it is marked as having rows from now on. Records come
        in the store's order (spans by start time and id, log records by time), as loading them would.
        """
        entry = self._entries.get(trace_id)
        if entry is None:
            return None
        spans = sorted(entry.spans, key=_span_order)
        logs = sorted(entry.logs, key=_log_order)
        snapshot = CachedTrace(spans, logs, entry.size, entry.has_rows, entry.rooted)
        entry.has_rows = True
        return snapshot

    def rooted(self, trace_ids: Iterable[str]) -> set[str]:
        """Those of ``trace_ids`` whose cached spans include their root span."""
        entries = self._entries
        return {t for t in trace_ids if (entry := entries.get(t)) is not None and entry.rooted}
