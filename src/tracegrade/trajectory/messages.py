"""Message-shape normalisation: every convention's messages become ``{role, content, tool_calls?, ...}``.

Normalised message: ``role`` is ``system``/``user``/``assistant``/``tool``; ``content`` is text;
``tool_calls`` (assistant) is a list of ``{id, name, arguments}``; tool results are separate ``tool``
messages with ``tool_call_id`` (and ``name`` when known). A user message that only carries tool
results (pydantic-ai before v6, ADK, Anthropic) becomes ``tool`` messages, so the "user" role always
means something a person typed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tracegrade.trajectory.values import RecentLists, as_text, convert_json_list, decode_json

__all__ = [
    "NOT_A_LIST",
    "answer_in",
    "build_messages",
    "last_assistant_text",
    "last_user_text",
    "message_key",
    "messages_from_any",
    "messages_from_json_list",
    "normalise_role",
    "normalise_tool_calls",
    "query_in",
    "share_single_message",
    "tool_call",
]

Message = dict[str, Any]

_ROLE_ALIASES = {
    "user": "user",
    "human": "user",
    "assistant": "assistant",
    "ai": "assistant",
    "model": "assistant",
    "bot": "assistant",
    "system": "system",
    "developer": "system",
    "tool": "tool",
    "function": "tool",
    "ipython": "tool",
}
_TEXT_TYPES = frozenset({"text", "input_text", "output_text"})
_CALL_TYPES = frozenset({"tool_call", "tool_use", "function_call"})
_RESULT_TYPES = frozenset({"tool_call_response", "tool_result", "function_call_output", "function_response"})
_LC_TYPES = frozenset({"human", "ai", "system", "tool", "function", "chat", "AIMessageChunk", "HumanMessageChunk"})
_MAX_DEPTH = 6


def normalise_role(role: Any, default: str) -> str:
    """Map role spellings (``human``, ``ai``, ``model``, ``AIMessage``…) onto the four roles."""
    if not isinstance(role, str) or not role:
        return default
    known = _ROLE_ALIASES.get(role)
    if known is not None:
        return known
    key = role.lower()
    if key.endswith("messagechunk"):
        key = key[: -len("messagechunk")]
    elif key.endswith("message") and key != "message":
        key = key[: -len("message")]
    return _ROLE_ALIASES.get(key, default if key in ("unknown", "") else key)


def _arguments(value: Any) -> Any:
    if isinstance(value, str) and value.lstrip()[:1] in ("{", "["):
        try:
            return decode_json(value)
        except ValueError:
            return value
    return value


def tool_call(call_id: Any, name: Any, arguments: Any) -> Message:
    """One requested tool call; JSON-text arguments (OpenAI, OpenInference, legacy keys) are decoded."""
    return {
        "id": call_id if isinstance(call_id, str) and call_id else None,
        "name": name if isinstance(name, str) else str(name or ""),
        "arguments": _arguments(arguments),
    }


def normalise_tool_calls(calls: Any) -> list[Message]:
    """OpenAI (``{id, function:{name, arguments}}``), LangChain (``{name, args, id}``) and OTel shapes."""
    calls = _arguments(calls)
    if isinstance(calls, dict):
        calls = [calls]
    if not isinstance(calls, list):
        return []
    out = []
    for item in calls:
        if not isinstance(item, dict):
            continue
        function = item.get("function")
        if isinstance(function, dict):
            out.append(tool_call(item.get("id"), function.get("name"), function.get("arguments")))
        else:
            args = item.get("args", item.get("arguments", item.get("input")))
            out.append(tool_call(item.get("id") or item.get("call_id"), item.get("name"), args))
    return out


def _block_text(block: Any) -> str:
    if isinstance(block, str):
        return block
    text, _, _ = _split_content(block)
    return text


def _first_key(block: dict[str, Any], keys: tuple[str, ...]) -> Any:
    for key in keys:
        if key in block:
            return block[key]
    return None


_NONE: tuple[Any, ...] = ()  # no tool calls / no tool results (shared: never modified)


def _split_content(content: Any) -> tuple[str, Sequence[Message], Sequence[tuple[Any, str, Any]]]:
    """Text, tool calls and tool results (``(call_id, text, name)``) of any content shape."""
    if isinstance(content, str):
        return content, _NONE, _NONE
    if content is None:
        return "", _NONE, _NONE
    if isinstance(content, dict):
        content = [content]
    elif not isinstance(content, list):
        return as_text(content) or "", _NONE, _NONE
    if len(content) == 1 and isinstance(content[0], dict) and content[0].get("type") == "text":  # the common case
        text = _first_key(content[0], ("content", "text"))
        if isinstance(text, str):
            return text, _NONE, _NONE
    texts: list[str] = []
    calls: list[Message] = []
    results: list[tuple[Any, str, Any]] = []
    for block in content:
        if isinstance(block, str):
            texts.append(block)
            continue
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text" or (kind in _TEXT_TYPES if isinstance(kind, str) else "text" in block):
            value = _first_key(block, ("text", "content"))
            if isinstance(value, str):
                texts.append(value)
        elif not isinstance(kind, str):
            use, res = block.get("toolUse"), block.get("toolResult")  # Bedrock / Strands blocks
            if isinstance(use, dict):
                calls.append(tool_call(use.get("toolUseId"), use.get("name"), use.get("input")))
            elif isinstance(res, dict):
                results.append((res.get("toolUseId"), _block_text(res.get("content")), None))
        elif kind in _CALL_TYPES:
            args = _first_key(block, ("arguments", "input", "args"))
            calls.append(tool_call(block.get("id") or block.get("call_id"), block.get("name"), args))
        elif kind in _RESULT_TYPES:
            value = _first_key(block, ("response", "result", "output", "content"))
            call_id = block.get("id") or block.get("tool_use_id") or block.get("call_id")
            results.append((call_id, value if isinstance(value, str) else as_text(value) or "", block.get("name")))
    return "\n".join(texts), calls, results


def build_messages(
    role: str,
    content: Any,
    tool_calls: Any = None,
    tool_call_id: Any = None,
    name: Any = None,
) -> list[Message]:
    """Normalised message(s) for one source message (tool results split into their own ``tool`` messages)."""
    text, calls, results = _split_content(content)
    if tool_calls:
        calls = [*calls, *normalise_tool_calls(tool_calls)]
    out: list[Message] = []
    for call_id, result_text, result_name in results:
        message: Message = {"role": "tool", "content": result_text, "tool_call_id": call_id}
        if result_name:
            message["name"] = result_name
        out.append(message)
    if text or calls or not results:
        message = {"role": role, "content": text}
        if calls:
            message["tool_calls"] = calls
        if tool_call_id:
            message["tool_call_id"] = tool_call_id
        if name and role == "tool":
            message["name"] = name
        out.append(message)
    return out


def _lc_message(item: dict[str, Any]) -> list[Message] | None:
    """LangChain serialisations: ``{"lc":1,"type":"constructor","id":[…,"AIMessage"],"kwargs":…}`` and
    ``{"type":"ai","data":…}`` (plus a plain ``model_dump()`` with ``type`` and ``content``)."""
    if item.get("lc") and item.get("type") == "constructor" and isinstance(item.get("kwargs"), dict):
        ids = item.get("id")
        cls = ids[-1] if isinstance(ids, list) and ids else ""
        fields = item["kwargs"]
        role = normalise_role(fields.get("role") or cls, "user")
    elif not isinstance(item.get("type"), str) or item["type"] not in _LC_TYPES:
        return None
    elif isinstance(item.get("data"), dict):
        fields = item["data"]
        role = normalise_role(fields.get("role") or item["type"], "user")
    elif "content" in item:
        fields = item
        role = normalise_role(item.get("role") or item["type"], "user")
    else:
        return None
    return build_messages(
        role, fields.get("content"), fields.get("tool_calls"), fields.get("tool_call_id"), fields.get("name")
    )


def _message_from_dict(item: dict[str, Any], default_role: str) -> list[Message] | None:
    if "parts" in item:  # OTel GenAI
        return build_messages(normalise_role(item.get("role"), default_role), item["parts"], name=item.get("name"))
    lc = _lc_message(item)
    if lc is not None:
        return lc
    if "role" in item or "content" in item or "tool_calls" in item:
        return build_messages(
            normalise_role(item.get("role"), default_role),
            item.get("content"),
            item.get("tool_calls"),
            item.get("tool_call_id"),
            item.get("name"),
        )
    return None


def messages_from_any(value: Any, default_role: str, _depth: int = 0) -> list[Message] | None:
    """Messages from a framework payload (state dicts, OpenAI requests/responses, LangChain results…).

    Plain text becomes one message with ``default_role``; an unrecognised object gives None.
    """
    if value is None or _depth > _MAX_DEPTH:
        return None
    if isinstance(value, str):
        return [{"role": default_role, "content": value}]
    if isinstance(value, list):
        return _joined([_list_item(item, default_role, _depth) for item in value])
    if isinstance(value, dict):
        for key in ("messages", "inputs", "outputs", "input", "output"):
            if key in value:
                found_messages = messages_from_any(value[key], default_role, _depth + 1)
                if found_messages is not None:
                    return found_messages
        if isinstance(value.get("choices"), list):  # OpenAI chat completion
            return messages_from_any(
                [c.get("message") for c in value["choices"] if isinstance(c, dict) and c.get("message")],
                "assistant",
                _depth + 1,
            )
        if isinstance(value.get("generations"), list):  # LangChain LLMResult
            return _generations(value["generations"])
        return _message_from_dict(value, default_role)
    return None


def _list_item(item: Any, default_role: str, depth: int) -> list[Message] | None:
    """The messages of one item of a message list (None when it is not a message)."""
    if isinstance(item, dict):
        return _message_from_dict(item, default_role)
    if isinstance(item, (list, tuple)) and len(item) == 2 and all(isinstance(x, str) for x in item):
        return build_messages(normalise_role(item[0], default_role), item[1])  # ("user", "hi")
    return messages_from_any(item, default_role, depth + 1)


def _joined(items: list[list[Message] | None]) -> list[Message] | None:
    """The messages of a list's items, in order; None when no item was a message."""
    out: list[Message] = []
    found = False
    for sub in items:
        if sub is not None:
            out.extend(sub)
            found = True
    return out if found else None


def messages_from_json_list(text: str, default_role: str, recent: RecentLists) -> list[Message] | NotAList | None:
    """``messages_from_any(json.loads(text), default_role)`` for a JSON array of messages; a history that
    extends one in ``recent`` (one per kind of history) is only decoded and normalised where it is new.

    ``NOT_A_LIST`` when ``text`` is not a valid non-empty array: decode it the ordinary way. The
    messages may be shared with other calls reading the same history: never modify them.
    """
    subs = convert_json_list(text, recent, lambda item: _list_item(item, default_role, 0))
    return NOT_A_LIST if subs is None else _joined(subs)


def share_single_message(text: str, value: Any, messages: list[Message], recent: RecentLists) -> None:
    """Offer ``messages``, converted from ``value`` (``text`` decoded: a one-message array, such as a model
    call's output), to the histories ``messages_from_json_list`` reads through ``recent``: the next call's
    input repeats that message, with the same text. Only a message that names its own role is offered (GenAI
    ``parts`` and a role), as it converts the same whatever the default role."""
    if not (isinstance(value, list) and len(value) == 1):
        return
    item = value[0]
    if isinstance(item, dict) and "parts" in item and normalise_role(item.get("role"), ""):
        recent.add_known(text.strip()[1:-1].strip(_JSON_SPACE), messages)


_JSON_SPACE = " \t\n\r"


class NotAList:
    """The type of ``NOT_A_LIST``."""


NOT_A_LIST = NotAList()


def _generations(generations: list[Any]) -> list[Message]:
    out: list[Message] = []
    stack = list(reversed(generations))
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(reversed(item))
        elif isinstance(item, dict):
            message = item.get("message")
            found = _message_from_dict(message, "assistant") if isinstance(message, dict) else None
            if found is None and isinstance(item.get("text"), str):
                found = [{"role": "assistant", "content": item["text"]}]
            out.extend(found or [])
    return out


def message_key(message: Message) -> tuple[Any, ...]:
    """Identity of a message for de-duplication (tool-call ids ignored: ADK history ids are synthetic)."""
    calls = message.get("tool_calls")
    calls_key = tuple([(c.get("name"), repr(c.get("arguments"))) for c in calls]) if calls else ()
    return (message.get("role"), message.get("content"), calls_key, message.get("name"))


def _last_text(messages: Sequence[Message] | None, role: str) -> str | None:
    for message in reversed(messages or ()):
        if message.get("role") == role and message.get("content"):
            return str(message["content"])
    return None


def last_user_text(messages: Sequence[Message] | None) -> str | None:
    """Text of the last user message (the query a run answered), or None."""
    return _last_text(messages, "user")


def last_assistant_text(messages: Sequence[Message] | None) -> str | None:
    """Text of the last assistant message (the answer of a run), or None."""
    return _last_text(messages, "assistant")


def query_in(value: Any) -> str | None:
    """The last user text of a payload holding messages in any shape ``messages_from_any`` reads."""
    return last_user_text(messages_from_any(value, "user"))


def answer_in(value: Any) -> str | None:
    """The last assistant text of a payload holding messages in any shape ``messages_from_any`` reads."""
    return last_assistant_text(messages_from_any(value, "assistant"))
