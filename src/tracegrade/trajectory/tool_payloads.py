"""Readers of a convention's tool-span payloads (arguments, result, call id): each convention says where
it keeps them, the readers are made here.

``ToolPayloads`` reads conventions whose payloads may be LangChain shapes (unwrapped by ``langchain``, each
read and unwrapped once per span); any other value is taken as it is. ``attribute_payload`` reads a
payload kept in one attribute of its own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tracegrade.trajectory import langchain
from tracegrade.trajectory.tree import SpanNode

__all__ = ["Reader", "ToolPayloads", "attribute_payload", "json_attribute"]

Payload = tuple[Any, str | None]
Reader = Callable[[SpanNode], Any]


def json_attribute(node: SpanNode, key: str) -> Any:
    """Attribute ``key`` decoded as JSON text (a value that is not JSON is noted as a mapping issue)."""
    return node.parsed(key, expect_json=True)


def attribute_payload(key: str, decode: Callable[[SpanNode, str], Any] = SpanNode.parsed) -> Reader:
    """The reader of a payload kept in attribute ``key``: ``decode(node, key)``."""

    def read(node: SpanNode) -> Any:
        return decode(node, key)

    return read


class _Side:
    """The input or the output side: ``(value, call_id)`` from the first of ``keys`` a span carries."""

    __slots__ = ("keys", "memo_key", "unwrap")

    def __init__(self, memo_key: str, keys: tuple[str, ...], unwrap: Callable[[Any], Payload | None]) -> None:
        self.memo_key = memo_key
        self.keys = keys
        self.unwrap = unwrap

    def read(self, node: SpanNode) -> Payload | None:
        """The payload (None when the span carries none of the keys), decoded once per span."""
        attrs = node.attrs
        for key in self.keys:
            if attrs.get(key) is not None:
                return node.memo(self.memo_key, self._decode)
        return None

    def _decode(self, node: SpanNode) -> Payload | None:
        for key in self.keys:
            value = node.parsed(key)
            if value is not None:
                unwrapped = self.unwrap(value)
                return unwrapped if unwrapped is not None else (value, None)
        return None


class ToolPayloads:
    """Tool input and output attributes of one convention; ``memo_prefix`` names their per-span cache.

    ``args`` and ``result`` are the convention's readers of the arguments and the result.
    """

    def __init__(self, memo_prefix: str, input_keys: tuple[str, ...], output_keys: tuple[str, ...]) -> None:
        self._input = _Side(f"{memo_prefix}.tool_input", input_keys, langchain.tool_input)
        self._output = _Side(f"{memo_prefix}.tool_output", output_keys, langchain.tool_output)
        self.input_keys = input_keys
        self.output_keys = output_keys

    def args(self, node: SpanNode) -> Any:
        found = self._input.read(node)
        return found[0] if found else None

    def result(self, node: SpanNode) -> Any:
        found = self._output.read(node)
        return found[0] if found else None

    def call_id(self, node: SpanNode, *, output_first: bool = False) -> str | None:
        """The call id a LangChain payload carries (input first, unless ``output_first``)."""
        for side in (self._output, self._input) if output_first else (self._input, self._output):
            found = side.read(node)
            if found and found[1]:
                return found[1]
        return None
