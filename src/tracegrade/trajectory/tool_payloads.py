"""A convention's tool-span payloads (arguments, result, call id), each read and unwrapped once per span.

Payloads may be LangChain shapes (unwrapped by ``langchain``); any other value is taken as it is.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tracegrade.trajectory import langchain
from tracegrade.trajectory.tree import SpanNode

__all__ = ["ToolPayloads"]

Payload = tuple[Any, str | None]


def _reader(keys: tuple[str, ...], unwrap: Callable[[Any], Payload | None]) -> Callable[[SpanNode], Payload | None]:
    """Reads ``(value, call_id)`` from the first of ``keys`` present on a span (None when none is)."""

    def read(node: SpanNode) -> Payload | None:
        for key in keys:
            value = node.parsed(key)
            if value is not None:
                unwrapped = unwrap(value)
                return unwrapped if unwrapped is not None else (value, None)
        return None

    return read


class ToolPayloads:
    """Tool input and output attributes of one convention; ``memo_prefix`` names their per-span cache."""

    def __init__(self, memo_prefix: str, input_keys: tuple[str, ...], output_keys: tuple[str, ...]) -> None:
        self._input = (f"{memo_prefix}.tool_input", _reader(input_keys, langchain.tool_input))
        self._output = (f"{memo_prefix}.tool_output", _reader(output_keys, langchain.tool_output))

    def args(self, node: SpanNode) -> Any:
        found = node.memo(*self._input)
        return found[0] if found else None

    def result(self, node: SpanNode) -> Any:
        found = node.memo(*self._output)
        return found[0] if found else None

    def call_id(self, node: SpanNode, *, output_first: bool = False) -> str | None:
        """The call id a LangChain payload carries (input first, unless ``output_first``)."""
        for key, read in (self._output, self._input) if output_first else (self._input, self._output):
            found = node.memo(key, read)
            if found and found[1]:
                return found[1]
        return None
