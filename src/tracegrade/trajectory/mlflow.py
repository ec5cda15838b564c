"""MLflow tracing exported over OTLP: ``mlflow.spanType`` and JSON-encoded ``mlflow.*`` attributes.

Every MLflow attribute value is JSON text, even plain strings (``'"AGENT"'``); empty JSON objects mean
"nothing recorded".
"""

from __future__ import annotations

from typing import Any

from tracegrade.trajectory.messages import Message, answer_in, last_user_text, messages_from_any
from tracegrade.trajectory.tool_payloads import Reader, attribute_payload
from tracegrade.trajectory.tree import Role, SpanNode
from tracegrade.trajectory.values import as_int, as_text

_TYPE_ROLES = {
    "LLM": Role.LLM,
    "CHAT_MODEL": Role.LLM,
    "TOOL": Role.TOOL,
    "AGENT": Role.AGENT,
    "WORKFLOW": Role.WORKFLOW,
    "TASK": Role.NODE,
    "CHAIN": Role.CHAIN,
}


def value(node: SpanNode, key: str) -> Any:
    """A decoded ``mlflow.*`` attribute; None when absent or an empty object."""
    decoded = node.parsed(key, expect_json=True)
    return None if decoded == {} else decoded


def classify(node: SpanNode) -> str | None:
    span_type = value(node, "mlflow.spanType")
    if not isinstance(span_type, str) or not span_type:
        return None
    return _TYPE_ROLES.get(span_type.upper(), Role.OTHER)


def input_messages(node: SpanNode) -> list[Message] | None:
    return messages_from_any(value(node, "mlflow.spanInputs"), "user")


def output_messages(node: SpanNode) -> list[Message] | None:
    return messages_from_any(value(node, "mlflow.spanOutputs"), "assistant")


def model(node: SpanNode) -> str | None:
    found = value(node, "mlflow.llm.model")
    return found if isinstance(found, str) and found else None


def provider(node: SpanNode) -> str | None:
    found = value(node, "mlflow.llm.provider")
    return found if isinstance(found, str) and found else None


def usage(node: SpanNode) -> dict[str, int] | None:
    tokens = value(node, "mlflow.chat.tokenUsage")
    if not isinstance(tokens, dict):
        return None
    found = {"input_tokens": as_int(tokens.get("input_tokens")), "output_tokens": as_int(tokens.get("output_tokens"))}
    clean = {k: v for k, v in found.items() if v is not None}
    return clean or None


def tool_name(node: SpanNode) -> str | None:
    if "mlflow.spanType" not in node.attrs:
        return None
    found = value(node, "mlflow.spanFunctionName")
    return found if isinstance(found, str) and found else node.name


tool_args: Reader = attribute_payload("mlflow.spanInputs", value)
tool_result: Reader = attribute_payload("mlflow.spanOutputs", value)


def run_query(node: SpanNode) -> str | None:
    return last_user_text(input_messages(node))


def run_answer(node: SpanNode) -> str | None:
    outputs = value(node, "mlflow.spanOutputs")
    text = answer_in(outputs)
    if text is None and isinstance(outputs, (int, float)):
        return as_text(outputs)
    return text
