"""The OpenAPI 3.1 document of the UI's JSON endpoints, served at ``/ui/api/openapi.json``.

The pages read these same endpoints' functions, and a script or the CLI can call them directly with the
bearer token (``Authorization: Bearer <token>``) instead of the UI's cookie.
"""

from __future__ import annotations

from typing import Any

from tracegrade.store.trace_status import STATUS_FILTERS
from tracegrade.ui.api import MAX_PAGE, SQL_BYTE_LIMIT, SQL_ROW_LIMIT, TraceFilters
from tracegrade.ui.auth import COOKIE

__all__ = ["OPENAPI_PATH", "openapi_document"]

OPENAPI_PATH = "/ui/api/openapi.json"

# JSON has no number for NaN or an infinity: every endpoint writes them as strings (never null, which means missing)
_NON_FINITE = 'a NaN or an infinity is the string "NaN", "Infinity" or "-Infinity" (the types say the column\'s)'

_FILTER_HELP = {
    "since": "only traces that started at or after this: a duration ago (15m, 2h, 1d) or an ISO time",
    "until": "only traces that started before this (same forms as since)",
    "status": "; ".join(f"{value}: {kept}" for value, (_, kept) in STATUS_FILTERS.items()),
    "service": "root span's service.name",
    "convention": "instrumentation convention (genai, openinference, …)",
    "case": "eval case id the trace is tagged with",
    "traffic": "eval (tagged with an eval case) or production (not tagged)",
    "tool": "only traces that called this tool",
    "text": "case-insensitive search in the user query and the final response",
}


def _query(name: str, description: str, schema: dict[str, Any] | None = None, required: bool = False) -> dict[str, Any]:
    return {
        "name": name,
        "in": "query",
        "required": required,
        "description": description,
        "schema": schema or {"type": "string"},
    }


def _path(name: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}


def _get(summary: str, parameters: list[dict[str, Any]], ok: str, *, not_found: bool = False) -> dict[str, Any]:
    responses: dict[str, Any] = {
        "200": {"description": ok, "content": {"application/json": {"schema": {"type": "object"}}}},
        "400": {"$ref": "#/components/responses/Error"},
        "401": {"$ref": "#/components/responses/Error"},
        "503": {"$ref": "#/components/responses/Error"},
    }
    if not_found:
        responses["404"] = {"$ref": "#/components/responses/Error"}
    return {"get": {"summary": summary, "parameters": parameters, "responses": responses}}


def openapi_document() -> dict[str, Any]:
    filters = [_query(f, _FILTER_HELP[f]) for f in TraceFilters.__dataclass_fields__]
    sql_post = _get("Run one sandboxed read-only SQL statement.", [], f"columns, types and rows; {_NON_FINITE}")["get"]
    sql_post = {
        **sql_post,
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {
                    "schema": {"type": "object", "required": ["sql"], "properties": {"sql": {"type": "string"}}}
                }
            },
        },
    }
    sql = _get(
        f"Run one sandboxed read-only SQL statement (at most {SQL_ROW_LIMIT} rows come back, holding at most "
        f"about {SQL_BYTE_LIMIT // 1048576} MB).",
        [_query("q", "the SELECT statement", required=True)],
        "columns, types, rows, row_count, truncated (more rows than max_rows, or more bytes than max_bytes), "
        f"max_rows, and max_bytes (null unless the size cut the rows); {_NON_FINITE}",
    )
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "tracegrade UI API",
            "version": "1",
            "description": "Read-only JSON over the trace store: traces, trajectories, grading runs, diffs, SQL. "
            "Integers are sent exactly as JSON numbers, also beyond 2**53 (nanosecond times such as start_ns, "
            "BIGINT and HUGEINT results): read them with a JSON parser that keeps big integers. JSON has no number "
            'for NaN or an infinity: they come as the strings "NaN", "Infinity" and "-Infinity".',
        },
        "components": {
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer", "description": "the server's --token"},
                "cookie": {"type": "apiKey", "in": "cookie", "name": COOKIE},
            },
            "responses": {
                "Error": {
                    "description": "what went wrong and how to fix it",
                    "content": {
                        "application/json": {"schema": {"type": "object", "properties": {"error": {"type": "string"}}}}
                    },
                }
            },
        },
        "security": [{"bearer": []}, {"cookie": []}],
        "paths": {
            "/ui/api/traces": _get(
                "Traces, newest first, one page at a time (keyset paging: pass next_cursor back as cursor).",
                [
                    *filters,
                    _query("limit", f"page size, 1-{MAX_PAGE}", {"type": "integer", "default": 50}),
                    _query("cursor", "next_cursor of the previous page"),
                ],
                "traces and next_cursor (null on the last page)",
            ),
            "/ui/api/facets": _get("Services, conventions and tool names to filter by.", [], "lists of values"),
            "/ui/api/traces/{trace_id}": _get(
                "One trace: its row, trajectory (execution), spans, log counts per span, runs that graded it.",
                [_path("trace_id")],
                "the trace",
                not_found=True,
            ),
            "/ui/api/traces/{trace_id}/spans/{span_id}": _get(
                "One stored span (attributes, events, links, resource) and its log records.",
                [_path("trace_id"), _path("span_id")],
                "span and logs",
                not_found=True,
            ),
            "/ui/api/runs": _get(
                "Recorded grading runs, newest first, with pass rate, its 95% Wilson interval, judge cost, duration.",
                [_query("limit", f"at most this many, 1-{MAX_PAGE}", {"type": "integer", "default": 100})],
                "runs",
            ),
            "/ui/api/runs/{run_id}": _get(
                "A run's row and its whole report (cases failing first); an unambiguous id prefix works.",
                [_path("run_id")],
                "run and report",
                not_found=True,
            ),
            "/ui/api/runs/{run_id}/failing": _get(
                "A run's failed and errored cases with each failing criterion's score, threshold and reason.",
                [_path("run_id")],
                "run, summary and cases",
                not_found=True,
            ),
            "/ui/api/diff": _get(
                "Two runs compared case by case: regressions, improvements, per-criterion deltas, first divergence.",
                [_query("a", "run A", required=True), _query("b", "run B", required=True)],
                "summary, pass rates and cases",
                not_found=True,
            ),
            "/ui/api/sql": {**sql, "post": sql_post},
            "/ui/api/schema": _get("Tables and views of the store with their columns.", [], "tables"),
        },
    }
