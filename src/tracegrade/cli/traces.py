"""`tracegrade traces`: list recent traces (one row each from the `traces` table) with filters."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import click

from tracegrade.cli.common import UsageProblem, friendly_errors
from tracegrade.cli.store_access import emit, reading_store, render_json, render_table, store_options

__all__ = ["command", "parse_since"]

_JSON_COLUMNS = (
    "trace_id, start_time, duration_ms, service_name, root_name, status, convention, case_id, span_count, "
    "llm_calls, tool_calls, total_tokens, user_query, final_response"
)
# the table is for eyes: a 16-character id prefix (`tracegrade show` accepts it), seconds, fewer columns
_TABLE_COLUMNS = (
    "left(trace_id, 16) AS trace, strftime(start_time, '%Y-%m-%d %H:%M:%S') AS started_utc, "
    "round(duration_ms, 1) AS ms, service_name AS service, root_name AS root, status, case_id AS case, "
    "llm_calls AS llm, tool_calls AS tools, total_tokens AS tokens, user_query"
)
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|sec|m|min|h|d|w)\s*$", re.IGNORECASE)
_UNIT_SECONDS = {"s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_since(value: str, now: datetime | None = None) -> datetime:
    """``30m``/``2h``/``1d``/``1w`` ago, or an ISO 8601 time; as a naive UTC datetime like the store's."""
    now = now or datetime.now(timezone.utc).replace(tzinfo=None)
    match = _DURATION.match(value)
    if match:
        return now - timedelta(seconds=float(match.group(1)) * _UNIT_SECONDS[match.group(2).lower()])
    try:
        moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise UsageProblem(
            f"--since {value!r} is neither a duration (30s, 15m, 2h, 1d, 1w) nor an ISO time (2025-01-31T12:00)"
        ) from None
    return moment.astimezone(timezone.utc).replace(tzinfo=None) if moment.tzinfo else moment


def build_query(
    *,
    columns: str,
    limit: int,
    since: str | None,
    service: str | None,
    status: str | None,
    case: str | None,
    where: str | None,
) -> tuple[str, list[Any]]:
    conditions: list[str] = []
    params: list[Any] = []
    if since:
        conditions.append("start_time >= CAST(? AS TIMESTAMP)")
        params.append(parse_since(since).isoformat(sep=" "))
    if service:
        conditions.append("service_name = ?")
        params.append(service)
    if status == "error":
        conditions.append("status = 'ERROR'")
    elif status == "ok":
        conditions.append("status <> 'ERROR'")
    if case:
        conditions.append("case_id = ?")
        params.append(case)
    if where:
        conditions.append(f"({where})")
    sql = f"SELECT {columns} FROM traces"
    if conditions:
        sql += " WHERE " + " AND ".join(conditions)
    sql += " ORDER BY start_time DESC NULLS LAST, trace_id LIMIT ?"
    params.append(limit)
    return sql, params


@click.command("traces")
@click.option("--limit", type=click.IntRange(min=1), default=20, show_default=True, help="Most recent N traces.")
@click.option("--since", help="Only traces that started after this: a duration ago (15m, 2h, 1d) or an ISO time.")
@click.option("--service", help="Only traces whose root span's service.name is S.")
@click.option("--status", type=click.Choice(["ok", "error"]), help="ok: not ERROR; error: ERROR status.")
@click.option("--case", "case", help="Only traces tagged with this eval case id.")
@click.option("--where", help='Extra SQL condition on the traces table, e.g. "total_tokens > 1000".')
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@store_options
@friendly_errors
def command(
    limit: int,
    since: str | None,
    service: str | None,
    status: str | None,
    case: str | None,
    where: str | None,
    fmt: str,
    store_path: Path,
    token: str | None,
) -> None:
    """List recent traces, newest first (their trajectories are in the traces table)."""
    columns = _JSON_COLUMNS if fmt == "json" else _TABLE_COLUMNS
    sql, params = build_query(
        columns=columns, limit=limit, since=since, service=service, status=status, case=case, where=where
    )
    with reading_store(store_path, token) as store:
        result = store.query(sql, params)
    emit(render_json(result) if fmt == "json" else render_table(result, max_width=50), None)
