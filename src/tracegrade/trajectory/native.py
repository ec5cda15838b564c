"""tracegrade's own attributes (INTERFACES §2): ``tracegrade.span.kind`` helper spans and the
``tracegrade.turn`` root of a live eval-case turn (a wrapper, whose input/output are only fallbacks).
"""

from __future__ import annotations

from typing import Any

from tracegrade.trajectory.tool_payloads import Reader, attribute_payload, json_attribute
from tracegrade.trajectory.tree import Role, SpanNode
from tracegrade.trajectory.values import as_int, as_text

_KIND_ROLES = {"node": Role.NODE, "tool": Role.TOOL, "llm": Role.LLM}
TURN_PREFIX = "tracegrade.turn"
_METADATA_KEYS = {
    "tracegrade.eval_set.id": "eval_set_id",
    "tracegrade.case.id": "case_id",
    "tracegrade.turn.index": "turn_index",
    "tracegrade.run.id": "run_id",
}


_TURN_NAME_START = TURN_PREFIX + " "


def is_turn(node: SpanNode) -> bool:
    # by name only: the collector also stamps tracegrade.case.id on every span started inside a case
    name = node.name
    return name.startswith(TURN_PREFIX) and (name == TURN_PREFIX or name.startswith(_TURN_NAME_START))


def classify(node: SpanNode) -> str | None:
    kind = node.attrs.get("tracegrade.span.kind")
    if isinstance(kind, str) and kind in _KIND_ROLES:
        return _KIND_ROLES[kind]
    if is_turn(node):
        return Role.WORKFLOW
    return None


def node_name(node: SpanNode) -> str | None:
    return node.first_text("tracegrade.node.name")


def tool_name(node: SpanNode) -> str | None:
    return node.first_text("tracegrade.tool.name")


tool_args: Reader = attribute_payload("tracegrade.tool.arguments", json_attribute)
tool_result: Reader = attribute_payload("tracegrade.tool.result")


def tool_call_id(node: SpanNode) -> str | None:
    return node.first_text("tracegrade.tool.call_id")


def turn_metadata(node: SpanNode) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, field in _METADATA_KEYS.items():
        if key in node.attrs:
            found[field] = as_int(node.attrs[key]) if field == "turn_index" else node.attrs[key]
    return found


def turn_input(node: SpanNode) -> str | None:
    return as_text(node.attrs.get("tracegrade.turn.input"))


def turn_output(node: SpanNode) -> str | None:
    return as_text(node.attrs.get("tracegrade.turn.output"))


def conversation_id(node: SpanNode) -> str | None:
    return node.first_text("tracegrade.thread_id")
