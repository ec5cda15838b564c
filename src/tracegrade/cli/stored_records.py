"""Read a store's spans and log records back as records, page by page, for ``tracegrade export --format otlp``.

Memory stays bounded whatever the store holds: each page is a window of the records' times
(``spans.start_ns``, ``logs.time``) holding about ``page_size`` rows. A first, narrow query finds where the
window ends (the times of its first ``page_size`` + 1 records: one integer column), a second reads the
window's rows. Rows are stored in arrival order, so DuckDB's zone maps on those columns skip most of the
file for both, and no query sorts the whole table. Only records sharing one exact time can make a page
larger than ``page_size`` (all of them are in the same window).

The queries are plain read-only SELECTs through the store's ``query``, so they work the same on a file, a lake,
through a running server (which caps a query's rows: a page stays far below) and as a ``--tenant``'s view.
JSON columns are cast to text, the form ``span_from_row`` and ``log_from_row`` parse, whichever store answers.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from tracegrade.models.span import LogRecordData, SpanRecord
from tracegrade.store.access import ReadableStore
from tracegrade.store.rows import log_from_row, span_from_row, sql_string_in

__all__ = ["PAGE_SIZE", "Selection", "log_pages", "span_pages", "tenants_of"]

PAGE_SIZE = 1_000  # rows per page: a few MB of agent spans in memory at once

# SPAN_SELECT_COLUMNS and LOG_SELECT_COLUMNS, in that order, JSON cast to text
_ENVELOPE = (
    "resource_schema_url, resource_dropped_attributes_count, scope_attributes::VARCHAR, scope_schema_url, "
    "scope_dropped_attributes_count"
)
_SPAN_COLUMNS = (
    "trace_id, span_id, parent_span_id, name, kind, scope_name, scope_version, start_ns, end_ns, "
    "status_code, status_message, attributes::VARCHAR, events::VARCHAR, links::VARCHAR, resource::VARCHAR, "
    f"trace_state, flags, dropped_attributes_count, dropped_events_count, dropped_links_count, {_ENVELOPE}"
)
_LOG_COLUMNS = (
    "trace_id, span_id, time_ns, observed_time_ns, event_name, severity_number, severity_text, body::VARCHAR, "
    f"attributes::VARCHAR, resource::VARCHAR, scope_name, flags, dropped_attributes_count, scope_version, {_ENVELOPE}"
)


@dataclass(frozen=True)
class Selection:
    """Which records to export: of these traces only (empty: every trace), and within ``[since_ns, until_ns)``
    (spans by start time, log records by time; None: unbounded)."""

    trace_ids: tuple[str, ...] = ()
    since_ns: int | None = None
    until_ns: int | None = None


@dataclass(frozen=True)
class _Table:
    """How one table is paged: its window key (as selected, as compared with an integer parameter)."""

    name: str
    columns: str
    key: str  # the window key as an integer (Unix ns or µs)
    at_least: str  # "key >= ?" in a form whose comparison DuckDB can check against its zone maps
    below: str  # "key < ?" likewise
    order: str  # a total order within the window, so a page reads the same way every time
    time_scale: int  # selection ns -> key units


_SPANS = _Table("spans", _SPAN_COLUMNS, "start_ns", "start_ns >= ?", "start_ns < ?", "start_ns, trace_id, span_id", 1)
# logs are paged by ``time`` (the event time, else the observed time, to the microsecond), the column a time range
# means for them everywhere else (``tracegrade sql``, SCHEMA.md)
_LOGS = _Table(
    "logs",
    _LOG_COLUMNS,
    "epoch_us(time)",
    "time >= make_timestamp(?)",
    "time < make_timestamp(?)",
    "time, log_key",
    1_000,
)


def span_pages(store: ReadableStore, selection: Selection, page_size: int = PAGE_SIZE) -> Iterator[list[SpanRecord]]:
    """The selected spans, a page at a time, in start-time order. The spans of a page that share a resource (or
    scope attributes) share one dict of them, as the decoders give them."""
    for rows in _pages(store, _SPANS, selection, page_size):
        resources: dict[str, dict[str, Any]] = {}
        yield [span_from_row(row, resources) for row in rows]


def log_pages(store: ReadableStore, selection: Selection, page_size: int = PAGE_SIZE) -> Iterator[list[LogRecordData]]:
    """The selected log records, a page at a time, in time order; those of a page that share a resource (or scope
    attributes) share one dict of them, as spans do."""
    for rows in _pages(store, _LOGS, selection, page_size):
        shared: dict[str, dict[str, Any]] = {}
        yield [log_from_row(row, shared) for row in rows]


def tenants_of(store: ReadableStore, selection: Selection) -> list[str]:
    """The tenants whose spans or log records the selection holds (at most three: enough to tell one from
    several), for a warning: OTLP carries no tenant, so an export of several mixes them."""
    found: set[str] = set()
    for table in (_SPANS, _LOGS):
        conditions, params = _conditions(table, selection)
        where = f" WHERE {' AND '.join(conditions)}" if conditions else ""
        rows = store.query(f"SELECT DISTINCT tenant FROM {table.name}{where} LIMIT 3", params).rows
        found.update(str(row[0]) for row in rows)
    return sorted(found)


def _conditions(table: _Table, selection: Selection) -> tuple[list[str], list[Any]]:
    conditions: list[str] = []
    params: list[Any] = []
    if selection.trace_ids:
        among, among_params = sql_string_in(selection.trace_ids)
        conditions.append(f"trace_id IN {among}")
        params += among_params
    if selection.since_ns is not None:
        conditions.append(table.at_least)
        params.append(selection.since_ns // table.time_scale)
    if selection.until_ns is not None:
        conditions.append(table.below)
        params.append(-(-selection.until_ns // table.time_scale))  # rounded up: a bound within a µs keeps it
    return conditions, params


def _pages(store: ReadableStore, table: _Table, selection: Selection, page_size: int) -> Iterator[Sequence[Any]]:
    """The rows of ``table`` the selection holds, window by window (see the module docstring)."""
    base, base_params = _conditions(table, selection)
    low: int | None = None
    while True:
        conditions, params = list(base), list(base_params)
        if low is not None:
            conditions.append(table.at_least)
            params.append(low)
        high = _window_end(store, table, conditions, params, page_size)
        window, window_params = list(conditions), list(params)
        if high is not None:
            window.append(table.below)
            window_params.append(high)
        where = f" WHERE {' AND '.join(window)}" if window else ""
        rows = store.query(f"SELECT {table.columns} FROM {table.name}{where} ORDER BY {table.order}", window_params)
        if rows.rows:
            yield rows.rows
        if high is None:
            return
        low = high


def _window_end(
    store: ReadableStore, table: _Table, conditions: list[str], params: list[Any], page_size: int
) -> int | None:
    """Where the window that starts at the conditions' lower bound ends (exclusive): the key of the row after
    its first ``page_size`` rows, or, when all of those share the first key, the next key past it; None when the
    rest of the table fits in one page."""
    where = f" WHERE {' AND '.join(conditions)}" if conditions else ""
    keys = store.query(
        f"SELECT {table.key} FROM {table.name}{where} ORDER BY {table.key} LIMIT {int(page_size) + 1}", params
    ).rows
    if len(keys) <= page_size:
        return None
    first, high = int(keys[0][0]), int(keys[-1][0])
    if high > first:
        return high
    # every row of the first page shares the window's first key: the window is that key's rows
    past = store.query(
        f"SELECT min({table.key}) FROM {table.name}{where}{' AND' if conditions else ' WHERE'} {table.key} > ?",
        [*params, high],
    ).rows[0][0]
    return None if past is None else int(past)
