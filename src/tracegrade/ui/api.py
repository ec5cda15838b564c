"""What the web UI, its JSON endpoints and the MCP server read: plain functions over a store.

Every function takes anything with ``query(sql, params)`` (a read-only ``TraceStore``, the receiver's store,
a ``RemoteStore``), so every read goes through the store's query sandbox. User input only ever reaches SQL
as a bound parameter; the one exception is ``run_sql``, whose text the sandbox gate checks first.

The trace list is paged by keyset (``start_time``, ``trace_id``) rather than OFFSET: a page deep in a store
of millions of spans costs what the first page costs.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any, Protocol, TypeVar

from tracegrade.errors import InvalidValueError, TracegradeError
from tracegrade.evaluation.run_diff import diff_reports
from tracegrade.evaluation.run_outcomes import Case, RunOutcomes
from tracegrade.evaluation.run_records import load_run, load_run_outcomes
from tracegrade.evaluation.statistics import wilson_interval
from tracegrade.models.execution import ExecutionResult
from tracegrade.models.results import EvalCaseResult, EvalReport
from tracegrade.reporters.case_view import case_score, case_status, criterion_status, split_details
from tracegrade.store.query_control import QueryControl
from tracegrade.store.results import QueryResult, json_safe
from tracegrade.store.rows import decompress_json
from tracegrade.store.trace_status import STATUS_FILTERS, status_condition
from tracegrade.timespec import parse_since

__all__ = [
    "SQL_ROW_LIMIT",
    "SUMMARY_KEYS",
    "BadRequest",
    "NotFound",
    "Store",
    "TraceFilters",
    "case_summary",
    "diff_runs",
    "facets",
    "failing_cases",
    "list_runs",
    "list_traces",
    "run_report",
    "run_sql",
    "schema",
    "span_detail",
    "trace_detail",
]

SQL_ROW_LIMIT = 1000  # rows of an ad-hoc query fetched and sent back (the rest is never produced)
SQL_BYTE_LIMIT = 8 * 1024 * 1024  # and at most about this much of their values: a page or an agent reads no more
MAX_PAGE = 200
SUMMARY_KEYS = {
    "total_cases",
    "passed_cases",
    "failed_cases",
    "error_cases",
    "pass_rate",
    "total_duration_seconds",
}  # a run's counts, in brief

_LIST_COLUMNS = (
    "trace_id, start_time, duration_ms, service_name, root_name, status, error, convention, case_id, eval_set_id, "
    "run_id, span_count, error_spans, llm_calls, tool_calls, total_tokens, content_captured, response_captured, "
    "user_query, final_response"
)
_TEXT_PREVIEW = 300  # characters of query/response in a trace list row


class Store(Protocol):
    def query(self, sql: str, params: Any = None, *, control: QueryControl | None = None) -> QueryResult: ...


class NotFound(TracegradeError):
    """A trace, span or run that the store does not hold."""


class BadRequest(TracegradeError, ValueError):
    """A filter, cursor or argument that cannot be used as given."""


# --- traces -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TraceFilters:
    """The trace list's filters; every field is optional and they combine with AND.

    ``since``/``until`` take a duration ago (``15m``, ``2h``, ``1d``) or an ISO time; ``traffic`` is
    ``eval`` (traces tagged with an eval case) or ``production``; ``text`` searches the user query and the
    final response (case-insensitive); ``tool`` keeps traces that called that tool.
    """

    since: str | None = None
    until: str | None = None
    status: str | None = None  # a key of STATUS_FILTERS
    service: str | None = None
    convention: str | None = None
    case: str | None = None
    traffic: str | None = None  # eval | production
    tool: str | None = None
    text: str | None = None

    @classmethod
    def from_mapping(cls, values: Any) -> TraceFilters:
        """From query parameters (or MCP arguments): blank values are ignored."""
        given = {f.name: str(values.get(f.name) or "").strip() or None for f in fields(cls)}
        return cls(**given)

    def active(self) -> bool:
        """Whether any filter is set."""
        return any(getattr(self, f.name) for f in fields(self))

    def where(self) -> tuple[list[str], list[Any]]:
        conditions: list[str] = []
        params: list[Any] = []
        for name, bound, operator in (("since", self.since, ">="), ("until", self.until, "<")):
            if bound:
                conditions.append(f"start_time {operator} CAST(? AS TIMESTAMP)")
                params.append(_instant(bound, name).isoformat(sep=" "))
        status = self.status.lower() if self.status else None  # ERROR, as the status badge spells it, too
        if status is not None and status not in STATUS_FILTERS:
            known = ", ".join(repr(value) for value in STATUS_FILTERS)
            raise BadRequest(f"status must be one of {known}, not {self.status!r}")
        if status is not None:
            conditions.append(status_condition(status))
        for column, value in (("service_name", self.service), ("convention", self.convention), ("case_id", self.case)):
            if value:
                conditions.append(f"{column} = ?")
                params.append(value)
        if self.traffic not in (None, "eval", "production"):
            raise BadRequest(f"traffic must be 'eval' or 'production', not {self.traffic!r}")
        if self.traffic:
            conditions.append("case_id IS NOT NULL" if self.traffic == "eval" else "case_id IS NULL")
        if self.tool:
            conditions.append("list_contains(tool_names, ?)")  # no join with tool_calls: see schema_v6.sql
            params.append(self.tool)
        if self.text:  # a substring, not a LIKE pattern: % and _ are searched for as typed
            conditions.append("(contains(lower(user_query), ?) OR contains(lower(final_response), ?))")
            params += [self.text.lower()] * 2
        return conditions, params


def _instant(value: str, name: str) -> datetime:
    try:
        return parse_since(value, name)  # its messages name the parameter: unreadable, or out of range
    except InvalidValueError as exc:
        raise BadRequest(str(exc)) from None


def _encode_cursor(start_time: Any, trace_id: str) -> str:
    raw = json.dumps([start_time.isoformat(sep=" ") if start_time is not None else None, trace_id])
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def _decode_cursor(cursor: str) -> tuple[str | None, str]:
    """The (start time, trace id) that ``_encode_cursor`` packed; anything else, however well-formed, is refused
    here rather than failing in SQL: the start time must be a plain (offset-free) ISO timestamp."""
    try:
        start, trace_id = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        if (start is not None and not isinstance(start, str)) or not isinstance(trace_id, str):
            raise ValueError("wrong shape")
        if start is not None:
            instant = datetime.fromisoformat(start)
            if instant.tzinfo is not None:
                raise ValueError("the server's cursors carry no offset")
            start = instant.isoformat(sep=" ")
    except (ValueError, TypeError, RecursionError, binascii.Error):
        raise BadRequest("the cursor is not one this server handed out; start again from the first page") from None
    return start, trace_id


def _page_size(limit: Any) -> int:
    try:
        size = int(limit)
    except (TypeError, ValueError):
        raise BadRequest(f"limit must be a whole number, not {limit!r}") from None
    if not 1 <= size <= MAX_PAGE:
        raise BadRequest(f"limit must be between 1 and {MAX_PAGE}, not {size}")
    return size


def list_traces(store: Store, filters: TraceFilters, limit: Any = 50, cursor: str | None = None) -> dict[str, Any]:
    """One page of traces, newest first, and the cursor of the next page (None on the last one)."""
    size = _page_size(limit)
    conditions, params = filters.where()
    if cursor:
        start, trace_id = _decode_cursor(cursor)
        if start is None:  # past every dated trace: only the undated ones remain
            conditions.append("start_time IS NULL AND trace_id > ?")
            params.append(trace_id)
        else:
            conditions.append(
                "(start_time < CAST(? AS TIMESTAMP) OR start_time IS NULL "
                "OR (start_time = CAST(? AS TIMESTAMP) AND trace_id > ?))"
            )
            params += [start, start, trace_id]
    sql = f"SELECT {_LIST_COLUMNS} FROM traces"
    if conditions:
        sql += " WHERE " + " AND ".join(conditions)
    sql += " ORDER BY start_time DESC NULLS LAST, trace_id LIMIT ?"
    result = store.query(sql, [*params, size + 1])
    raw = result.to_dicts()
    rows = result.json_rows()
    for row in rows:
        for key in ("user_query", "final_response"):
            if isinstance(row[key], str) and len(row[key]) > _TEXT_PREVIEW:
                row[key] = row[key][: _TEXT_PREVIEW - 1] + "…"
    following = None
    if len(rows) > size:
        rows = rows[:size]
        last = raw[size - 1]
        following = _encode_cursor(last["start_time"], last["trace_id"])
    return {"traces": rows, "next_cursor": following}


def facets(store: Store) -> dict[str, list[str]]:
    """The values the trace filters offer: services, conventions and tool names seen in the store."""
    found: dict[str, list[str]] = {}
    for key, sql in (
        ("services", "SELECT DISTINCT service_name FROM traces WHERE service_name <> '' ORDER BY 1 LIMIT 500"),
        ("conventions", "SELECT DISTINCT convention FROM traces WHERE convention IS NOT NULL ORDER BY 1 LIMIT 100"),
        ("tools", "SELECT DISTINCT name FROM tool_calls ORDER BY 1 LIMIT 500"),
    ):
        found[key] = [r[0] for r in store.query(sql).rows]
    return found


def trace_detail(store: Store, trace_id: str) -> dict[str, Any]:
    """A trace's row, its trajectory (ExecutionResult), its spans for the waterfall and the runs that graded it."""
    result = store.query(
        f"SELECT {_LIST_COLUMNS}, conversation_id, turn_index, input_tokens, output_tokens, dropped_attributes, "
        "mapping_issues, updated_at, epoch_us(start_time) AS start_us, epoch_us(end_time) AS end_us, execution "
        "FROM traces WHERE trace_id = ?",
        [trace_id],
    )
    if result.rows:
        blob = result.to_dicts()[0]["execution"]
        trace = result.json_rows()[0]
        del trace["execution"]
        execution = ExecutionResult.model_validate_json(decompress_json(blob)) if blob is not None else None
        # the trace's spans lie between its first start and last end: bounds let the scan skip row groups
        bounds = "AND start_ns BETWEEN ? AND ?"
        bound_params = [int(trace.pop("start_us")) * 1000 - 1000, int(trace.pop("end_us")) * 1000 + 1000]
    else:
        trace, execution, bounds, bound_params = None, None, "", []
    spans = store.query(
        "SELECT span_id, parent_span_id, name, kind, service_name, start_ns, end_ns, duration_ms, status_code, "
        f"status_message FROM spans WHERE trace_id = ? {bounds} ORDER BY start_ns, span_id",
        [trace_id, *bound_params],
    ).json_rows()
    if trace is None and not spans:
        raise NotFound(f"no trace {trace_id} in the store (the traces page lists the stored ones)")
    log_counts = {
        row[0]: row[1]
        for row in store.query(
            "SELECT coalesce(span_id, ''), count(*) FROM logs WHERE trace_id = ? GROUP BY 1", [trace_id]
        ).rows
    }
    return {
        "trace_id": trace_id,
        "trace": trace,
        "execution": execution.model_dump(mode="json") if execution is not None else None,
        "spans": spans,
        "log_counts": log_counts,
        "runs": _grading_runs(store, trace_id),
    }


def _grading_runs(store: Store, trace_id: str) -> list[dict[str, Any]]:
    return store.query(
        "SELECT c.run_id, r.created_at, r.kind, c.eval_id, c.name, c.passed, c.error, c.mean_score "
        "FROM eval_case_results c JOIN eval_runs r USING (run_id) "
        "WHERE c.trace_id = ? OR json_contains(c.trace_ids, ?) ORDER BY r.created_at DESC, c.run_id LIMIT 100",
        [trace_id, json.dumps(trace_id)],
    ).json_rows()


def span_detail(store: Store, trace_id: str, span_id: str) -> dict[str, Any]:
    """One span exactly as stored (attributes, events, links, resource) and the log records attached to it."""
    spans = store.query("SELECT * FROM spans WHERE trace_id = ? AND span_id = ? LIMIT 5", [trace_id, span_id])
    if not spans.rows:
        raise NotFound(f"no span {span_id} in trace {trace_id}")
    logs = store.query(
        "SELECT time, event_name, severity_text, body, attributes FROM logs WHERE trace_id = ? AND span_id = ? "
        "ORDER BY time_ns LIMIT 500",
        [trace_id, span_id],
    ).json_rows()
    return {"span": spans.json_rows()[0], "copies": len(spans.rows), "logs": logs}


# --- runs ---------------------------------------------------------------------------------------------


def list_runs(store: Store, limit: Any = 100, run_id: str | None = None) -> list[dict[str, Any]]:
    """Recorded grading runs, newest first, with pass rate (and its 95% interval), judge cost and duration;
    ``run_id`` keeps the runs whose id starts with it."""
    size = _page_size(limit)
    runs = store.query(
        "SELECT r.run_id, r.created_at, r.kind, r.eval_set_id, r.eval_set_name, r.total_cases, r.passed_cases, "
        "r.failed_cases, r.error_cases, r.pass_rate, "
        "(SELECT sum(cost_usd) FROM eval_results e WHERE e.run_id = r.run_id) AS cost_usd, "
        "(SELECT sum(duration_s) FROM eval_case_results c WHERE c.run_id = r.run_id) AS duration_s "
        "FROM eval_runs r WHERE ? IS NULL OR starts_with(r.run_id, ?) "
        "ORDER BY r.created_at DESC, r.run_id DESC LIMIT ?",
        [run_id, run_id, size],
    ).json_rows()
    for run in runs:
        total = run["total_cases"] or 0
        run["pass_rate_interval"] = list(wilson_interval(run["passed_cases"] or 0, total)) if total else None
    return runs


_Read = TypeVar("_Read", EvalReport, RunOutcomes)


def _load(store: Store, run_id: str, read: Callable[[Any, str], _Read]) -> _Read:
    """The run ``run_id`` names as ``read`` reads it (``load_run``'s full report, or ``load_run_outcomes``)."""
    try:
        return read(store, run_id)  # reads only: query is all it calls
    except KeyError as exc:
        raise NotFound(str(exc.args[0])) from None
    except InvalidValueError as exc:  # an ambiguous id prefix
        raise BadRequest(str(exc)) from None


def run_report(store: Store, run_id: str) -> tuple[dict[str, Any], EvalReport]:
    """The run's row (as ``list_runs`` gives it) and its report, its cases failing first."""
    report = _load(store, run_id, load_run)
    found = list_runs(store, MAX_PAGE, run_id)  # load_run accepted run_id: an id or a unique prefix
    row = next((r for r in found if r["run_id"] == run_id), found[0])
    order = {"error": 0, "fail": 1, "skipped": 2, "pass": 3}
    report.results.sort(key=lambda r: order[case_status(r)])  # sort is stable: the report's order within a status
    return row, report


def case_summary(result: EvalCaseResult) -> dict[str, Any]:
    """A case's outcome in brief: status, mean score, error, traces and each failing criterion with its reason."""
    return {
        "eval_id": result.eval_id,
        "name": result.name,
        "status": case_status(result),
        "score": case_score(result),
        "error": result.error,
        "trace_ids": result.trace_ids,
        "failing_criteria": [
            {"criterion": c.criterion, "status": criterion_status(c), "score": c.score, "threshold": c.threshold}
            | {"reason": c.reason or split_details(c.details)[0], "error": c.error, "details": json_safe(c.details)}
            for c in result.criterion_results
            if criterion_status(c) in ("fail", "error")
        ],
    }


def failing_cases(store: Store, run_id: str) -> dict[str, Any]:
    """A run's failed and errored cases with each failing criterion's score, threshold and reason."""
    row, report = run_report(store, run_id)
    failing = [case_summary(r) for r in report.results if case_status(r) in ("fail", "error")]
    return {"run": row, "summary": report.summary.model_dump(mode="json", include=SUMMARY_KEYS), "cases": failing}


def _divergence(a: Case | None, b: Case | None) -> dict[str, Any] | None:
    """The first trajectory step (tool call, else node visit) where the two runs of a case differ."""
    if a is None or b is None:
        return None
    for kind, left, right in (
        ("tool call", [t.name for t in a.actual_tool_calls], [t.name for t in b.actual_tool_calls]),
        ("node visit", list(a.node_visits), list(b.node_visits)),
    ):
        for step in range(max(len(left), len(right))):
            x = left[step] if step < len(left) else None
            y = right[step] if step < len(right) else None
            if x != y:
                return {"kind": kind, "step": step, "a": x, "b": y}
    return None


def diff_runs(store: Store, run_a: str, run_b: str) -> dict[str, Any]:
    """``run_diff.diff_reports`` of two recorded runs, with each case's first diverging step. A run holding an eval
    id twice cannot be paired case by case: BadRequest, naming the ids (the request, not the server, is at fault).
    Each run is read as the outcomes it compares (not its messages, node details, tool results), its pass rate
    from its row: its summary's for a run recorded whole, counted from its cases for one recorded case by case."""
    a, b = _load(store, run_a, load_run_outcomes), _load(store, run_b, load_run_outcomes)
    try:
        diff = diff_reports(a, b, run_a, run_b).to_dict()
    except InvalidValueError as exc:  # a run holding an eval id twice
        raise BadRequest(f"runs {run_a} and {run_b} cannot be diffed: {exc}") from None
    by_a = {r.eval_id: r for r in a.results}
    by_b = {r.eval_id: r for r in b.results}
    for case in diff["cases"]:
        case["diverges_at"] = _divergence(by_a.get(case["eval_id"]), by_b.get(case["eval_id"]))
    diff["pass_rate"] = {"a": _pass_rate(store, run_a), "b": _pass_rate(store, run_b)}
    return diff


def _pass_rate(store: Store, run_id: str) -> float:
    """The pass rate of the run ``run_id`` names (read already: an id or a unique prefix) as ``load_run``'s report
    gives it: its row holds its summary's, or for a run recorded case by case the store's count of its cases."""
    rows = store.query("SELECT run_id, pass_rate FROM eval_runs WHERE starts_with(run_id, ?)", [run_id]).rows
    rate = next((row for row in rows if row[0] == run_id), rows[0])[1]
    return 0.0 if rate is None else float(rate)


# --- SQL ----------------------------------------------------------------------------------------------


def run_sql(store: Store, sql: str, timeout: float | None = None) -> dict[str, Any]:
    """One sandboxed read-only statement; at most ``SQL_ROW_LIMIT`` rows, holding at most ``SQL_BYTE_LIMIT``, are
    fetched (``truncated`` says there were more, ``max_bytes`` that the size cut them: the rest are never produced,
    so a huge result costs what its first rows cost).

    ``timeout`` stops the query after that many seconds (a store behind the receiver's gate has its own)."""
    if not isinstance(sql, str) or not sql.strip():
        raise BadRequest("give one SELECT statement")
    result = store.query(sql, control=QueryControl(timeout, max_rows=SQL_ROW_LIMIT, max_bytes=SQL_BYTE_LIMIT))
    # positional names, so that duplicate column names (SELECT 1, 1) do not collapse in json_rows' dicts
    keys = [f"c{i}" for i in range(len(result.columns))]
    rows = QueryResult(keys, result.rows, result.types).json_rows()
    return {
        "columns": result.columns,
        "types": result.types,
        "rows": [[row[k] for k in keys] for row in rows],
        "row_count": len(result.rows),
        "truncated": result.truncated,
        "max_rows": SQL_ROW_LIMIT,
        "max_bytes": result.max_bytes,
    }


def schema(store: Store) -> dict[str, list[dict[str, str]]]:
    """Every table and view of the store with its columns and types (what the SQL page shows beside the box)."""
    rows = store.query(
        "SELECT table_name, column_name, data_type FROM information_schema.columns "
        "WHERE table_catalog = current_database() AND table_schema = 'main' ORDER BY table_name, ordinal_position"
    ).rows
    tables: dict[str, list[dict[str, str]]] = {}
    for table, column, kind in rows:
        tables.setdefault(table, []).append({"name": column, "type": kind})
    return tables
