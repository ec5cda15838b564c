"""OpenInference conventions: flattened ``llm.*`` messages, ``input.value``/``output.value``, LangGraph node
metadata (openinference-instrumentation-langchain) and the OpenAI Agents SDK tree.
"""

from __future__ import annotations

from typing import Any

from tracegrade.trajectory.langgraph import GraphTask, graph_task
from tracegrade.trajectory.messages import (
    Message,
    answer_in,
    build_messages,
    messages_from_any,
    normalise_role,
    query_in,
)
from tracegrade.trajectory.tool_payloads import Reader, ToolPayloads
from tracegrade.trajectory.tree import Role, SpanNode
from tracegrade.trajectory.values import as_int

_KIND_ROLES = {
    "LLM": Role.LLM,
    "TOOL": Role.TOOL,
    "AGENT": Role.AGENT,
    "CHAIN": Role.CHAIN,
}
_TOOL_PAYLOADS = ToolPayloads("#oi", input_keys=("input.value",), output_keys=("output.value",))


def classify(node: SpanNode) -> str | None:
    kind = node.attrs.get("openinference.span.kind")
    if not isinstance(kind, str) or not kind:
        return None
    role = _KIND_ROLES.get(kind.upper(), Role.OTHER)
    if role == Role.AGENT and is_langchain(node):
        return Role.CHAIN  # LangChain marks AGENT when the name contains "agent"; langgraph_node decides
    return role


def is_langchain(node: SpanNode) -> bool:
    return "langchain" in node.span.scope_name or isinstance(metadata(node).get("ls_integration"), str)


def metadata(node: SpanNode) -> dict[str, Any]:
    value = node.parsed("metadata")
    return value if isinstance(value, dict) else {}


def task(node: SpanNode) -> GraphTask | None:
    """The LangGraph task of the span's metadata: one per distinct metadata value (shared: never modify)."""
    if "metadata" not in node.attrs:
        return None
    value = node.parsed("metadata")  # decoded once per distinct text: spans of one task share the value
    if not isinstance(value, dict):
        return None
    memo = node.shared.memo("openinference.task")
    key = id(value)  # the decoded value is kept by the mapping's shared work (or the span) while it runs
    if key not in memo:
        memo[key] = graph_task(value)
    return memo[key]


def has_agent_identity(node: SpanNode) -> bool:
    return "agent.name" in node.attrs or "graph.node.id" in node.attrs


# -- LLM content ---------------------------------------------------------------------------------


def _message_fields(fields: dict[str, Any]) -> tuple[Any, list[dict[str, Any]] | None]:
    """Content (text or ``message.contents.{j}`` blocks) and ``message.tool_calls.{k}`` of one message."""
    blocks: dict[int, dict[str, Any]] = {}
    calls: dict[int, dict[str, Any]] = {}
    for key, value in fields.items():
        if key.startswith(("message.tool_calls.", "message.contents.")):
            _, family, index, rest = (*key.split(".", 3), "")[:4]
            if index.isdigit():
                target = calls if family == "tool_calls" else blocks
                target.setdefault(int(index), {})[rest] = value
    content = fields.get("message.content")
    if content is None and blocks:
        content = [
            {"type": "text", "text": blocks[i].get("message_content.text")}
            for i in sorted(blocks)
            if blocks[i].get("message_content.type", "text") == "text"
        ]
    tool_calls = [
        {
            "id": calls[i].get("tool_call.id"),
            "function": {
                "name": calls[i].get("tool_call.function.name"),
                "arguments": calls[i].get("tool_call.function.arguments"),
            },
        }
        for i in sorted(calls)
    ]
    return content, tool_calls or None


def _message(fields: dict[str, Any], default_role: str) -> list[Message]:
    content, tool_calls = _message_fields(fields)
    return build_messages(
        normalise_role(fields.get("message.role"), default_role),
        content,
        tool_calls,
        fields.get("message.tool_call_id"),
        fields.get("message.name"),
    )


def _flattened(node: SpanNode, prefix: str, default_role: str) -> list[Message] | None:
    """Messages from ``{prefix}{i}.message.*`` keys. Model spans repeat the history of the calls before
    them, so a message whose fields are all text is normalised once per trace (and shared: never modify)."""
    grouped = node.indexed(prefix)
    if grouped is None:
        return None
    memo = node.shared.memo("openinference.message")
    out: list[Message] = []
    for index in sorted(grouped):
        fields = grouped[index]
        for value in fields.values():
            if type(value) is not str:
                out += _message(fields, default_role)
                break
        else:
            key = (default_role, *fields.items())
            found = memo.get(key)
            if found is None:
                found = memo[key] = _message(fields, default_role)
            out += found
    return out


def _messages_or_texts(
    node: SpanNode, prefix: str, role: str, texts_prefix: str, text_key: str
) -> list[Message] | None:
    """Messages from ``{prefix}{i}.message.*``, else one ``role`` message per ``{texts_prefix}{i}.{text_key}``."""
    found = _flattened(node, prefix, role)
    if found is None:
        texts = node.indexed(texts_prefix)
        if texts:
            found = [{"role": role, "content": str(texts[i].get(text_key, ""))} for i in sorted(texts)]
    return found


def input_messages(node: SpanNode) -> list[Message] | None:
    return _messages_or_texts(node, "llm.input_messages.", "user", "llm.prompts.", "prompt.text")


def output_messages(node: SpanNode) -> list[Message] | None:
    return _messages_or_texts(node, "llm.output_messages.", "assistant", "llm.choices.", "completion.text")


def io_input_messages(node: SpanNode) -> list[Message] | None:
    return messages_from_any(node.parsed("input.value"), "user")


def io_output_messages(node: SpanNode) -> list[Message] | None:
    return messages_from_any(node.parsed("output.value"), "assistant")


# -- LLM facts -----------------------------------------------------------------------------------


def model(node: SpanNode) -> str | None:
    return node.first_text("llm.response.model_name", "llm.model_name", "llm.request.model_name")


def provider(node: SpanNode) -> str | None:
    return node.first_text("llm.provider", "llm.system")


_USAGE_KEYS = {
    "input_tokens": "llm.token_count.prompt",
    "output_tokens": "llm.token_count.completion",
    "cache_read_tokens": "llm.token_count.prompt_details.cache_read",
    "cache_creation_tokens": "llm.token_count.prompt_details.cache_write",
}


def usage(node: SpanNode) -> dict[str, int] | None:
    found = {field: as_int(node.attrs.get(key)) for field, key in _USAGE_KEYS.items()}
    clean = {k: v for k, v in found.items() if v is not None}
    return clean or None


def finish_reason(node: SpanNode) -> str | None:
    return node.first_text("llm.finish_reason")


# -- tools ---------------------------------------------------------------------------------------


def tool_name(node: SpanNode) -> str | None:
    return node.first_text("tool.name")


tool_args: Reader = _TOOL_PAYLOADS.args
tool_result: Reader = _TOOL_PAYLOADS.result


def tool_call_id(node: SpanNode) -> str | None:
    return node.first_text("tool.id", "tool_call.id") or _TOOL_PAYLOADS.call_id(node, output_first=True)


# -- agents, routing and runs --------------------------------------------------------------------


def agent_name(node: SpanNode) -> str | None:
    return node.first_text("agent.name", "graph.node.id")


def routing_output(node: SpanNode) -> Any:
    return node.parsed("output.value")


def run_query(node: SpanNode) -> str | None:
    return query_in(node.parsed("input.value"))


def run_answer(node: SpanNode) -> str | None:
    return answer_in(node.parsed("output.value"))


def conversation_id(node: SpanNode) -> str | None:
    return node.first_text("session.id")
