"""LLM calls and tool calls of a trace.

Rules (span-conventions.md §9): an LLM span whose only nested LLM span has the same model is one call
(usage from the leaf, content from whichever side has it); usage is counted on LLM spans only; a tool
span without a call id (or with only a bare argument) is matched to the nearest preceding model
``tool_call`` with the same name and arguments, then by order.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from tracegrade.models.json_values import json_equal, parse_json_maybe
from tracegrade.trajectory import sources
from tracegrade.trajectory.messages import Message
from tracegrade.trajectory.readers import Chain
from tracegrade.trajectory.tree import Role, SpanNode
from tracegrade.trajectory.values import as_args

__all__ = ["LLMFields", "ToolSpan", "build_tool_calls", "read_llm_calls", "read_tool_spans", "span_error"]

LLMFields = dict[str, Any]  # one model call as the fields of ``LLMCall`` (validated once, with the result)


def span_error(node: SpanNode) -> str | None:
    """The error of a span with status ERROR: its status message, else its exception event."""
    span = node.span
    if span.status_code != "ERROR":
        return None
    if span.status_message:
        return span.status_message
    for event in span.events:
        if event.name == "exception":
            kind = event.attributes.get("exception.type")
            message = event.attributes.get("exception.message")
            return ": ".join(str(p) for p in (kind, message) if p) or "exception"
    return "error"


# -- LLM calls -----------------------------------------------------------------------------------


def _compatible(a: str | None, b: str | None) -> bool:
    return a is None or b is None or a.startswith(b) or b.startswith(a)


def _only_inner_llm(node: SpanNode) -> SpanNode | None:
    """The single nearest LLM span nested in ``node`` when it is the same model call (else None)."""
    found: list[SpanNode] = []
    stack = list(node.children)
    while stack and len(found) < 2:
        child = stack.pop()
        if child.role == Role.LLM:
            found.append(child)
        else:
            stack.extend(child.children)
    if len(found) != 1:
        return None
    inner = found[0]
    return inner if _compatible(sources.first(sources.MODEL, node), sources.first(sources.MODEL, inner)) else None


def _output_text(messages: list[Message]) -> str | None:
    texts = [m["content"] for m in messages if m.get("role") == "assistant" and m.get("content")]
    return "\n".join(str(t) for t in texts) if texts else None


def _requests(messages: list[Message]) -> list[dict[str, Any]]:
    """The tool calls the model asked for, as ``ToolCall`` fields."""
    return [
        {"name": call["name"], "args": as_args(call.get("arguments")), "call_id": call.get("id")}
        for message in messages
        if message.get("role") == "assistant"
        for call in message.get("tool_calls") or ()
    ]


def _usage(node: SpanNode) -> dict[str, int]:
    """``TokenUsage`` fields of one model call."""
    return {"calls": 1, **(sources.first(sources.USAGE, node) or {})}


def _read(chain: Chain, node: SpanNode, wrappers: list[SpanNode]) -> Any:
    """What ``chain`` reads from the model call ``node``, else from its wrappers (innermost first)."""
    value = sources.first(chain, node)
    return sources.first_of(chain, wrappers) if value is None and wrappers else value


def _read_llm(node: SpanNode, wrappers: list[SpanNode], visit: str | None) -> LLMFields:
    inputs = _read(sources.LLM_INPUT, node, wrappers)
    outputs = _read(sources.LLM_OUTPUT, node, wrappers)
    out_messages = outputs or []
    start, end = node.start, node.end
    error = span_error(node)
    for wrapper in wrappers:
        start, end = min(start, wrapper.start), max(end, wrapper.end)
        error = error or span_error(wrapper)
    return {
        "model": _read(sources.MODEL, node, wrappers),
        "provider": _read(sources.PROVIDER, node, wrappers),
        "node": visit,
        "input_messages": inputs or [],
        "output_messages": out_messages,
        "output_text": _output_text(out_messages),
        "tool_call_requests": _requests(out_messages),
        "token_usage": _usage(node),
        "content_captured": inputs is not None or outputs is not None,
        "span_id": node.span_id,
        "start_ns": start,
        "end_ns": end,
        "finish_reason": _read(sources.FINISH_REASON, node, wrappers),
        "error": error,
    }


def read_llm_calls(order: list[SpanNode], visit_of: Callable[[SpanNode], str | None]) -> list[LLMFields]:
    """One model call (as ``LLMCall`` fields) per distinct model call, in execution order (``order`` is the
    trajectory walk). A call that could not be read has only ``node``, ``span_id`` and ``content_captured``."""
    calls: list[LLMFields] = []
    wrappers: dict[int, list[SpanNode]] = {}
    for node in order:
        if node.role != Role.LLM:
            continue
        try:
            inner = _only_inner_llm(node)
            if inner is not None:
                wrappers[inner.index] = [*wrappers.pop(node.index, []), node]
                continue
            calls.append(_read_llm(node, wrappers.pop(node.index, [])[::-1], visit_of(node)))
        except Exception as exc:  # a malformed span must not stop the mapping
            node.note(f"LLM call could not be read ({type(exc).__name__}: {exc})")
            calls.append({"node": visit_of(node), "span_id": node.span_id, "content_captured": False})
    return calls


# -- tool calls ----------------------------------------------------------------------------------


@dataclass(slots=True)
class ToolSpan:
    """A tool span as read, before ids and arguments are recovered from the model's requests."""

    node: SpanNode
    name: str
    args: Any  # None: not captured
    result: Any  # None: not captured
    call_id: str | None
    error: str | None
    matched: dict[str, Any] | None = None  # the model's request (``ToolCall`` fields)
    request: int = -1  # the matched request's place among all requests (model calls in order, then their requests)
    batch: int = -1  # the index of the model call that asked for it


def read_tool_spans(order: list[SpanNode]) -> list[ToolSpan]:
    tools = []
    for node in order:
        if node.role != Role.TOOL:
            continue
        try:
            tools.append(
                ToolSpan(  # positional: node, name, args, result, call_id, error
                    node,
                    sources.first(sources.TOOL_NAME, node) or node.name,
                    sources.first(sources.TOOL_ARGS, node),
                    sources.first(sources.TOOL_RESULT, node),
                    sources.first(sources.TOOL_CALL_ID, node),
                    span_error(node),
                )
            )
        except Exception as exc:  # a malformed span must not stop the mapping
            node.note(f"tool call could not be read ({type(exc).__name__}: {exc})")
            tools.append(ToolSpan(node, node.name, None, None, None, span_error(node)))
    return tools


def _match_requests(tools: list[ToolSpan], calls: list[LLMFields]) -> None:
    requests = [(call["start_ns"], request) for call in calls for request in call.get("tool_call_requests", ())]
    if not requests:
        return
    batches = [n for n, call in enumerate(calls) for _ in call.get("tool_call_requests", ())]
    used = [False] * len(requests)
    by_id: dict[str, int] = {}
    i: int | None
    for i, (_, request) in enumerate(requests):
        if request["call_id"]:
            by_id.setdefault(request["call_id"], i)
    for tool in tools:
        i = by_id.get(tool.call_id) if tool.call_id else None
        if i is not None and not used[i]:
            used[i] = True
            tool.matched = requests[i][1]
            tool.request, tool.batch = i, batches[i]
    # by name and time: tools with no id, and tools whose id no request carries (ADK gives its tool spans ids
    # of its own, while the model's request carries the model's id)
    for tool in tools:
        if tool.matched is not None:
            continue
        candidates = [
            i
            for i, (start, request) in enumerate(requests)
            if not used[i] and request["name"] == tool.name and start <= tool.node.start
        ]
        if not candidates:
            continue
        same_args = [
            i for i in candidates if isinstance(tool.args, dict) and json_equal(requests[i][1]["args"], tool.args)
        ]
        i = same_args[-1] if same_args else candidates[0]
        used[i] = True
        tool.matched = requests[i][1]
        tool.request, tool.batch = i, batches[i]
        tool.call_id = tool.call_id or tool.matched["call_id"]


def _tool_call(tool: ToolSpan) -> dict[str, Any]:
    args = tool.args
    matched = tool.matched
    if matched is not None and (args is None or (not isinstance(args, dict) and matched["args"])):
        args = matched["args"]  # missing or bare arguments: the model's request has the object
    elif args is not None and not isinstance(args, dict):
        tool.node.note(f"tool {tool.name!r}: arguments are not an object; kept as {{'input': ...}}")
    node = tool.node
    return {
        "name": tool.name,
        "args": as_args(args),
        "call_id": tool.call_id,
        "result": tool.result,
        "args_captured": args is not None,
        "result_captured": tool.result is not None,
        "error": tool.error,
        "duration_seconds": (node.end - node.start) / 1e9,
        "span_id": node.span_id,
    }


def _returned_to_model(calls: list[LLMFields]) -> dict[str, Any]:
    """What each tool call returned, by call id, as later model calls received it (their ``tool`` messages)."""
    results: dict[str, Any] = {}
    for call in calls:
        for message in call.get("input_messages", ()):
            if message.get("role") == "tool" and message.get("tool_call_id"):
                results.setdefault(message["tool_call_id"], message.get("content"))
    return results


def _results_from_model_input(tool_calls: list[dict[str, Any]], calls: list[LLMFields]) -> None:
    """A tool span that did not record its result (ADK's GenAI spans keep content out of spans, in log records
    that carry only the model calls' messages) takes what the model was given back for that call id."""
    missing = [tc for tc in tool_calls if not tc["result_captured"] and tc["call_id"]]
    if not missing:
        return
    results = _returned_to_model(calls)
    for tc in missing:
        result = results.get(tc["call_id"])
        if result is not None:
            tc["result"] = parse_json_maybe(result)
            tc["result_captured"] = True


def _from_requests(calls: list[LLMFields]) -> list[dict[str, Any]]:
    """Tool calls known only from the model's requests (no tool spans): results from later tool messages."""
    results = _returned_to_model(calls)
    out = []
    for call in calls:
        for request in call.get("tool_call_requests", ()):
            result = results.get(request["call_id"]) if request["call_id"] else None
            out.append(
                {
                    "name": request["name"],
                    "args": request["args"],
                    "call_id": request["call_id"],
                    "result": parse_json_maybe(result),
                    "result_captured": result is not None,
                    "span_id": call["span_id"],
                }
            )
    return out


def _ran_together(batch: list[ToolSpan]) -> bool:
    """Whether the framework ran the batch concurrently: two of its calls overlap in time."""
    spans = sorted(batch, key=lambda t: t.node.start)
    return any(later.node.start < earlier.node.end for earlier, later in pairwise(spans))


def _in_request_order(tools: list[ToolSpan]) -> list[ToolSpan]:
    """The tool spans in execution order, except that a batch the framework ran concurrently keeps the order
    the model asked for its calls in. A batch is the calls one model response asked for together that ran
    side by side (siblings under one parent); it ran concurrently when two of them overlap in time.

    Concurrent calls' start times only say how the framework scheduled them: LangGraph's ToolNode starts a
    sync tool (run in a thread) before an async one the model asked for first, and whether one ends before
    the next starts varies from run to run, so ordering by start time would make an exact-order trajectory
    check pass or fail by scheduling. A batch run one call after another keeps the order it ran in. Each
    batch keeps the places its calls occupy; only the calls within it are put in request order.
    """
    batches: dict[tuple[int, int], list[int]] = {}  # (parent span, model call) -> positions in ``tools``
    for position, tool in enumerate(tools):
        if tool.batch >= 0:
            parent = tool.node.parent
            batches.setdefault((parent.index if parent is not None else -1, tool.batch), []).append(position)
    ordered = list(tools)
    for positions in batches.values():
        if len(positions) > 1 and _ran_together([tools[p] for p in positions]):
            members = sorted((tools[p] for p in positions), key=lambda t: t.request)
            for position, tool in zip(positions, members):
                ordered[position] = tool
    return ordered


def build_tool_calls(tools: list[ToolSpan], calls: list[LLMFields]) -> list[dict[str, Any]]:
    """The trace's tool calls, as ``ToolCall`` fields, in execution order (a batch of calls one model response
    asked for together in the order it asked for them: :func:`_in_request_order`)."""
    if not tools:
        return _from_requests(calls)
    _match_requests(tools, calls)
    tool_calls = [_tool_call(tool) for tool in _in_request_order(tools)]
    _results_from_model_input(tool_calls, calls)
    return tool_calls
