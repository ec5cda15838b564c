"""``map_spans``: the spans of one trace (or one case) -> the ``ExecutionResult`` criteria grade.

Steps: build the span tree (repairing what is broken), classify every span once, walk it in execution
order collecting node visits, routing decisions, tool calls and LLM calls, then read the user query,
the final answer and the conversation. Whatever could not be read is listed in ``mapping_issues``.

The user query is the message this run answered: the last user message of the run-level input (root
agent/workflow spans), else of the first model call's input, else ``tracegrade.turn.input``; with a
conversation history in the input that is this turn's message, not the first turn's. The final answer
is the run-level output, else the last model text, else ``tracegrade.turn.output``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

from tracegrade.models.dataset import StepType
from tracegrade.models.execution import ExecutionResult
from tracegrade.models.span import LogRecordData, SpanRecord
from tracegrade.trajectory import calls, native, sources
from tracegrade.trajectory.calls import LLMFields
from tracegrade.trajectory.messages import Message, last_user_text, message_key
from tracegrade.trajectory.tool_definitions import read_tool_definitions
from tracegrade.trajectory.tree import Forest, Role, SpanNode, build_forest, preorder
from tracegrade.trajectory.values import Issues

__all__ = ["MAPPER_REVISION", "group_traces", "map_spans"]

# What the mapper derives from spans, numbered: bump it in the same change as anything that makes the mapper derive
# something else from the same spans (a new field, a step marked otherwise), so that the trajectories stored before
# are known to be out of date (``traces.mapper_revision``) and `tracegrade rebuild` maps them again.
# 1: tool calls made inside another tool call (an agent called as a tool) are marked ``within_tool``.
MAPPER_REVISION: Final = 1

_RUN_DEPTH = 3  # how deep below a root the run-level (agent/workflow) spans are looked for
_RUN_ROLES = frozenset({Role.WORKFLOW, Role.AGENT, Role.CHAIN, Role.OTHER})

# The result is assembled as plain dicts and lists, each shaped like the fields of its model
# (``NodeVisit``, ``LLMCall``, ``ToolCall``, ``TrajectoryStep``, ``NodeResponseData``), and validated
# once at the end: one pydantic call instead of one per object.
Fields = dict[str, Any]


def group_traces(spans: Iterable[SpanRecord]) -> dict[str, list[SpanRecord]]:
    """Spans by trace id, traces and spans in the order they arrived."""
    grouped: dict[str, list[SpanRecord]] = {}
    for span in spans:
        grouped.setdefault(span.trace_id, []).append(span)
    return grouped


class _Walk:
    """One pass over the spans in execution order: visits, steps, run-level spans, tool and LLM spans."""

    def __init__(self, order: list[SpanNode], branches: dict[int, str]) -> None:
        size = len(order)  # every span once: their indexes are 0 .. size - 1
        self.visit_of: list[int] = [-1] * size  # index of the nearest enclosing visit span (or -1)
        self.names: dict[int, str] = {}
        self.visits: list[Fields] = []  # NodeVisit fields
        self.visit_parents: list[int] = []
        self.entries: list[tuple[str, Any]] = []  # ("node", visit) | ("tool", SpanNode) | ("router", ...)
        self.run_spans: list[SpanNode] = []
        # a tool span's id -> the id of the tool span it ran inside (an agent called as a tool, e.g. ADK's
        # AgentTool: its calls are not the calling agent's, and ADK's trajectory leaves them out)
        self.within_tool: dict[str, str] = {}
        tool_of: list[SpanNode | None] = [None] * size  # the nearest enclosing tool span (a tool span: itself)
        depth = [0] * size
        for node in order:
            parent = node.parent
            outer = self.visit_of[parent.index] if parent is not None else -1
            outer_tool = tool_of[parent.index] if parent is not None else None
            if parent is not None:
                depth[node.index] = depth[parent.index] + 1
            self.visit_of[node.index] = outer
            tool_of[node.index] = outer_tool
            role = node.role
            if role in Role.VISITS:
                self._visit(node, outer)
            elif role == Role.TOOL:
                self.entries.append(("tool", node))
                tool_of[node.index] = node
                if outer_tool is not None:
                    self.within_tool[node.span_id] = outer_tool.span_id
            elif role == Role.ROUTER:
                self.entries.append(("router", (node, branches[node.index])))
            if outer == -1 and role in _RUN_ROLES and depth[node.index] <= _RUN_DEPTH:
                self.run_spans.append(node)

    def _visit(self, node: SpanNode, outer: int) -> None:
        name = sources.node_name(node)
        self.names[node.index] = name
        self.visit_of[node.index] = node.index
        visit = {
            "name": name,
            "span_id": node.span_id,
            "parent_name": self.names.get(outer),
            "start_ns": node.start,
            "end_ns": node.end,
            "step": node.task.step if node.task is not None else None,
            "status": node.span.status_code,
        }
        self.visits.append(visit)
        self.visit_parents.append(outer)
        self.entries.append(("node", visit))

    def visit_name(self, node: SpanNode) -> str | None:
        return self.names.get(self.visit_of[node.index])


def _assign_parallel_groups(visits: list[Fields], parents: list[int]) -> None:
    """Siblings of one LangGraph super-step, or siblings overlapping in time, share a parallel group."""
    siblings: dict[int, list[Fields]] = {}
    for visit, parent in zip(visits, parents):
        siblings.setdefault(parent, []).append(visit)
    group = 0
    for members in siblings.values():
        if len(members) < 2:
            continue
        if all(v["step"] is not None for v in members):
            clusters: dict[Any, list[Fields]] = {}
            for v in members:
                clusters.setdefault(v["step"], []).append(v)
            candidates = list(clusters.values())
        else:
            candidates = _overlapping(sorted(members, key=lambda v: v["start_ns"]))
        for cluster in candidates:
            if len(cluster) > 1:
                for v in cluster:
                    v["parallel_group"] = group
                group += 1


def _overlapping(members: list[Fields]) -> list[list[Fields]]:
    clusters: list[list[Fields]] = []
    end = -1
    for v in members:
        if clusters and v["start_ns"] < end:
            clusters[-1].append(v)
            end = max(end, v["end_ns"])
        else:
            clusters.append([v])
            end = v["end_ns"]
    return clusters


def _trajectory(entries: list[tuple[str, Any]], tool_calls: list[Fields], walk: _Walk) -> list[Fields]:
    """``TrajectoryStep`` fields (as ``TrajectoryStep.node``/``.tool``/``.conditional`` would set them).

    The tool steps follow ``tool_calls``' order: the walk meets the tool spans in start order, while a batch
    of calls one model response asked for together is listed in the order the model asked (calls.py).
    """
    tools = {tc["span_id"]: tc for tc in tool_calls if tc["span_id"]}
    tool_entries = [item for kind, item in entries if kind == "tool"]
    if len(tool_entries) == len(tools) == len(tool_calls):  # one call per tool span: follow the calls' order
        reordered = iter(tool_calls)
        entries = [(kind, next(reordered) if kind == "tool" else item) for kind, item in entries]
    else:
        entries = [(kind, tools.get(item.span_id) if kind == "tool" else item) for kind, item in entries]
    starts = {node.span_id: node.start for node in tool_entries}
    steps: list[Fields] = []
    for kind, item in entries:
        if kind == "node":
            steps.append(
                {
                    "step_type": StepType.NODE,
                    "name": item["name"],
                    "timestamp": item["start_ns"] / 1e9,
                    "metadata": {"span_id": item["span_id"]},
                }
            )
        elif kind == "tool":
            call = item
            if call is not None:
                steps.append(
                    {
                        "step_type": StepType.TOOL,
                        "name": call["name"],
                        "args": call["args"] or {},
                        "timestamp": starts[call["span_id"]] / 1e9,
                        "metadata": _tool_step_metadata(call, walk),
                    }
                )
        else:
            node, branch = item
            source = walk.visit_name(node)
            steps.append(
                {
                    "step_type": StepType.CONDITIONAL,
                    "name": sources.node_name(node),
                    "timestamp": node.start / 1e9,
                    "metadata": {"chosen": branch, "source": source},
                }
            )
    return steps


def _tool_step_metadata(call: Fields, walk: _Walk) -> Fields:
    """A tool step's span and call ids, and ``within_tool``: the span id of the tool call it was made inside."""
    metadata = {"span_id": call["span_id"], "call_id": call["call_id"]}
    outer = walk.within_tool.get(call["span_id"]) if call["span_id"] else None
    if outer is not None:
        metadata["within_tool"] = outer
    return metadata


def _conversation(llm_calls: list[LLMFields]) -> list[Message]:
    """Every message once, in order; a message repeated within one call (same call made twice) is kept."""
    distinct: dict[tuple[Any, ...], int] = {}  # message_key -> a number standing for it
    numbers: dict[int, int] = {}  # by message identity: calls share the messages of their history
    seen: dict[int, int] = {}
    out: list[Message] = []
    for call in llm_calls:
        local: dict[int, int] = {}
        for messages in (call.get("input_messages", ()), call.get("output_messages", ())):
            for message in messages:
                number = numbers.get(id(message))
                if number is None:
                    number = numbers[id(message)] = distinct.setdefault(message_key(message), len(distinct))
                count = local[number] = local.get(number, 0) + 1
                if count > seen.get(number, 0):
                    seen[number] = count
                    out.append(message)
    return out


def _node_responses(llm_calls: list[LLMFields]) -> list[Fields]:
    """``NodeResponseData`` fields, one per LLM call."""
    responses: list[Fields] = []
    for call in llm_calls:
        requests = call.get("tool_call_requests", ())
        responses.append(
            {
                "node_name": call["node"] or "",
                "input_messages": call.get("input_messages", []),
                "response_text": call.get("output_text") or "",
                "has_tool_calls": bool(requests),
                "tool_call_names": [r["name"] for r in requests],
                "timestamp": call.get("start_ns", 0) / 1e9,
                "token_usage": call.get("token_usage", {}),
            }
        )
    if responses and responses[-1]["response_text"] and not responses[-1]["has_tool_calls"]:
        responses[-1]["is_final"] = True
    return responses


def _final_llm_text(llm_calls: list[LLMFields]) -> str | None:
    for call in reversed(llm_calls):
        if call.get("output_text") and not call.get("tool_call_requests"):
            return call["output_text"]
    return next((c["output_text"] for c in reversed(llm_calls) if c.get("output_text")), None)


def _first_query(llm_calls: list[LLMFields]) -> str | None:
    for call in llm_calls:
        text = last_user_text(call.get("input_messages", ()))
        if text:
            return text
    return None


def _run_answer(run_spans: list[SpanNode]) -> str | None:
    """The answer of the last outermost run span that has one.

    Agents run one after another in a turn (a planner then a writer, a run retried after a failure) each
    leave a run span: the turn's answer is the last one's, not the first's. A run nested in another one that
    answers (a workflow span around its agent) gives way to the outer run, which answers for the whole.
    """
    answers: dict[int, str] = {}
    last: str | None = None
    for node in run_spans:  # preorder: parents before children, siblings in execution order
        text = sources.first(sources.RUN_ANSWER, node)
        if not text or _inside_answered(node, answers):
            continue
        answers[node.index] = text
        last = text
    return last


def _inside_answered(node: SpanNode, answers: dict[int, str]) -> bool:
    parent = node.parent
    while parent is not None:
        if parent.index in answers:
            return True
        parent = parent.parent
    return False


def _root_status(forest: Forest) -> tuple[str, str | None]:
    failed = next((r for r in forest.roots if r.span.status_code == "ERROR"), None)
    if failed is not None:
        return "ERROR", calls.span_error(failed)
    return forest.roots[0].span.status_code, None


def _empty(issues: Issues) -> ExecutionResult:
    issues.add("no spans to map")
    return ExecutionResult(response_captured=False, content_captured=False, mapping_issues=issues.as_list())


def map_spans(spans: Iterable[SpanRecord], logs: Iterable[LogRecordData] = ()) -> ExecutionResult:
    """Rebuild what an agent did from its spans (and the log records that carry content for them).

    The result keeps the span list as its ``source_spans`` (SQL assertions query them).
    """
    span_list = spans if isinstance(spans, list) else list(spans)
    issues = Issues()
    forest = build_forest(span_list, logs, issues)
    if not forest.nodes:
        return _empty(issues)
    try:
        fields = _execution_fields(forest, issues)
    finally:
        forest.release()
    del forest  # the spans' tree and everything read from it are freed before the result is built
    result = ExecutionResult.model_validate(fields)
    result.attach_spans(span_list)
    return result


def _execution_fields(forest: Forest, issues: Issues) -> Fields:
    """The ``ExecutionResult`` fields, validated by the caller once the tree is released."""
    branches = sources.classify_all(forest.nodes)
    order = preorder(forest)
    walk = _Walk(order, branches)
    _assign_parallel_groups(walk.visits, walk.visit_parents)

    llm_calls = calls.read_llm_calls(order, walk.visit_name)
    tool_spans = calls.read_tool_spans(order)
    tool_calls = calls.build_tool_calls(tool_spans, llm_calls)
    steps = _trajectory(walk.entries, tool_calls, walk)

    run_spans = walk.run_spans
    query = sources.first_of(sources.RUN_QUERY, run_spans) or _first_query(llm_calls)
    answer = _run_answer(run_spans) or _final_llm_text(llm_calls)
    content_captured = (
        query is not None
        or answer is not None
        or any(c["content_captured"] for c in llm_calls)
        or any(t.get("args_captured", True) or t["result_captured"] for t in tool_calls)
    )
    turn = next((n for n in order if n.role == Role.WORKFLOW and native.is_turn(n)), None)
    if turn is not None:
        query = query or native.turn_input(turn)
        answer = answer or native.turn_output(turn)
    status, error = _root_status(forest)
    start = min(r.start for r in forest.roots)
    end = max(r.end for r in forest.roots)
    return {
        "tool_calls": tool_calls,
        "trajectory": steps,
        "messages": _conversation(llm_calls),
        "actual_response": answer or "",
        "node_responses": _node_responses(llm_calls),
        "node_visits": [v["name"] for v in walk.visits],
        "duration_seconds": max(0, end - start) / 1e9,
        "user_query": query,
        "response_captured": answer is not None,
        "content_captured": content_captured,
        "visits": walk.visits,
        "llm_calls": llm_calls,
        "tool_definitions": read_tool_definitions(order),
        "convention": sources.trace_convention(forest.nodes),
        "trace_ids": forest.trace_ids,
        "conversation_id": sources.first_of(sources.CONVERSATION_ID, order),
        "status": status,
        "error": error,
        "mapping_issues": issues.as_list(),
        "metadata": native.turn_metadata(turn) if turn is not None else {},
    }
