"""The status filter of trace lists (the UI, its API, MCP's ``list_traces`` and ``tracegrade traces``).

A trace's ``status`` is its root span's, so a tool that failed inside a run that recovered leaves the trace
OK; ``span_error`` finds those too, from ``traces.error_spans`` (schema version 11).
"""

from __future__ import annotations

__all__ = ["STATUS_FILTERS", "status_condition"]

#: filter value -> (condition on the traces table, what it keeps)
STATUS_FILTERS: dict[str, tuple[str, str]] = {
    "ok": ("status <> 'ERROR'", "the run did not fail (its root span's status is not ERROR)"),
    "error": ("status = 'ERROR'", "the run failed (its root span's status is ERROR)"),
    "span_error": (
        "error_spans > 0",
        "some span failed (status ERROR), a tool inside a run that recovered included",
    ),
}


def status_condition(value: str) -> str:
    """The condition for a status filter value (KeyError for a value not in STATUS_FILTERS)."""
    return STATUS_FILTERS[value][0]
