"""What a decoder returns: the records it kept and the ones it refused (with where and why)."""

from __future__ import annotations

from dataclasses import dataclass, field

from tracegrade.models.span import LogRecordData, SpanRecord

__all__ = ["DecodedLogs", "DecodedTraces", "Rejection"]


@dataclass(slots=True)
class Rejection:
    """One span or log record that was refused; the rest of its batch is kept."""

    where: str
    reason: str
    span_id: str | None = None

    def __str__(self) -> str:
        return f"{self.where}: {self.reason}"


@dataclass(slots=True)
class DecodedTraces:
    spans: list[SpanRecord] = field(default_factory=list)
    rejected: list[Rejection] = field(default_factory=list)

    def extend(self, other: DecodedTraces) -> None:
        self.spans.extend(other.spans)
        self.rejected.extend(other.rejected)


@dataclass(slots=True)
class DecodedLogs:
    records: list[LogRecordData] = field(default_factory=list)
    rejected: list[Rejection] = field(default_factory=list)

    def extend(self, other: DecodedLogs) -> None:
        self.records.extend(other.records)
        self.rejected.extend(other.rejected)
