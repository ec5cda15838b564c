"""Google ADK built-in tracing (tracer ``gcp.vertex.agent``): schema 2 (GenAI keys, read by ``genai``) and
schema 1 / ADK 1.x (``invocation``, ``call_llm`` with ``llm_request``/``llm_response`` JSON blobs, tool
content in ``gcp.vertex.agent.tool_call_args``/``tool_response``).

Function-call ids inside the request history are synthetic (``get_weather_0``) and are dropped; ids in
the response are kept.
"""

from __future__ import annotations

from typing import Any

from tracegrade.trajectory.messages import Message, build_messages, normalise_role
from tracegrade.trajectory.tool_payloads import Reader, attribute_payload, json_attribute
from tracegrade.trajectory.tree import Role, SpanNode
from tracegrade.trajectory.values import as_int

_PREFIX = "gcp.vertex.agent."
_MARKER_KEYS = (
    "gcp.vertex.agent.event_id",
    "gcp.vertex.agent.invocation_id",
    "gcp.vertex.agent.session_id",
    "gcp.vertex.agent.llm_request",
    "gcp.vertex.agent.tool_call_args",
)


def is_adk(node: SpanNode) -> bool:
    return node.span.scope_name == "gcp.vertex.agent" or node.carries(_MARKER_KEYS)


def classify(node: SpanNode) -> str | None:
    name = node.name
    if name == "invocation":
        return Role.WORKFLOW
    if name == "call_llm":
        return Role.LLM
    if name.startswith("agent_run [") or (name.startswith("invoke_agent ") and is_adk(node)):
        return Role.AGENT
    if name.startswith("execute_tool ") and is_adk(node):
        return Role.TOOL
    return None


_MERGED_TOOLS = "(merged tools)"


def classify_merged_tools(node: SpanNode) -> str | None:
    """ADK's ``execute_tool (merged)`` span: no tool call of its own. When a model turn asks for several tools,
    ADK runs each under its own ``execute_tool`` span and then writes one more, named ``(merged tools)`` with
    the merged response event's id as its call id, for its web UI. Read as a tool, it added a call nobody made
    to every parallel batch. Asked before the GenAI classifier, which would take it for a tool."""
    if node.attrs.get("gen_ai.tool.name") == _MERGED_TOOLS and node.name.startswith("execute_tool"):
        return Role.OTHER
    return None


def agent_name(node: SpanNode) -> str | None:
    if node.name.startswith("agent_run [") and node.name.endswith("]"):
        return node.name[len("agent_run [") : -1]
    return None


def _parts_blocks(parts: Any, keep_ids: bool) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if not isinstance(parts, list):
        return blocks
    for part in parts:
        if not isinstance(part, dict):
            continue
        call = part.get("function_call") or part.get("functionCall")
        response = part.get("function_response") or part.get("functionResponse")
        if isinstance(part.get("text"), str) and not part.get("thought"):
            blocks.append({"type": "text", "text": part["text"]})
        elif isinstance(call, dict):
            blocks.append(_function_block("tool_call", call, "arguments", call.get("args"), keep_ids))
        elif isinstance(response, dict):
            blocks.append(
                _function_block("tool_call_response", response, "response", response.get("response"), keep_ids)
            )
    return blocks


def _function_block(
    block_type: str, part: dict[str, Any], value_key: str, value: Any, keep_ids: bool
) -> dict[str, Any]:
    """A ``function_call`` / ``function_response`` part as a content block with ``value`` under ``value_key``."""
    return {"type": block_type, "id": part.get("id") if keep_ids else None, "name": part.get("name"), value_key: value}


def _content_messages(content: Any, default_role: str, keep_ids: bool) -> list[Message]:
    if not isinstance(content, dict):
        return []
    role = normalise_role(content.get("role"), default_role)
    return build_messages(role, _parts_blocks(content.get("parts"), keep_ids))


def request_messages(node: SpanNode) -> list[Message] | None:
    request = node.parsed(_PREFIX + "llm_request", expect_json=True)
    if not isinstance(request, dict) or "contents" not in request:
        return None
    out: list[Message] = []
    config = request.get("config")
    system = config.get("system_instruction") if isinstance(config, dict) else None
    if isinstance(system, str) and system:
        out.append({"role": "system", "content": system})
    elif isinstance(system, dict):
        out += _content_messages({**system, "role": "system"}, "system", keep_ids=False)
    contents = request.get("contents")
    for content in contents if isinstance(contents, list) else []:
        out += _content_messages(content, "user", keep_ids=False)
    return out


def _response(node: SpanNode) -> dict[str, Any] | None:
    response = node.parsed(_PREFIX + "llm_response", expect_json=True)
    return response if isinstance(response, dict) and response else None


def response_messages(node: SpanNode) -> list[Message] | None:
    response = _response(node)
    if response is None or "content" not in response:
        return None
    return _content_messages(response.get("content"), "assistant", keep_ids=True)


def usage(node: SpanNode) -> dict[str, int] | None:
    """From ``usage_metadata`` (early 1.x wrote the total into ``gen_ai.usage.output_tokens``)."""
    response = _response(node)
    meta = response.get("usage_metadata") if response else None
    if not isinstance(meta, dict):
        return None
    found = {
        "input_tokens": as_int(meta.get("prompt_token_count")),
        "output_tokens": as_int(meta.get("candidates_token_count")),
        "cache_read_tokens": as_int(meta.get("cached_content_token_count")),
    }
    clean = {k: v for k, v in found.items() if v is not None}
    return clean or None


def finish_reason(node: SpanNode) -> str | None:
    response = _response(node)
    value = response.get("finish_reason") if response else None
    return value.lower() if isinstance(value, str) and value else None


tool_args: Reader = attribute_payload(_PREFIX + "tool_call_args", json_attribute)


def tool_result(node: SpanNode) -> Any:
    value = node.parsed(_PREFIX + "tool_response", expect_json=True)
    if isinstance(value, dict) and len(value) == 1 and "result" in value and not isinstance(value["result"], dict):
        return value["result"]  # ADK 1.x wraps a non-dict result as {"result": ...}
    return value


def conversation_id(node: SpanNode) -> str | None:
    return node.first_text(_PREFIX + "session_id")
