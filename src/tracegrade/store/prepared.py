"""PreparedWrite: spans and log records already in the store's Arrow layout, ready for one INSERT.

Converting records to Arrow is the Python half of a write. ``prepare_write`` does it in the thread that
submits (the receiver's decode threads), so the single writer thread spends its time in DuckDB, and a
queued write holds compact Arrow buffers instead of Python objects. ``received_at`` is added at
commit time (it is stamped under the store's write lock).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa

from tracegrade.models.span import LogRecordData, SpanRecord
from tracegrade.store.rows import logs_to_arrow, spans_to_arrow

__all__ = ["PreparedWrite", "prepare_write"]


@dataclass(frozen=True, slots=True)
class PreparedWrite:
    """One submission: ``spans`` and ``logs`` tables (logs already unique by content) and how many
    records were sent (duplicates included), for the WriteResult counts."""

    spans: pa.Table | None
    logs: pa.Table | None
    spans_sent: int
    logs_sent: int

    @property
    def size(self) -> int:
        """Records as sent (what the write queue counts)."""
        return self.spans_sent + self.logs_sent


def prepare_write(spans: Sequence[SpanRecord], logs: Sequence[LogRecordData] = ()) -> PreparedWrite:
    """Convert records for a write (no ``received_at`` column yet)."""
    span_table = spans_to_arrow(spans) if spans else None
    log_table = logs_to_arrow(logs)[1] if logs else None
    return PreparedWrite(span_table, log_table, len(spans), len(logs))
