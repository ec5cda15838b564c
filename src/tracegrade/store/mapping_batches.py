"""Mapping batches: a build claim's traces split so that what the mapper holds at once stays within a byte budget.

A claim holds up to ``rebuild_traces`` traces whatever their size. Its spans are loaded as one Arrow table (the
columns as stored), but mapping turns them into Python records several times their size: 250 traces of tens of
thousands of spans, or of attribute values of megabytes, would all be records at once. So the loaded table is
sized trace by trace (``span_bytes``: its text columns' bytes, plus a flat amount a span) and its traces are
mapped in order, in batches of at most the budget. A trace over the budget by itself is a batch of its own:
mapped whole, never split (the mapper needs the whole trace) nor skipped. Sizing the loaded table costs no
second read of the store.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

__all__ = [
    "DEFAULT_MAPPING_BATCH_BYTES",
    "MIN_MAPPING_BATCH_BYTES",
    "MappingBatch",
    "batch_tables",
    "span_bytes",
    "split_by_bytes",
]

# Each MB of a batch's spans is several MB of records while it is mapped (bench/RESULTS.md,
# bench_mapping_batch_memory), while a claim of 250 ordinary agent traces (ten spans of a few KB) stays one batch.
DEFAULT_MAPPING_BATCH_BYTES = 16 * 1024 * 1024
MIN_MAPPING_BATCH_BYTES = 64 * 1024  # the least a receiver or a command may be given
_SIZED_COLUMNS = ("name", "attributes", "events", "links", "resource")
# a span of empty attributes still becomes a Python record to map: its ids, times and status
_SPAN_OVERHEAD = 512


@dataclass(slots=True)
class MappingBatch:
    """Traces mapped together, and their spans' bytes (``span_bytes`` summed)."""

    trace_ids: list[str] = field(default_factory=list)
    span_bytes: int = 0


def span_bytes(spans: pa.Table) -> dict[str, int]:
    """The bytes of each trace's spans in ``spans`` (loaded with the store's span columns): the text of
    its name, attributes, events, links and resource, plus a flat amount a span. A trace without spans is left
    out."""
    if spans.num_rows == 0:
        return {}
    sizes = pa.array([_SPAN_OVERHEAD] * spans.num_rows, pa.int64())
    for column in _SIZED_COLUMNS:
        lengths = pc.fill_null(pc.binary_length(spans.column(column)), 0)
        sizes = pc.add(sizes, pc.cast(lengths, pa.int64()))
    summed = (
        pa.table({"trace_id": spans.column("trace_id"), "bytes": sizes})
        .group_by("trace_id")
        .aggregate([("bytes", "sum")])
    )
    return dict(zip(summed.column("trace_id").to_pylist(), summed.column("bytes_sum").to_pylist()))


def split_by_bytes(trace_ids: Sequence[str], sizes: Mapping[str, int], budget: int) -> list[MappingBatch]:
    """``trace_ids`` in order, in batches of at most ``budget`` bytes by ``sizes`` (a trace over it alone).

    A trace missing from ``sizes`` has no stored spans: it costs nothing to map (its rows are only cleared).
    """
    batches: list[MappingBatch] = []
    batch = MappingBatch()
    for trace_id in trace_ids:
        size = sizes.get(trace_id, 0)
        if batch.trace_ids and batch.span_bytes + size > budget:
            batches.append(batch)
            batch = MappingBatch()
        batch.trace_ids.append(trace_id)
        batch.span_bytes += size
    if batch.trace_ids:
        batches.append(batch)
    return batches


def batch_tables(table: pa.Table, batch: MappingBatch, whole: bool) -> pa.Table:
    """The rows of ``table`` (spans or log records, with a ``trace_id`` column) of the batch's traces; the table
    itself when the batch is ``whole`` (the claim's only one)."""
    if whole:
        return table
    return table.filter(pc.is_in(table.column("trace_id"), value_set=pa.array(batch.trace_ids, pa.string())))
