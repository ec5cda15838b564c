"""`tracegrade traces`: list recent traces (one row each from the `traces` table) with filters."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import click

from tracegrade.cli.common import friendly_errors
from tracegrade.cli.store_access import (
    display,
    emit,
    reading_store,
    render_csv,
    render_json,
    store_options,
    terminal_text,
)
from tracegrade.store.predicates import isolated_predicate
from tracegrade.store.trace_status import STATUS_FILTERS, status_condition
from tracegrade.timespec import parse_since

__all__ = ["command", "table_columns"]

# json and csv: every column the traces table has for a trace list (the trajectory is left to `show`)
_DATA_COLUMNS = (
    "trace_id, start_time, duration_ms, service_name, root_name, status, convention, case_id, span_count, "
    "error_spans, llm_calls, tool_calls, total_tokens, user_query, final_response"
)


@dataclass(frozen=True)
class _Column:
    """One column of the table: its SQL, header, width in characters, and whether it is text to cut."""

    sql: str
    header: str
    width: int
    text: bool = False


# the table is for eyes: whole trace ids (they never wrap, so they can be copied into `show`), then what
# the terminal has room for, the user query taking the rest of the line
_ID = _Column("trace_id", "trace_id", 32)
_ALWAYS = (
    _ID,
    _Column("strftime(start_time, '%m-%d %H:%M:%S')", "started (UTC)", 14),
    _Column("CAST(round(duration_ms) AS BIGINT)", "ms", 7),
    _Column("status", "status", 6),
)
_QUERY = _Column("user_query", "user query", 24, text=True)
_OPTIONAL = (  # added in this order while the user query keeps at least _QUERY.width characters
    _Column("tool_calls", "tools", 5),
    _Column("root_name", "root", 30, text=True),
    _Column("total_tokens", "tokens", 7),
    _Column("service_name", "service", 20, text=True),
    _Column("case_id", "case", 16, text=True),
)
_QUERY_MIN = 8  # the user query's width on a terminal too narrow for the rest
_GAP = 2  # characters between two columns: the separator and one of padding


def table_columns(width: int) -> list[_Column]:
    """The table's columns for a terminal ``width`` characters wide, the user query last with the rest of it."""
    columns = list(_ALWAYS)
    used = sum(c.width + _GAP for c in columns)
    for column in _OPTIONAL:
        if used + column.width + _GAP + _QUERY.width <= width:
            columns.append(column)
            used += column.width + _GAP
    return [*columns, replace(_QUERY, width=max(_QUERY_MIN, width - used - 1))]


def build_query(
    *,
    columns: str,
    limit: int,
    since: str | None,
    service: str | None,
    status: str | None,
    case: str | None,
    where: str | None,
    eval_traffic: bool = True,
) -> tuple[str, list[Any]]:
    conditions: list[str] = []
    params: list[Any] = []
    if since:
        conditions.append("start_time >= CAST(? AS TIMESTAMP)")
        params.append(parse_since(since).isoformat(sep=" "))
    if service:
        conditions.append("service_name = ?")
        params.append(service)
    if status:
        conditions.append(status_condition(status))
    if case:
        conditions.append("case_id = ?")
        params.append(case)
    if not eval_traffic:  # an evaluation run's turns carry tracegrade.run.id, stored as run_id
        conditions.append("run_id IS NULL")
    if where:
        conditions.append(isolated_predicate(where))
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
@click.option(
    "--status",
    type=click.Choice(list(STATUS_FILTERS), case_sensitive=False),
    help="; ".join(f"{value}: {kept}" for value, (_, kept) in STATUS_FILTERS.items()) + ".",
)
@click.option("--case", "case", help="Only traces tagged with this eval case id.")
@click.option("--where", help='Extra SQL condition on the traces table, e.g. "total_tokens > 1000".')
@click.option(
    "--eval-traffic/--no-eval-traffic",
    default=True,
    show_default=True,
    help="Include the traces of evaluation runs (turns stamped with tracegrade.run.id).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "json", "csv"]),
    default="table",
    show_default=True,
    help="table: whole trace ids and the columns the terminal has room for; json and csv: every column.",
)
@store_options
@friendly_errors
def command(
    limit: int,
    since: str | None,
    service: str | None,
    status: str | None,
    case: str | None,
    where: str | None,
    eval_traffic: bool,
    fmt: str,
    store_path: Path,
    token: str | None,
) -> None:
    """List recent traces, newest first (their trajectories are in the traces table)."""
    from rich.console import Console

    console = Console(soft_wrap=False)
    columns = table_columns(console.width) if fmt == "table" else None
    if columns:  # narrower than the fixed columns: let the terminal wrap lines rather than rich cut the ids
        console.width = max(console.width, sum(c.width + _GAP for c in columns))
    sql, params = build_query(
        columns=", ".join(f'{c.sql} AS "{c.header}"' for c in columns) if columns else _DATA_COLUMNS,
        limit=limit,
        since=since,
        service=service,
        status=status,
        case=case,
        where=where,
        eval_traffic=eval_traffic,
    )
    with reading_store(store_path, token) as store:
        result = store.query(sql, params)
    if columns is None:
        emit(render_json(result) if fmt == "json" else render_csv(result), None)
        return
    console.print(_table(columns, result.rows))


def _table(columns: list[_Column], rows: list[tuple[Any, ...]]) -> Any:
    from rich import box
    from rich.table import Table
    from rich.text import Text

    table = Table(
        box=box.SIMPLE_HEAD,
        show_edge=False,
        padding=(0, 1, 0, 0),
        header_style="bold",
        caption=f"{len(rows)} rows",
    )
    for column in columns:
        if column.text:
            table.add_column(column.header, no_wrap=True, overflow="ellipsis", width=column.width)
        else:  # ids, times and numbers are never cut
            table.add_column(column.header, no_wrap=True, min_width=column.width)
    for row in rows:
        # Text: no markup; terminal_text: no escape sequence an exporter sent reaches the terminal
        table.add_row(*(Text(terminal_text(display(value).replace("\n", " "))) for value in row))
    return table
