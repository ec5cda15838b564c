"""The tools a model was offered, read from its LLM spans (``ToolDefinition`` fields, one per tool name).

Sources: OTel GenAI ``gen_ai.tool.definitions`` (``[{type, name, description, parameters}]``, also the
OpenAI ``{type, function: {...}}`` form), OpenInference ``llm.tools.{i}.tool.json_schema`` (one JSON
object per tool) and pydantic-ai's ``model_request_parameters.function_tools`` (``parameters_json_schema``).
A tool defined on several spans keeps the last definition that has a parameter schema.
"""

from __future__ import annotations

from typing import Any

from tracegrade.models.json_values import parse_json_maybe
from tracegrade.trajectory.tree import Role, SpanNode

__all__ = ["read_tool_definitions"]

_GENAI = "gen_ai.tool.definitions"
_PYDANTIC_AI = "model_request_parameters"
_OPENINFERENCE = "llm.tools."
_SCHEMA_SUFFIX = ".tool.json_schema"
_UNNUMBERED = 2**31  # after any tool index an instrumentation writes
_SCHEMA_KEYS = ("parameters", "parameters_json_schema", "input_schema", "inputSchema")


def _definition(item: Any) -> dict[str, Any] | None:
    item = parse_json_maybe(item)
    if not isinstance(item, dict):
        return None
    function = item.get("function")
    inner: dict[str, Any] = function if isinstance(function, dict) else item
    name = inner.get("name")
    if not isinstance(name, str) or not name:
        return None
    schema: Any = None
    for key in _SCHEMA_KEYS:
        if inner.get(key) is not None:
            schema = parse_json_maybe(inner[key])
            break
    description = inner.get("description")
    return {
        "name": name,
        "description": description if isinstance(description, str) else None,
        "parameters": schema if isinstance(schema, dict) else None,
    }


def _tool_index(key: str) -> tuple[int, str]:
    """The order of ``llm.tools.{i}.tool.json_schema``: by ``i`` as a number (tool 10 after tool 9, not after
    tool 1), a key whose ``i`` is not a number after every numbered one."""
    index = key[len(_OPENINFERENCE) : -len(_SCHEMA_SUFFIX)]
    return (int(index), "") if index.isdigit() else (_UNNUMBERED, index)


def _items(attributes: dict[str, Any], openinference: bool) -> list[Any]:
    items: list[Any] = []
    listed = parse_json_maybe(attributes.get(_GENAI))
    if isinstance(listed, list):
        items.extend(listed)
    request = parse_json_maybe(attributes.get(_PYDANTIC_AI))
    if isinstance(request, dict) and isinstance(request.get("function_tools"), list):
        items.extend(request["function_tools"])
    if openinference:
        flattened = sorted(
            (_tool_index(key), value)
            for key, value in attributes.items()
            if key.startswith(_OPENINFERENCE) and key.endswith(_SCHEMA_SUFFIX)
        )
        items.extend(value for _, value in flattened)
    return items


def read_tool_definitions(order: list[SpanNode]) -> list[dict[str, Any]]:
    """``ToolDefinition`` fields of every tool offered on the LLM spans of ``order``, by first appearance."""
    found: dict[str, dict[str, Any]] = {}
    keys = order[0].shared.trace_keys if order else None
    # the flattened OpenInference keys are looked for only when some span carries one
    openinference = keys is None or any(key.startswith(_OPENINFERENCE) for key in keys)
    for node in order:
        if node.role != Role.LLM:
            continue
        for item in _items(node.span.attributes, openinference):
            definition = _definition(item)
            if definition is None:
                continue
            known = found.get(definition["name"])
            if known is None or definition["parameters"] is not None or known["parameters"] is None:
                found[definition["name"]] = definition
    return list(found.values())
