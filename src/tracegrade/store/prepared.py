"""PreparedWrite: spans and log records already in the store's Arrow layout, ready for one INSERT.

Converting records to Arrow is the Python half of a write. ``prepare_write`` does it in the thread that
submits (the receiver's decode threads), so the single writer thread spends its time in DuckDB, and a
queued write holds compact Arrow buffers instead of Python objects. Every row carries the submission's
tenant. ``received_at`` is added at commit time (it is stamped under the store's write lock).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields, is_dataclass

import pyarrow as pa

from tracegrade.errors import StoreError
from tracegrade.models.span import LogRecordData, SpanRecord
from tracegrade.store.rows import logs_to_arrow, spans_to_arrow
from tracegrade.store.tenancy import DEFAULT_TENANT, with_tenant

__all__ = ["PreparedWrite", "prepare_write"]


@dataclass(frozen=True, slots=True)
class PreparedWrite:
    """One submission of one tenant: ``spans`` and ``logs`` tables (logs already unique by content, both
    with the ``tenant`` column) and how many records were sent (duplicates included), for the WriteResult
    counts.

    ``fresh``: the records come straight from an exporter's request (not a journal replay or an import),
    so a copy of them is stored already only if the exporter re-sent a request whose acknowledgement it
    lost; a store whose reads show one copy per span may skip looking them up (``TraceStore``).
    """

    spans: pa.Table | None
    logs: pa.Table | None
    spans_sent: int
    logs_sent: int
    tenant: str = DEFAULT_TENANT
    fresh: bool = False

    @property
    def size(self) -> int:
        """Records as sent (what the write queue counts)."""
        return self.spans_sent + self.logs_sent


def prepare_write(
    spans: Sequence[SpanRecord],
    logs: Sequence[LogRecordData] = (),
    tenant: str = DEFAULT_TENANT,
    *,
    fresh: bool = False,
) -> PreparedWrite:
    """Convert ``tenant``'s records for a write (no ``received_at`` column yet); ``fresh``: see PreparedWrite.

    Raises StoreError, naming the record and field, when a string holds an unpaired surrogate: it is not
    valid Unicode and cannot be stored. (The OTLP decoders refuse such input; only records built in Python
    can carry one.)
    """
    try:
        span_table = with_tenant(spans_to_arrow(spans), tenant) if spans else None
        log_table = with_tenant(logs_to_arrow(logs)[1], tenant) if logs else None
    except UnicodeEncodeError:
        raise StoreError(_describe_unencodable([*spans, *logs])) from None
    return PreparedWrite(span_table, log_table, len(spans), len(logs), tenant, fresh)


def _describe_unencodable(records: Sequence[SpanRecord | LogRecordData]) -> str:
    """Which record and field hold text that UTF-8 cannot encode."""
    for record in records:
        for field in fields(record):
            value = getattr(record, field.name)
            if isinstance(value, list):
                value = [asdict(item) if is_dataclass(item) else item for item in value]  # type: ignore[arg-type]
            try:
                json.dumps(value, ensure_ascii=False, default=str).encode("utf-8")
            except UnicodeEncodeError:
                what = (
                    f"span {record.trace_id}/{record.span_id} ({record.name!r})"
                    if isinstance(record, SpanRecord)
                    else f"log record of span {record.trace_id}/{record.span_id} at {record.time_ns}"
                )
                return (
                    f"{what}: its {field.name} hold an unpaired surrogate (\\ud800-\\udfff), which is not valid "
                    "Unicode and cannot be stored; nothing of this write was stored (replace the surrogate, e.g. "
                    "with text.encode('utf-16', 'surrogatepass').decode('utf-16', 'replace'))"
                )
    return "a record holds text that cannot be encoded as UTF-8; nothing of this write was stored"
