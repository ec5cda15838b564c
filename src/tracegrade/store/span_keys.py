"""Which spans of a batch are stored already: the writer's (tenant, trace_id, span_id) uniqueness check.

The ``spans`` table has no primary key (an ART index costs the writer about as much as the rest of the
insert, and its memory grows with the store). Instead, before each insert the writer looks the batch's
ids up in the rows whose ``start_ns`` lies within the batch's start times. A re-sent span (exporter
retry, journal replay, re-import) carries the same start time as the stored copy, and DuckDB skips every
row group whose ``start_ns`` range misses the searched ranges, so the lookup reads only the few row groups
of the same period instead of the whole table. A copy sent with the same ids but another start time is
not a re-send of the same span and is stored as sent.

The range scans feed ONE semi join against the batch. A join per range would each take its own hash
table, sized by DuckDB rather than by the batch, and with start times spread over minutes sixteen of them
overran the store's default memory limit (bench/RESULTS.md, store writes).
"""

from __future__ import annotations

import duckdb
import pyarrow as pa

from tracegrade.store.duckdb_api import registered

__all__ = ["START_GAP_NS", "start_ranges", "stored_span_keys"]

# Start times further apart than this are searched as separate ranges (a long agent run's root span
# starts minutes before its last tool call: one range over both would read every row group in between).
START_GAP_NS = 10 * 10**9
MAX_RANGES = 16  # beyond this, the closest ranges are merged (each range is one more scan in the query)

_BATCH_VIEW = "_tracegrade_span_keys"


def start_ranges(starts: list[int], gap_ns: int = START_GAP_NS, limit: int = MAX_RANGES) -> list[tuple[int, int]]:
    """The start times grouped into at most ``limit`` ranges ``(low, high)``, split at the widest gaps
    over ``gap_ns``."""
    ordered = sorted(set(starts))
    if not ordered:
        return []
    gaps = sorted(
        ((ordered[i + 1] - ordered[i], i) for i in range(len(ordered) - 1) if ordered[i + 1] - ordered[i] > gap_ns),
        reverse=True,
    )[: limit - 1]
    ranges: list[tuple[int, int]] = []
    low = ordered[0]
    for _, i in sorted(gaps, key=lambda gap: gap[1]):
        ranges.append((low, ordered[i]))
        low = ordered[i + 1]
    ranges.append((low, ordered[-1]))
    return ranges


def stored_span_keys(con: duckdb.DuckDBPyConnection, batch: pa.Table) -> set[tuple[str, str, str]]:
    """The ``(tenant, trace_id, span_id)`` keys of ``batch`` (columns tenant, trace_id, span_id, start_ns)
    that the ``spans`` table already holds, looked up within the batch's start-time ranges."""
    ranges = start_ranges(batch.column("start_ns").to_pylist())
    if not ranges:
        return set()
    scans = " UNION ALL ".join(
        f"SELECT tenant, trace_id, span_id FROM spans WHERE start_ns BETWEEN {low} AND {high}" for low, high in ranges
    )
    searches = (
        f"SELECT s.tenant, s.trace_id, s.span_id FROM ({scans}) s SEMI JOIN {_BATCH_VIEW} k "
        "ON s.trace_id = k.trace_id AND s.span_id = k.span_id AND s.tenant = k.tenant"
    )
    with registered(con, _BATCH_VIEW, batch.select(["tenant", "trace_id", "span_id"])):
        return {(tenant, trace_id, span_id) for tenant, trace_id, span_id in con.execute(searches).fetchall()}
