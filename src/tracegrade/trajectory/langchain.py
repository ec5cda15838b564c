"""LangChain payload shapes found inside tool-span attributes (OpenInference, Traceloop old and new keys).

Tool inputs arrive as the callback payload ``{"input_str": "<python repr>", "inputs": {...}, "kwargs":
{"tool_call_id": ...}}``, as a ``Send`` task ``{"__type": "tool_call_with_context", "tool_call": {...}}``
or as SDK-decorator ``{"args": [...], "kwargs": {...}}``; outputs are ToolMessages in one of two
serialisations, sometimes wrapped in ``{"output": ...}``.
"""

from __future__ import annotations

from typing import Any

from tracegrade.trajectory.values import load_json, parse_python_literal

__all__ = ["tool_input", "tool_output"]


def tool_input(value: Any) -> tuple[Any, str | None] | None:
    """``(arguments, call_id)`` from a LangChain tool-input payload; None when ``value`` is not one."""
    if not isinstance(value, dict):
        return None
    if value.get("__type") == "tool_call_with_context" and isinstance(value.get("tool_call"), dict):
        call = value["tool_call"]
        return call.get("args"), _str_or_none(call.get("id"))
    kwargs = value.get("kwargs")
    if not isinstance(kwargs, dict):
        kwargs = {}
    if "input_str" in value or ("inputs" in value and ("metadata" in value or "tags" in value)):
        call_id = _str_or_none(kwargs.get("tool_call_id"))
        inputs = value.get("inputs")
        if isinstance(inputs, dict):
            return inputs, call_id
        raw = value.get("input_str")
        return (parse_python_literal(raw) if isinstance(raw, str) else inputs), call_id
    if len(value) == 2 and isinstance(value.get("args"), list) and "kwargs" in value:  # traceloop SDK decorator
        args = value["args"]
        return (dict(kwargs) if not args else {"args": args, **kwargs}), None
    return None


def _tool_message(value: dict[str, Any]) -> dict[str, Any] | None:
    if value.get("lc") and value.get("type") == "constructor":
        ids = value.get("id")
        if isinstance(ids, list) and ids and ids[-1] == "ToolMessage" and isinstance(value.get("kwargs"), dict):
            return value["kwargs"]
        return None
    if value.get("type") == "tool" and isinstance(value.get("data"), dict):
        return value["data"]
    if value.get("type") == "tool" and "tool_call_id" in value:
        return value
    return None


def tool_output(value: Any) -> tuple[Any, str | None] | None:
    """``(result, call_id)`` from a ToolMessage payload (optionally inside ``{"output": ...}``); else None."""
    if not isinstance(value, dict):
        return None
    inner = value.get("output")
    message = _tool_message(inner) if isinstance(inner, dict) else None
    if message is None:
        message = _tool_message(value)
    if message is None:
        if isinstance(inner, (str, int, float, list)) and set(value) <= {"output", "kwargs"}:
            return inner, None
        return None
    content = message.get("content")
    if isinstance(content, str):
        content, _ = load_json(content, expect_json=False)
    return content, _str_or_none(message.get("tool_call_id"))


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
