"""Types of the C twin of tracegrade.criteria.call_compare (``_call_compare.c``)."""

from collections.abc import Sequence
from typing import Any

from tracegrade.models.dataset import ToolCall

def arguments_satisfy(actual: dict[str, Any] | None, expected: dict[str, Any] | None) -> bool: ...
def calls_satisfy_in_place(actual_calls: Sequence[ToolCall], expected_calls: Sequence[ToolCall]) -> bool: ...
def json_equal(a: Any, b: Any) -> bool: ...
def satisfying_positions(
    expected_names: Sequence[str],
    actual_names: Sequence[str],
    expected_args: Sequence[dict[str, Any] | None],
    actual_args: Sequence[dict[str, Any] | None],
) -> list[list[int]]: ...
