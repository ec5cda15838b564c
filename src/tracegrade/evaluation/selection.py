"""Picking stored traces for grading: a SQL predicate, a time window, a deterministic sample, a limit.

Sampling is by trace id: a trace is in a sample of rate ``r`` when the first 32 bits of the MD5 of its
id, read as a number, fall below ``r * 2**32``. The same trace is therefore always in or out of a
given sample (on any machine, in any DuckDB version), and a larger rate keeps every trace a smaller one
picked.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from tracegrade.evaluation.timewindow import parse_since
from tracegrade.models.execution import ExecutionResult

__all__ = [
    "QueryableStore",
    "TraceSelection",
    "in_sample",
    "iter_executions",
    "load_executions",
    "sample_predicate",
    "selected_trace_ids",
    "selection_sql",
    "selection_where",
]

_SAMPLE_SPACE = 1 << 32
LOAD_CHUNK = 2000  # trace ids per query when loading stored executions


class QueryableStore(Protocol):
    """Anything with ``query(sql, params)`` returning an object with ``columns`` and ``rows``."""

    def query(self, sql: str, params: Any = None) -> Any: ...


@dataclass
class TraceSelection:
    """Which stored traces reference-free grading (or case export) picks.

    ``where`` is a SQL predicate over the ``traces`` table; ``since`` a duration such as ``"2h"`` or an
    ISO timestamp; ``sample`` a fraction in (0, 1] chosen deterministically by trace id (so re-runs pick the
    same traces); ``limit`` caps the count (newest first); ``trace_ids`` restricts to those traces.
    """

    where: str | None = None
    since: str | None = None
    sample: float | None = None
    limit: int | None = None
    trace_ids: list[str] | None = None


def _check_rate(rate: float) -> None:
    if not 0 < rate <= 1:
        raise ValueError(f"--sample must be a fraction in (0, 1], got {rate}")


def sample_predicate(rate: float, column: str = "trace_id") -> str:
    """SQL that is true for the traces in a sample of ``rate`` (see the module docstring)."""
    _check_rate(rate)
    return f"(('0x' || substr(md5({column}), 1, 8))::UBIGINT < {int(rate * _SAMPLE_SPACE)})"


def in_sample(trace_id: str, rate: float) -> bool:
    """The Python twin of :func:`sample_predicate` (same answer for the same trace id and rate)."""
    _check_rate(rate)
    return int(hashlib.md5(trace_id.encode()).hexdigest()[:8], 16) < int(rate * _SAMPLE_SPACE)


def selection_where(sel: TraceSelection) -> tuple[str, list[object]]:
    """The WHERE clause (over ``traces``) and its parameters; ValueError for a bad since/sample/limit."""
    clauses, params = ["TRUE"], []
    if sel.where and sel.where.strip():
        clauses.append(f"({sel.where})")
    if sel.trace_ids is not None:
        clauses.append("trace_id IN (SELECT unnest(?::VARCHAR[]))")
        params.append(list(sel.trace_ids))
    if sel.since:
        clauses.append("start_time >= ?")
        params.append(parse_since(sel.since))
    if sel.sample is not None:
        clauses.append(sample_predicate(sel.sample))
    if sel.limit is not None and sel.limit < 1:
        raise ValueError(f"--limit must be at least 1, got {sel.limit}")
    return " AND ".join(clauses), params


def selection_sql(sel: TraceSelection) -> tuple[str, list[object]]:
    """The query that lists the selected trace ids, newest first."""
    where, params = selection_where(sel)
    sql = f"SELECT trace_id FROM traces WHERE {where} ORDER BY start_time DESC, trace_id"
    if sel.limit is not None:
        sql += f" LIMIT {int(sel.limit)}"
    return sql, params


def selected_trace_ids(store: QueryableStore, sel: TraceSelection) -> list[str]:
    sql, params = selection_sql(sel)
    return [row[0] for row in store.query(sql, params).rows]


def iter_executions(
    store: QueryableStore, trace_ids: Sequence[str], chunk: int = LOAD_CHUNK
) -> Iterator[tuple[str, ExecutionResult | None]]:
    """``(trace_id, stored execution or None)`` for each id, in order; one query per ``chunk`` ids.

    Streaming keeps memory flat when grading a large selection: only one chunk of executions is alive
    at a time.
    """
    for start in range(0, len(trace_ids), chunk):
        part = list(trace_ids[start : start + chunk])
        rows = store.query(
            "SELECT trace_id, execution FROM traces WHERE trace_id IN (SELECT unnest(?::VARCHAR[]))", [part]
        ).rows
        found = {tid: text for tid, text in rows if text}
        for tid in part:
            text = found.get(tid)
            yield tid, ExecutionResult.model_validate_json(text) if text else None


def load_executions(store: QueryableStore, trace_ids: Sequence[str]) -> dict[str, ExecutionResult]:
    """The stored trajectory (``traces.execution``) of each trace id found."""
    return {tid: ex for tid, ex in iter_executions(store, list(dict.fromkeys(trace_ids))) if ex is not None}
