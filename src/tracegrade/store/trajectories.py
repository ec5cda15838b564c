"""Trajectory tables: map one trace's stored spans (and logs) and turn the result into table rows.

The same mapper as live capture (``tracegrade.trajectory.map_spans``) produces the ExecutionResult;
this module only flattens it into rows of ``traces``, ``node_visits``, ``tool_calls`` and ``llm_calls``
(the trace store replaces a trace's previous rows with them). It imports no DuckDB: the receiver's
mapping process runs it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pyarrow as pa

from tracegrade.models.execution import ExecutionResult, LeanExecution
from tracegrade.models.span import LogRecordData, SpanRecord
from tracegrade.store.rows import compress_json, ns_to_datetime, to_json

__all__ = [
    "TRAJECTORY_TABLES",
    "TrajectoryRows",
    "execution_rows",
    "map_trace",
    "map_traces",
    "rows_to_arrow",
]

TRAJECTORY_TABLES = ("traces", "node_visits", "tool_calls", "llm_calls")


@dataclass
class TrajectoryRows:
    """Rows of the trajectory tables for a set of traces, one list of row dicts per table."""

    tables: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: {t: [] for t in TRAJECTORY_TABLES})

    def add(self, table: str, row: dict[str, Any]) -> None:
        self.tables[table].append(row)

    def to_arrow(self) -> dict[str, pa.Table]:
        """The non-empty tables as Arrow tables, by table name."""
        return {table: rows_to_arrow(rows) for table, rows in self.tables.items() if rows}


_BIGINT = (-(2**63), 2**63 - 1)
_INTEGER = (-(2**31), 2**31 - 1)


def _count(value: int) -> int:
    """A token count as its BIGINT column holds it: a count past the column's range (a sender's hostile attribute,
    or the sum of several) is kept at its bound, which still says "very many"; ``execution`` keeps it whole.
    Unbounded, it failed the build of every trace claimed with its own, which was retried every second for ever."""
    low, high = _BIGINT
    return min(max(value, low), high)


def _index(value: Any) -> int | None:
    """A turn index or step for an INTEGER column; None (unknown) when it is no integer or wider than the column."""
    try:
        number = None if value is None else int(value)
    except (TypeError, ValueError, OverflowError):
        return None
    low, high = _INTEGER
    return number if number is not None and low <= number <= high else None


def _as_text(value: Any) -> str | None:
    return None if value is None else str(value)


def _duration_ms(start_ns: int, end_ns: int) -> float | None:
    return (end_ns - start_ns) / 1e6 if start_ns and end_ns >= start_ns else None


def _root_span(spans: list[SpanRecord]) -> SpanRecord:
    """The earliest span whose parent is not in the trace (the earliest span when every parent is)."""
    ids = {s.span_id for s in spans}
    roots = [s for s in spans if not s.parent_span_id or s.parent_span_id not in ids] or spans
    return min(roots, key=lambda s: s.start_ns)


def _execute(spans: list[SpanRecord], logs: list[LogRecordData]) -> ExecutionResult:
    """Run the shared mapper; a mapper failure becomes a mapping issue instead of stopping the rebuild."""
    # imported here: the mapper pulls in every convention module, which plain store readers never need
    from tracegrade.trajectory import map_spans

    try:
        return map_spans(spans, logs)
    except Exception as exc:  # the store must keep every other trace current whatever one trace holds
        return ExecutionResult(
            trace_ids=[spans[0].trace_id],
            content_captured=False,
            response_captured=False,
            mapping_issues=[f"the trajectory mapper failed on this trace: {type(exc).__name__}: {exc}"],
        )


def map_trace(
    trace_id: str, spans: list[SpanRecord], logs: list[LogRecordData], updated_at: datetime, out: TrajectoryRows
) -> None:
    """Map one trace and append its rows to ``out``."""
    execution_rows(trace_id, _execute(spans, logs), spans, updated_at, out)


def execution_rows(
    trace_id: str, execution: ExecutionResult, spans: list[SpanRecord], updated_at: datetime, out: TrajectoryRows
) -> None:
    """Append the rows of one trace's mapped ``execution`` to ``out``; ``spans`` are the trace's spans.

    Without spans (an execution built by hand, or a dry run) the span-derived columns of the ``traces``
    row are NULL and its ``span_count`` is 0.
    """
    # imported here, as in ``_execute``: the package's first import loads the whole mapper
    from tracegrade.trajectory import MAPPER_REVISION

    root = _root_span(spans) if spans else None
    start_ns = min(s.start_ns for s in spans) if spans else None
    end_ns = max(s.end_ns for s in spans) if spans else None
    usage = execution.token_usage
    meta = execution.metadata
    out.add(
        "traces",
        {
            "trace_id": trace_id,
            "root_name": root.name if root else None,
            "service_name": root.service_name if root else None,
            "start_time": ns_to_datetime(start_ns),
            "end_time": ns_to_datetime(end_ns),
            "duration_ms": (end_ns - start_ns) / 1e6 if start_ns is not None and end_ns is not None else None,
            "status": execution.status,
            "error": execution.error,
            "convention": execution.convention,
            "user_query": execution.user_query,
            "final_response": execution.actual_response if execution.response_captured else None,
            "response_captured": execution.response_captured,
            "content_captured": execution.content_captured,
            "span_count": len(spans),
            "error_spans": sum(1 for s in spans if s.status_code == "ERROR"),
            "llm_calls": len(execution.llm_calls),
            "tool_calls": len(execution.tool_calls),
            "tool_names": sorted({call.name for call in execution.tool_calls}),
            "node_visits": len(execution.visits),
            "input_tokens": _count(usage.input_tokens),
            "output_tokens": _count(usage.output_tokens),
            "total_tokens": _count(usage.total_tokens),
            "eval_set_id": _as_text(meta.get("eval_set_id")),
            "case_id": _as_text(meta.get("case_id")),
            "turn_index": _index(meta.get("turn_index")),
            "run_id": _as_text(meta.get("run_id")),
            "conversation_id": execution.conversation_id,
            "dropped_attributes": sum(s.dropped_attributes_count for s in spans),
            "mapping_issues": to_json(execution.mapping_issues),
            "execution": compress_json(execution.model_dump_json()),
            "updated_at": updated_at,
            "lean_execution": compress_json(LeanExecution.dump_json(execution)),
            "mapper_revision": MAPPER_REVISION,
        },
    )
    for seq, visit in enumerate(execution.visits):
        out.add(
            "node_visits",
            {
                "trace_id": trace_id,
                "seq": seq,
                "name": visit.name,
                "span_id": visit.span_id,
                "parent_name": visit.parent_name,
                "parallel_group": visit.parallel_group,
                "step": _index(visit.step),
                "start_time": ns_to_datetime(visit.start_ns) if visit.start_ns else None,
                "duration_ms": _duration_ms(visit.start_ns, visit.end_ns),
                "status": visit.status,
            },
        )
    for seq, call in enumerate(execution.tool_calls):
        out.add(
            "tool_calls",
            {
                "trace_id": trace_id,
                "seq": seq,
                "name": call.name,
                "call_id": call.call_id,
                "arguments": to_json(call.args) if call.args_captured else None,
                "result": to_json(call.result) if call.result_captured else None,
                "args_captured": call.args_captured,
                "result_captured": call.result_captured,
                "error": call.error,
                "duration_ms": None if call.duration_seconds is None else call.duration_seconds * 1000.0,
                "span_id": call.span_id,
            },
        )
    for seq, llm in enumerate(execution.llm_calls):
        out.add(
            "llm_calls",
            {
                "trace_id": trace_id,
                "seq": seq,
                "model": llm.model,
                "provider": llm.provider,
                "node": llm.node,
                "input_tokens": _count(llm.token_usage.input_tokens),
                "output_tokens": _count(llm.token_usage.output_tokens),
                "total_tokens": _count(llm.token_usage.total_tokens),
                "output_text": llm.output_text,
                "content_captured": llm.content_captured,
                "finish_reason": llm.finish_reason,
                "error": llm.error,
                "span_id": llm.span_id,
                "start_time": ns_to_datetime(llm.start_ns) if llm.start_ns else None,
                "duration_ms": _duration_ms(llm.start_ns, llm.end_ns),
            },
        )


def map_traces(
    spans: dict[str, list[SpanRecord]], logs: dict[str, list[LogRecordData]], updated_at: datetime
) -> TrajectoryRows:
    """Map every trace of ``spans`` (by trace id, with its log records) into one set of rows."""
    rows = TrajectoryRows()
    for trace_id, trace_spans in spans.items():
        map_trace(trace_id, trace_spans, logs.get(trace_id, []), updated_at, rows)
    return rows


def rows_to_arrow(rows: list[dict[str, Any]]) -> pa.Table:
    """Row dicts (all with the same keys) as an Arrow table, a column at a time (faster than
    ``Table.from_pylist``, which looks every key up row by row)."""
    return pa.table({column: [row[column] for row in rows] for column in rows[0]})
