"""OpenTelemetry GenAI conventions: current ``gen_ai.*`` attributes, the older event form, pydantic-ai
(instrumentation versions 1-6) and Strands.

Readers return None when their source is absent, so ``sources`` can fall through to the next one.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from tracegrade.trajectory.messages import (
    Message,
    NotAList,
    build_messages,
    last_assistant_text,
    last_user_text,
    messages_from_any,
    messages_from_json_list,
    normalise_role,
    share_single_message,
)
from tracegrade.trajectory.tool_payloads import Reader, ToolPayloads
from tracegrade.trajectory.tree import Role, SpanNode
from tracegrade.trajectory.values import as_int, as_text, load_json

_OPERATION_ROLES = {
    "chat": Role.LLM,
    "generate_content": Role.LLM,
    "text_completion": Role.LLM,
    "execute_tool": Role.TOOL,
    "invoke_agent": Role.AGENT,
    "invoke_workflow": Role.WORKFLOW,
    "execute_task": Role.NODE,  # Traceloop 0.62 LangGraph tasks
}
_EVENT_ROLES = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}
_CHOICE_EVENT = "gen_ai.choice"
_DETAILS_EVENT = "gen_ai.client.inference.operation.details"
_UNKNOWN_MODELS = frozenset({"", "unknown"})
_SYSTEM_KEY = "gen_ai.system_instructions"
_OUTPUT_KEY = "gen_ai.output.messages"
_INPUT_HISTORY = "genai.input"  # the ``recent_lists`` kind of conversation histories
_TOOL_PAYLOADS = ToolPayloads(
    "#genai",
    input_keys=("gen_ai.tool.call.arguments", "tool_arguments"),
    output_keys=("gen_ai.tool.call.result", "tool_response"),
)


# -- classification ----------------------------------------------------------------------------


def classify(node: SpanNode) -> str | None:
    operation = node.attrs.get("gen_ai.operation.name")
    if isinstance(operation, str) and operation:
        return _OPERATION_ROLES.get(operation, Role.OTHER)
    return None


def classify_by_name(node: SpanNode) -> str | None:
    """pydantic-ai v1/v2 span names (no operation attribute on agent and tool spans) and Strands cycles."""
    name = node.name
    if name == "agent run":
        return Role.AGENT
    if name == "running tool":
        return Role.TOOL
    if name == "execute_event_loop_cycle":
        return Role.CHAIN
    if name.startswith("chat") and ("gen_ai.request.model" in node.attrs or "gen_ai.system" in node.attrs):
        return Role.LLM
    return None


# -- LLM content ---------------------------------------------------------------------------------


def _system(value: Any) -> list[Message]:
    if value is None:
        return []
    if isinstance(value, str):
        return [{"role": "system", "content": value}]
    return build_messages("system", value)


def _otel_messages(value: Any, default_role: str) -> list[Message]:
    found = messages_from_any(value, default_role)
    return found if found is not None else []


def _history(node: SpanNode, key: str) -> list[Message] | None:
    """The messages of a conversation attribute (None when absent). A history usually repeats the one read
    before it (the previous model call's input, the last call's input in a run's whole conversation) and
    adds to it: only what is new is decoded and normalised."""
    text = node.attrs.get(key)
    if isinstance(text, str):
        found = messages_from_json_list(text, "user", node.shared.recent_lists(_INPUT_HISTORY))
        if not isinstance(found, NotAList):
            return found if found is not None else []
    value = node.parsed(key, expect_json=True)
    return None if value is None else _otel_messages(value, "user")


def _system_messages(node: SpanNode) -> list[Message] | None:
    """The system instructions as messages (None when absent); normalised once per distinct text, as every
    model call of a run usually repeats them."""
    value = node.parsed(_SYSTEM_KEY, expect_json=True)
    if value is None:
        return None
    text = node.attrs[_SYSTEM_KEY]
    if not isinstance(text, str):
        return _system(value)
    memo = node.shared.memo("genai.system")
    found = memo.get(text)
    if found is None:
        found = memo[text] = _system(value)
    return found


def input_messages(node: SpanNode) -> list[Message] | None:
    messages = _history(node, "gen_ai.input.messages")
    system = _system_messages(node)
    if messages is None and system is None:
        return None
    return (system or []) + (messages or [])


def output_messages(node: SpanNode) -> list[Message] | None:
    """The output messages; a single one is offered to the next call's input history, which repeats it."""
    value = node.parsed(_OUTPUT_KEY, expect_json=True)  # decoded once, for finish_reason too
    if value is None:
        return None
    messages = _otel_messages(value, "assistant")
    text = node.attrs[_OUTPUT_KEY]
    if isinstance(text, str):
        share_single_message(text, value, messages, node.shared.recent_lists(_INPUT_HISTORY))
    return messages


def _content(value: Any) -> Any:
    """Event content: text, or (Strands, pydantic v1) JSON text of a list of content blocks."""
    if isinstance(value, str) and value.lstrip()[:1] in ("[", "{"):
        parsed, problem = load_json(value, expect_json=False)
        if problem is None and isinstance(parsed, (list, dict)):
            return parsed
    return value


def _event_messages(events: Iterator[tuple[str, dict[str, Any]]]) -> tuple[list[Message], list[Message]] | None:
    inputs: list[Message] = []
    outputs: list[Message] = []
    found = False
    for name, payload in events:
        if name == _DETAILS_EVENT:
            found = True
            inputs += _system(_content(payload.get("gen_ai.system_instructions")))
            inputs += _otel_messages(_content(payload.get("gen_ai.input.messages")), "user")
            outputs += _otel_messages(_content(payload.get("gen_ai.output.messages")), "assistant")
        elif name in _EVENT_ROLES:
            found = True
            role = normalise_role(payload.get("role"), _EVENT_ROLES[name])
            inputs += build_messages(
                role,
                _content(payload.get("content")),
                _content(payload.get("tool_calls")),
                payload.get("id") if role == "tool" else None,
            )
        elif name == _CHOICE_EVENT:
            found = True
            message = _content(payload.get("message"))
            if not isinstance(message, dict):
                message = {"content": message if message is not None else payload.get("content")}
            role = normalise_role(message.get("role"), "assistant")
            outputs += build_messages(role, _content(message.get("content")), _content(message.get("tool_calls")))
    return (inputs, outputs) if found else None


def _payload(body: Any, attributes: dict[str, Any]) -> dict[str, Any]:
    if isinstance(body, str):
        body = _content(body)
    payload: dict[str, Any] = dict(body) if isinstance(body, dict) else {}
    if body is not None and not isinstance(body, dict):
        payload["content"] = body
    for key, value in attributes.items():
        payload.setdefault(key, value)
    return payload


def _span_and_log_events(node: SpanNode) -> Iterator[tuple[str, dict[str, Any]]]:
    for event in node.span.events:
        yield event.name, event.attributes
    for record in sorted(node.logs, key=lambda r: r.time_ns):
        name = record.event_name or record.attributes.get("event.name") or ""
        yield str(name), _payload(record.body, record.attributes)


def _events(node: SpanNode) -> tuple[list[Message], list[Message]] | None:
    if not node.span.events and not node.logs:
        return None
    return node.memo("#genai.events", lambda n: _event_messages(_span_and_log_events(n)))


def event_input(node: SpanNode) -> list[Message] | None:
    found = _events(node)
    return found[0] if found and found[0] else None


def event_output(node: SpanNode) -> list[Message] | None:
    found = _events(node)
    return found[1] if found and found[1] else None


def _attribute_events(node: SpanNode, key: str) -> tuple[list[Message], list[Message]] | None:
    """pydantic-ai v1 ``events`` / ``all_messages_events``: a JSON list of event dicts with ``event.name``."""
    value = node.parsed(key, expect_json=True)
    if not isinstance(value, list):
        return None
    return _event_messages((str(item.get("event.name", "")), item) for item in value if isinstance(item, dict))


def pydantic_event_input(node: SpanNode) -> list[Message] | None:
    found = node.memo("#genai.pydantic_events", lambda n: _attribute_events(n, "events"))
    return found[0] if found and found[0] else None


def pydantic_event_output(node: SpanNode) -> list[Message] | None:
    found = node.memo("#genai.pydantic_events", lambda n: _attribute_events(n, "events"))
    return found[1] if found and found[1] else None


# -- LLM facts -----------------------------------------------------------------------------------


def model(node: SpanNode) -> str | None:
    for key in ("gen_ai.response.model", "gen_ai.request.model"):
        value = node.attrs.get(key)
        if isinstance(value, str) and value not in _UNKNOWN_MODELS:
            return value
    return None


def provider(node: SpanNode) -> str | None:
    return node.first_text("gen_ai.provider.name", "gen_ai.system")


_USAGE_KEYS = {
    "input_tokens": ("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens"),
    "output_tokens": ("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens"),
    "cache_read_tokens": ("gen_ai.usage.cache_read.input_tokens", "gen_ai.usage.cache_read_input_tokens"),
    "cache_creation_tokens": (
        "gen_ai.usage.cache_creation.input_tokens",
        "gen_ai.usage.cache_creation_input_tokens",
        "gen_ai.usage.cache_write_input_tokens",
    ),
}


def usage(node: SpanNode) -> dict[str, int] | None:
    found: dict[str, int] = {}
    attrs = node.attrs
    for field, keys in _USAGE_KEYS.items():
        for key in keys:
            value = attrs.get(key)
            if value is not None and (value := as_int(value)) is not None:
                found[field] = value
                break
    return found or None


def finish_reason(node: SpanNode) -> str | None:
    """The last non-empty of ``gen_ai.response.finish_reasons``, else of the output messages' reasons."""
    reasons = node.attrs.get("gen_ai.response.finish_reasons")
    if isinstance(reasons, str):
        reasons = [reasons]
    if not isinstance(reasons, (list, tuple)):
        messages = node.parsed("gen_ai.output.messages", expect_json=True)
        reasons = (
            [m.get("finish_reason") for m in messages if isinstance(m, dict)] if isinstance(messages, list) else []
        )
    return next((r for r in reversed(reasons) if isinstance(r, str) and r), None)


# -- tools ---------------------------------------------------------------------------------------


def tool_name(node: SpanNode) -> str | None:
    value = node.first_text("gen_ai.tool.name")
    if value:
        return value
    if node.name.startswith("execute_tool "):
        return node.name[len("execute_tool ") :]
    return None


tool_args: Reader = _TOOL_PAYLOADS.args
tool_result: Reader = _TOOL_PAYLOADS.result


def tool_call_id(node: SpanNode) -> str | None:
    return node.first_text("gen_ai.tool.call.id") or _TOOL_PAYLOADS.call_id(node)


def _tool_events(node: SpanNode) -> tuple[Any, Any] | None:
    """Strands tool spans: ``gen_ai.tool.message`` (arguments) and ``gen_ai.choice`` (result) events, or
    the ``operation.details`` event with ``tool_call`` / ``tool_call_response`` parts."""
    if not node.span.events and not node.logs:
        return None
    args: Any = None
    result: Any = None
    for name, payload in _span_and_log_events(node):
        if name == "gen_ai.tool.message":
            args = _content(payload.get("content"))
        elif name == _CHOICE_EVENT:
            result = _block_text(_content(payload.get("message")))
        elif name == _DETAILS_EVENT:
            args = _part_value(payload.get("gen_ai.input.messages"), "tool_call", ("arguments",), args)
            result = _part_value(
                payload.get("gen_ai.output.messages"), "tool_call_response", ("response", "result"), result
            )
    return (args, result) if args is not None or result is not None else None


def _part_value(messages: Any, part_type: str, keys: tuple[str, ...], default: Any) -> Any:
    messages = _content(messages)
    for message in messages if isinstance(messages, list) else ():
        for part in message.get("parts") or () if isinstance(message, dict) else ():
            if isinstance(part, dict) and part.get("type") == part_type:
                for key in keys:
                    if key in part:
                        return _block_text(part[key])
    return default


def _block_text(value: Any) -> Any:
    """``[{"text": "sunny"}]`` (Strands result content) -> ``"sunny"``; other values unchanged."""
    if isinstance(value, list) and value and all(isinstance(b, dict) and set(b) == {"text"} for b in value):
        return "\n".join(str(b["text"]) for b in value)
    return value


def event_tool_args(node: SpanNode) -> Any:
    found = node.memo("#genai.tool_events", _tool_events)
    return found[0] if found else None


def event_tool_result(node: SpanNode) -> Any:
    found = node.memo("#genai.tool_events", _tool_events)
    return found[1] if found else None


# -- agents and runs -----------------------------------------------------------------------------


def agent_name(node: SpanNode) -> str | None:
    value = node.first_text("gen_ai.agent.name", "agent_name", "gen_ai.task.name", "gen_ai.workflow.name")
    if value:
        return value
    for prefix in ("invoke_agent ", "execute_task ", "invoke_workflow "):
        if node.name.startswith(prefix):
            return node.name[len(prefix) :]
    return None


def run_query(node: SpanNode) -> str | None:
    """The user message an agent/run span answered (its own input messages, pydantic history, events)."""
    for messages in (
        input_messages(node),
        _history(node, "pydantic_ai.all_messages"),
        event_input(node),
        _first(node.memo("#genai.all_messages_events", lambda n: _attribute_events(n, "all_messages_events"))),
    ):
        text = last_user_text(messages)
        if text:
            return text
    return None


def run_answer(node: SpanNode) -> str | None:
    """The answer of an agent/run span: pydantic ``final_result``, its output messages, a choice event."""
    final = node.attrs.get("final_result")
    if final is not None:
        return as_text(final)
    for messages in (output_messages(node), event_output(node)):
        text = last_assistant_text(messages)
        if text:
            return text
    return None


def _first(found: tuple[list[Message], list[Message]] | None) -> list[Message] | None:
    return found[0] if found else None


def conversation_id(node: SpanNode) -> str | None:
    return node.first_text("gen_ai.conversation.id")
