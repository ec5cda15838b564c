"""``tracegrade mcp``: the store's read-only tools for coding agents, over the Model Context Protocol (stdio;
``tracegrade serve`` also serves them at ``/mcp`` over streamable HTTP, see :mod:`tracegrade.ingest.mcp_endpoint`).

A coding agent debugging an agent asks what happened (list and search traces, read a trajectory, run SQL in
the store's sandbox), how it was graded (runs, failing cases with reasons, a diff of two runs), and can grade
traces or an eval set with a config of its choosing (the result is returned, never recorded). The tools are
the web UI's own reads (``tracegrade.ui.api``), built on the official ``mcp`` SDK (``tracegrade[mcp]``).
Nothing but protocol messages may reach stdout: it is the transport.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from tracegrade.cli.common import friendly_errors
from tracegrade.cli.store_access import store_options
from tracegrade.errors import TracegradeError
from tracegrade.ui import api

__all__ = ["build_server", "command"]

_INSTRUCTIONS = (
    "Read-only access to a tracegrade store of OpenTelemetry traces of LLM agents and their grading runs. "
    "Start with list_traces or list_runs; get_trajectory shows what one trace did (nodes, LLM calls, tool calls); "
    "run_sql queries the tables (traces, spans, logs, evaluations, tool_calls, llm_calls, node_visits, eval_runs, "
    "eval_case_results, eval_results, calibrations); failing_cases and diff_runs explain grading results; grade grades "
    "traces or an eval set with a config without recording anything."
)


@contextmanager
def _tool_errors() -> Iterator[None]:
    """Our errors (bad filter, unknown trace, refused SQL…) reach the model as its message, not as a crash."""
    from mcp.server.mcpserver.exceptions import ToolError

    try:
        yield
    except (TracegradeError, KeyError, ValueError) as exc:
        raise ToolError(str(exc)) from None


def _config(config: dict[str, Any] | None, config_path: str | None) -> Any:
    from tracegrade.models.config import EvalConfig

    if config is not None and config_path is not None:
        raise api.BadRequest("give config or config_path, not both")
    if config_path is not None:
        return EvalConfig.from_file(config_path)
    return EvalConfig.model_validate(config) if config is not None else EvalConfig.default()


def build_server(store: api.Store) -> Any:
    """The MCP server over ``store`` (anything with ``query(sql, params)``)."""
    from mcp.server.mcpserver import MCPServer
    from mcp.types import ToolAnnotations

    server = MCPServer("tracegrade", instructions=_INSTRUCTIONS)
    read_only = ToolAnnotations(read_only_hint=True, open_world_hint=False)

    @server.tool(annotations=read_only)
    def list_traces(
        text: str | None = None,
        status: str | None = None,
        service: str | None = None,
        convention: str | None = None,
        case: str | None = None,
        traffic: str | None = None,
        tool: str | None = None,
        since: str | None = None,
        until: str | None = None,
        limit: int = 20,
        cursor: str | None = None,
    ) -> dict[str, Any]:
        """Stored traces, newest first, and next_cursor for the next page. Filters combine: text searches the
        user query and final response; status is ok or error; traffic is eval or production; tool keeps traces
        that called that tool; since/until take 15m, 2h, 1d or an ISO time."""
        with _tool_errors():
            given = {"text": text, "status": status, "service": service, "convention": convention, "case": case}
            given |= {"traffic": traffic, "tool": tool, "since": since, "until": until}
            filters = api.TraceFilters.from_mapping(given)
            return api.list_traces(store, filters, limit, cursor)

    @server.tool(annotations=read_only)
    def get_trajectory(trace_id: str, include_spans: bool = False) -> dict[str, Any]:
        """One trace's trajectory: user query, node visits, LLM calls (model, tokens, messages), tool calls
        (arguments, results, errors), final response, and the runs that graded it. A null field whose
        *_captured flag is false means the content was not recorded (not that it was empty)."""
        with _tool_errors():
            detail = api.trace_detail(store, trace_id)
            if not include_spans:
                detail.pop("spans")
            return detail

    @server.tool(annotations=read_only)
    def get_span(trace_id: str, span_id: str) -> dict[str, Any]:
        """One stored span as received (attributes, events, links, resource) and its log records."""
        with _tool_errors():
            return api.span_detail(store, trace_id, span_id)

    @server.tool(annotations=read_only)
    def run_sql(sql: str) -> dict[str, Any]:
        """Run one read-only SELECT over the store (sandboxed: no files, no writes); up to 1000 rows return."""
        with _tool_errors():
            return api.run_sql(store, sql)

    @server.tool(annotations=read_only)
    def store_schema() -> dict[str, Any]:
        """The store's tables and views with their columns and types."""
        with _tool_errors():
            return {"tables": api.schema(store)}

    @server.tool(annotations=read_only)
    def list_runs(limit: int = 20) -> dict[str, Any]:
        """Recorded grading runs, newest first: pass rate and its 95% interval, judge cost, duration."""
        with _tool_errors():
            return {"runs": api.list_runs(store, limit)}

    @server.tool(annotations=read_only)
    def failing_cases(run_id: str) -> dict[str, Any]:
        """A run's failed and errored cases, each failing criterion with score, threshold and reason."""
        with _tool_errors():
            return api.failing_cases(store, run_id)

    @server.tool(annotations=read_only)
    def diff_runs(run_a: str, run_b: str) -> dict[str, Any]:
        """Two runs compared case by case: regressed/improved cases, per-criterion score changes and the first
        trajectory step where a case's runs diverge."""
        with _tool_errors():
            return api.diff_runs(store, run_a, run_b)

    @server.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=True))
    async def grade(
        config: dict[str, Any] | None = None,
        config_path: str | None = None,
        eval_set_path: str | None = None,
        trace_ids: list[str] | None = None,
        where: str | None = None,
        limit: int | None = 20,
    ) -> dict[str, Any]:
        """Grade stored traces with an EvalConfig (config as an object, or config_path to a YAML/JSON file;
        default criteria otherwise) and return the results; nothing is recorded. With eval_set_path, grade
        that eval set's cases against their traces; else grade the traces picked by trace_ids / where (a SQL
        condition on the traces table) / limit without reference. LLM-judge criteria call their configured
        model (the one tool that may reach outside the store)."""
        from tracegrade.evaluation.offline import TraceGrader, TraceSelection

        with _tool_errors():
            grader = TraceGrader(store, _config(config, config_path))
            if eval_set_path is not None:
                report = await grader.grade_eval_set(Path(eval_set_path))
            else:
                report = await grader.grade_traces(TraceSelection(where=where, limit=limit, trace_ids=trace_ids))
            return {
                "summary": report.summary.model_dump(mode="json", include=api.SUMMARY_KEYS),
                "cases": [api.case_summary(r) for r in report.results],
            }

    return server


@click.command("mcp")
@store_options
@friendly_errors
def command(store_path: Path, token: str | None) -> None:
    """Serve the store's read-only tools to a coding agent over MCP on stdin/stdout.

    Tools: list_traces, get_trajectory, get_span, run_sql, store_schema, list_runs, failing_cases, diff_runs
    and grade. While `tracegrade serve` holds the store, the tools read through it (pass its --token).
    Needs the mcp extra: pip install 'tracegrade[mcp]'.
    """
    try:
        import mcp.server.mcpserver  # noqa: F401
    except ImportError:
        raise click.UsageError("tracegrade mcp needs the MCP SDK: pip install 'tracegrade[mcp]'") from None
    from tracegrade.cli.store_access import reading_store

    with reading_store(store_path, token) as store:
        build_server(store).run("stdio")
