"""`tracegrade show TRACE_ID`: one trace's trajectory as a tree (or JSON)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
from rich.text import Text
from rich.tree import Tree

from tracegrade.cli.common import UsageProblem, friendly_errors
from tracegrade.cli.store_access import clip, emit, reading_store, store_options, terminal_text
from tracegrade.models.execution import ExecutionResult
from tracegrade.store.access import ReadableStore
from tracegrade.store.rows import decompress_json

__all__ = ["build_tree", "command", "resolve_trace_id"]

_TEXT_LIMIT = 300
_NOT_CAPTURED = "[content not captured]"
_TRACE_COLUMNS = (
    "trace_id, root_name, service_name, start_time, duration_ms, status, convention, case_id, eval_set_id, "
    "turn_index, run_id, span_count, dropped_attributes, execution"
)


def resolve_trace_id(store: ReadableStore, prefix: str) -> str:
    """The one trace id starting with ``prefix`` (trajectory built or not), else a clear UsageProblem."""
    prefix = prefix.strip().lower()
    if not prefix:
        raise UsageProblem("give a trace id (or a unique prefix of one)")
    for table in ("traces", "spans"):
        rows = store.query(
            f"SELECT DISTINCT trace_id FROM {table} WHERE starts_with(trace_id, ?) ORDER BY 1 LIMIT 6", [prefix]
        ).rows
        if len(rows) > 1:
            listed = ", ".join(r[0] for r in rows[:5]) + ("…" if len(rows) > 5 else "")
            raise UsageProblem(f"trace id prefix {prefix!r} matches several traces ({listed}); give more characters")
        if rows:
            return rows[0][0]
    raise UsageProblem(f"no trace id starts with {prefix!r}; `tracegrade traces` lists recent ones")


def _json_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def _line(label: str, value: str | None, *, style: str = "") -> Text:
    text = Text(f"{label}: ", style="bold")
    if value is None:
        text.append(_NOT_CAPTURED, style="yellow")
    else:
        text.append(clip(value, _TEXT_LIMIT), style=style)
    return text


def _ms(start_ns: int, end_ns: int) -> str:
    return f" {(end_ns - start_ns) / 1e6:.1f} ms" if start_ns and end_ns >= start_ns else ""


def build_tree(trace: dict[str, Any], execution: ExecutionResult) -> Tree:
    """The rich Tree for one trace row and its ExecutionResult."""
    # Short lines, so that typical ids and names fit an 80-column terminal without wrapping inside the tree.
    header = Text(f"trace {trace['trace_id']}", style="bold cyan")
    header.append(f"  {trace.get('duration_ms') or 0:.1f} ms  status={execution.status}")
    tree = Tree(header)
    tree.add(Text(f"root: {trace.get('root_name') or '?'}  service: {trace.get('service_name') or '?'}"))
    tree.add(
        Text(
            f"started: {trace.get('start_time')}  spans: {trace.get('span_count')}  "
            f"convention: {execution.convention or 'unknown'}"
        )
    )
    if trace.get("case_id"):
        case = f"eval case: {trace['case_id']}  turn: {trace.get('turn_index')}"
        tree.add(Text(f"{case}  eval set: {trace.get('eval_set_id')}"))
        if trace.get("run_id"):
            tree.add(Text(f"run: {trace['run_id']}"))
    tree.add(_line("user query", execution.user_query))
    _add_nodes(tree, execution)
    _add_tool_calls(tree, execution)
    _add_llm_calls(tree, execution)
    response = execution.actual_response if execution.response_captured else None
    tree.add(_line("final response", response, style="green"))
    if execution.error:
        tree.add(Text(f"error: {execution.error}", style="red"))
    if trace.get("dropped_attributes"):
        tree.add(Text(f"{trace['dropped_attributes']} attributes were dropped by the SDK limit", style="yellow"))
    if execution.mapping_issues:
        issues = tree.add(Text(f"mapping issues ({len(execution.mapping_issues)})", style="yellow"))
        for issue in execution.mapping_issues:
            issues.add(Text(issue))
    _make_terminal_safe(tree)
    return tree


def _make_terminal_safe(node: Tree) -> None:
    """Show every character of the tree's labels that could drive the terminal (names, queries, tool arguments
    are what exporters sent) as a visible one, in place: the lengths stay, so the styles keep their places."""
    if isinstance(node.label, Text):
        node.label.plain = terminal_text(node.label.plain)
    for child in node.children:
        _make_terminal_safe(child)


def _add_nodes(tree: Tree, execution: ExecutionResult) -> None:
    nodes = tree.add(Text(f"nodes ({len(execution.visits)})", style="bold"))
    for index, visit in enumerate(execution.visits, start=1):
        text = Text(f"{index}. {visit.name}")
        text.append(_ms(visit.start_ns, visit.end_ns), style="dim")
        if visit.parallel_group is not None:
            text.append(f"  [parallel group {visit.parallel_group}]", style="magenta")
        if visit.status == "ERROR":
            text.append("  ERROR", style="red")
        nodes.add(text)


def _add_tool_calls(tree: Tree, execution: ExecutionResult) -> None:
    tools = tree.add(Text(f"tool calls ({len(execution.tool_calls)})", style="bold"))
    for index, call in enumerate(execution.tool_calls, start=1):
        text = Text(f"{index}. {call.name}")
        if call.call_id:
            text.append(f"  id={call.call_id}", style="dim")
        if call.duration_seconds is not None:
            text.append(f"  {call.duration_seconds * 1000:.1f} ms", style="dim")
        branch = tools.add(text)
        branch.add(_line("arguments", _json_text(call.args) if call.args_captured else None))
        if call.error:
            branch.add(Text(f"error: {clip(call.error, _TEXT_LIMIT)}", style="red"))
        else:
            branch.add(_line("result", _json_text(call.result) if call.result_captured else None))


def _add_llm_calls(tree: Tree, execution: ExecutionResult) -> None:
    usage = execution.token_usage
    llms = tree.add(
        Text(
            f"LLM calls ({len(execution.llm_calls)}, tokens in {usage.input_tokens} / out {usage.output_tokens})",
            style="bold",
        )
    )
    for index, llm in enumerate(execution.llm_calls, start=1):
        text = Text(f"{index}. {llm.model or 'unknown model'}")
        if llm.provider:
            text.append(f" ({llm.provider})")
        text.append(_ms(llm.start_ns, llm.end_ns), style="dim")
        branch = llms.add(text)
        usage_line = Text(f"tokens in {llm.token_usage.input_tokens} / out {llm.token_usage.output_tokens}")
        if llm.node:
            usage_line.append(f"  node: {llm.node}", style="dim")
        branch.add(usage_line)
        if llm.tool_call_requests:
            branch.add(Text("requested tools: " + ", ".join(c.name for c in llm.tool_call_requests)))
        if llm.error:
            branch.add(Text(f"error: {clip(llm.error, _TEXT_LIMIT)}", style="red"))
        if llm.output_text or not llm.content_captured:
            branch.add(_line("output", llm.output_text if llm.content_captured else None))


@click.command("show")
@click.argument("trace_id")
@click.option("--format", "fmt", type=click.Choice(["tree", "json"]), default="tree", show_default=True)
@store_options
@friendly_errors
def command(trace_id: str, fmt: str, store_path: Path, token: str | None) -> None:
    """Show one trace's trajectory: nodes, tool calls with arguments and results, LLM calls, response.

    TRACE_ID may be a unique prefix.
    """
    with reading_store(store_path, token) as store:
        full_id = resolve_trace_id(store, trace_id)
        result = store.query(f"SELECT {_TRACE_COLUMNS} FROM traces WHERE trace_id = ?", [full_id])
    if not result.rows:
        raise UsageProblem(
            f"trace {full_id} has spans but no trajectory yet (the server maps a trace a few seconds after its "
            "last span; `tracegrade import` maps at once); try again shortly"
        )
    trace = result.json_rows()[0]
    del trace["execution"]
    execution = ExecutionResult.model_validate_json(decompress_json(result.to_dicts()[0]["execution"]))
    if fmt == "json":
        emit(json.dumps({"trace": trace, "execution": execution.model_dump(mode="json")}, indent=2), None)
    else:
        emit(build_tree(trace, execution), None)
