"""Types of the C twin of tracegrade.criteria.call_compare (``_call_compare.c``)."""

from collections.abc import Sequence
from typing import Any

from tracegrade.models.dataset import ToolCall

def arguments_satisfy(actual: dict[str, Any] | None, expected: dict[str, Any]) -> bool: ...
def calls_satisfy_in_place(actual_calls: Sequence[ToolCall], expected_calls: Sequence[ToolCall]) -> bool: ...
