"""OpenLLMetry / Traceloop conventions: ``traceloop.*`` span kinds and entity payloads (0.47 legacy and
0.62), legacy flattened ``gen_ai.prompt.N``/``gen_ai.completion.N`` messages, LangGraph association
properties, and the ``invoke_agent X`` -> ``X.workflow`` pair of 0.62.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tracegrade.trajectory.langgraph import GraphTask, graph_task
from tracegrade.trajectory.messages import Message, answer_in, build_messages, normalise_role, query_in
from tracegrade.trajectory.tool_payloads import Reader, ToolPayloads
from tracegrade.trajectory.tree import Role, SpanNode
from tracegrade.trajectory.values import group_indexed, load_json

_KIND_ROLES = {
    "workflow": Role.WORKFLOW,
    "task": Role.NODE,
    "agent": Role.AGENT,
    "tool": Role.TOOL,
}
_LLM_REQUEST_TYPES = frozenset({"chat", "completion", "llm"})
_ASSOCIATION = "traceloop.association.properties."
_GRAPH_NODE_KEY = _ASSOCIATION + "langgraph_node"
_TOOL_PAYLOADS = ToolPayloads(
    "#traceloop", input_keys=("traceloop.entity.input",), output_keys=("traceloop.entity.output",)
)


def classify(node: SpanNode) -> str | None:
    kind = node.attrs.get("traceloop.span.kind")
    if isinstance(kind, str) and kind:
        return _KIND_ROLES.get(kind, Role.OTHER)
    request_type = node.attrs.get("llm.request.type")
    if isinstance(request_type, str) and request_type:
        return Role.LLM if request_type in _LLM_REQUEST_TYPES else Role.OTHER
    return None


def is_traceloop(node: SpanNode) -> bool:
    attrs = node.attrs
    return "traceloop.span.kind" in attrs or "llm.request.type" in attrs or "traceloop.workflow.name" in attrs


def association(node: SpanNode) -> dict[str, Any]:
    return node.memo(
        "#traceloop.association",
        lambda n: {k[len(_ASSOCIATION) :]: v for k, v in n.attrs.items() if k.startswith(_ASSOCIATION)},
    )


def task(node: SpanNode) -> GraphTask | None:
    if _GRAPH_NODE_KEY not in node.attrs:
        return None
    return graph_task(association(node))


WORKFLOW_KIND_KEY = "traceloop.span.kind"  # a workflow twin has it (see ``is_workflow_twin``)


def is_workflow_twin(outer: SpanNode, inner: SpanNode) -> bool:
    """``invoke_agent X`` whose child ``X.workflow`` repeats it (Traceloop 0.62): one graph run."""
    return inner.attrs.get(WORKFLOW_KIND_KEY) == "workflow" and (
        inner.name == f"{agent_label(outer)}.workflow" or inner.attrs.get("traceloop.entity.name") == agent_label(outer)
    )


def agent_label(node: SpanNode) -> str:
    value = node.attrs.get("gen_ai.agent.name")
    return value if isinstance(value, str) else node.name.removeprefix("invoke_agent ")


# -- legacy flattened messages -------------------------------------------------------------------


def _content(value: Any) -> Any:
    """Legacy content is text, JSON-encoded text (``'""'``) or JSON content blocks."""
    if isinstance(value, str) and value[:1] in ('"', "[", "{"):
        parsed, problem = load_json(value, expect_json=True)
        if problem is None and isinstance(parsed, (str, list, dict)):
            return parsed
    return value


def _legacy(node: SpanNode, prefix: str, default_role: str) -> list[Message] | None:
    grouped = node.indexed(prefix)
    if grouped is None:
        return None
    out: list[Message] = []
    for index in sorted(grouped):
        fields = grouped[index]
        calls = group_indexed(fields, "tool_calls.")
        tool_calls = (
            [
                {"id": calls[i].get("id"), "name": calls[i].get("name"), "arguments": calls[i].get("arguments")}
                for i in sorted(calls)
            ]
            if calls
            else None
        )
        out += build_messages(
            normalise_role(fields.get("role"), default_role),
            _content(fields.get("content")),
            tool_calls,
            fields.get("tool_call_id"),
        )
    return out


def prompt_messages(node: SpanNode) -> list[Message] | None:
    return _legacy(node, "gen_ai.prompt.", "user")


def completion_messages(node: SpanNode) -> list[Message] | None:
    return _legacy(node, "gen_ai.completion.", "assistant")


def finish_reason(node: SpanNode) -> str | None:
    return node.first_text("gen_ai.completion.0.finish_reason")


# -- tools ---------------------------------------------------------------------------------------


def tool_name(node: SpanNode) -> str | None:
    if node.attrs.get("traceloop.span.kind") != "tool":
        return None
    return node.first_text("traceloop.entity.name") or node.name.removesuffix(".tool")


tool_args: Reader = _TOOL_PAYLOADS.args
tool_result: Reader = _TOOL_PAYLOADS.result


def tool_call_id(node: SpanNode) -> str | None:
    return _TOOL_PAYLOADS.call_id(node)


# -- nodes, routing and runs ---------------------------------------------------------------------


def agent_name(node: SpanNode) -> str | None:
    return node.first_text("traceloop.entity.name")


def _outputs(node: SpanNode) -> Any:
    for key in ("gen_ai.task.output", "traceloop.entity.output"):
        value = node.parsed(key)
        if isinstance(value, dict) and "outputs" in value:
            return value["outputs"]
    return None


def routing_output(node: SpanNode) -> Any:
    return _outputs(node)


def workflow_nodes(node: SpanNode) -> set[str]:
    value = node.attrs.get("gen_ai.workflow.nodes")
    return {v for v in value if isinstance(v, str)} if isinstance(value, (list, tuple)) else set()


def run_query(node: SpanNode) -> str | None:
    return _first_text_in(node, ("traceloop.entity.input", "gen_ai.task.input"), query_in)


def run_answer(node: SpanNode) -> str | None:
    return _first_text_in(node, ("traceloop.entity.output", "gen_ai.task.output"), answer_in)


def _first_text_in(node: SpanNode, keys: tuple[str, ...], read: Callable[[Any], str | None]) -> str | None:
    """The first text ``read`` finds in the payloads under ``keys`` (each decoded only when needed)."""
    for key in keys:
        text = read(node.parsed(key))
        if text:
            return text
    return None


_CONVERSATION_KEYS = tuple(_ASSOCIATION + key for key in ("session_id", "thread_id", "conversation_id"))


def conversation_id(node: SpanNode) -> str | None:
    return node.first_text(*_CONVERSATION_KEYS)
