"""``EvalSetBuilder``: a fluent way to put an eval set together in code.

>>> eval_set = (
...     EvalSetBuilder("weather")
...     .add_case("Weather in Paris?", "Sunny.", expected_tools=["get_weather"])
...     .add_tool_test("Convert 3 km", "convert", {"value": 3, "unit": "km"})
...     .build()
... )
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from tracegrade.errors import InvalidValueError
from tracegrade.models.dataset import EvalCase, EvalSet, ToolCall

__all__ = ["EvalSetBuilder"]

ToolSpec = ToolCall | str


class EvalSetBuilder:
    """Collects cases, then ``build()`` returns an :class:`EvalSet` (or ``save(path)`` writes it too).

    Cases get ids ``case_1``, ``case_2``… unless given one; a duplicate id is refused at once.
    Expected tools may be ``ToolCall`` objects or plain tool names (any arguments accepted).
    """

    def __init__(self, name: str = "eval_set") -> None:
        self.name = name
        self.eval_set_id = str(uuid.uuid4())
        self.cases: list[EvalCase] = []

    def _append(self, case: EvalCase) -> EvalSetBuilder:
        if any(c.eval_id == case.eval_id for c in self.cases):
            raise InvalidValueError(f"duplicate case id {case.eval_id!r}: every case in an eval set needs its own id")
        self.cases.append(case)
        return self

    def _next_id(self) -> str:
        return f"case_{len(self.cases) + 1}"

    def add_case(
        self,
        query: str,
        expected: str | None,
        case_id: str | None = None,
        expected_tools: Iterable[ToolSpec] | None = None,
        expected_node_order: list[str] | None = None,
        name: str = "",
        description: str = "",
    ) -> EvalSetBuilder:
        """Add a single-turn case."""
        return self._append(
            EvalCase.single_turn(
                case_id or self._next_id(),
                query,
                expected_response=expected,
                expected_tools=self._normalise_tools(expected_tools) or None,
                expected_node_order=expected_node_order or None,
                name=name,
                description=description,
            )
        )

    def add_multi_turn(
        self,
        conversation: list[tuple[str, str]],
        case_id: str | None = None,
        expected_tools: Iterable[ToolSpec] | None = None,
        name: str = "",
        description: str = "",
    ) -> EvalSetBuilder:
        """Add a multi-turn case: ``(user_query, expected_response)`` per turn; tools expected in turn 1."""
        return self._append(
            EvalCase.multi_turn(
                case_id or self._next_id(),
                conversation,
                expected_tools=self._normalise_tools(expected_tools) or None,
                name=name,
                description=description,
            )
        )

    def add_tool_test(
        self,
        query: str,
        tool_name: str,
        tool_args: dict[str, Any] | None = None,
        expected_response: str | None = None,
        case_id: str | None = None,
    ) -> EvalSetBuilder:
        """Add a case expecting one call of ``tool_name`` (with ``tool_args``, or any arguments)."""
        return self.add_case(
            query,
            expected_response if expected_response is not None else f"Result from {tool_name}",
            case_id=case_id,
            expected_tools=[ToolCall(name=tool_name, args=tool_args or {})],
        )

    def build(self) -> EvalSet:
        """The eval set so far (a copy: adding more cases later does not change it)."""
        return EvalSet(
            eval_set_id=self.eval_set_id,
            name=self.name,
            eval_cases=[c.model_copy(deep=True) for c in self.cases],
        )

    def save(self, path: str | Path) -> EvalSet:
        """Build, write to ``path`` as JSON, and return the set."""
        eval_set = self.build()
        eval_set.to_file(path)
        return eval_set

    @staticmethod
    def _normalise_tools(tools: Iterable[ToolSpec] | None) -> list[ToolCall]:
        if not tools:
            return []
        normalised = []
        for tool in tools:
            if isinstance(tool, str):
                normalised.append(ToolCall(name=tool))
            elif isinstance(tool, ToolCall):
                normalised.append(tool)
            else:
                raise TypeError(f"expected tools must be ToolCall objects or tool names, got {type(tool).__name__}")
        return normalised

    @classmethod
    def from_conversations(
        cls, conversations: Iterable[Mapping[str, str]], name: str = "conversation_tests"
    ) -> EvalSet:
        """One single-turn case per ``{"user": …, "assistant": …}`` mapping, with ids ``conv_1``…"""
        builder = cls(name)
        for i, turn in enumerate(conversations, start=1):
            builder.add_case(turn.get("user", ""), turn.get("assistant", ""), case_id=f"conv_{i}")
        return builder.build()

    @classmethod
    def from_file(cls, path: str | Path) -> EvalSetBuilder:
        """A builder holding an existing eval-set file's id, name and cases, ready for more."""
        existing = EvalSet.from_file(path)
        builder = cls(existing.name or "eval_set")
        builder.eval_set_id = existing.eval_set_id
        builder.cases = list(existing.eval_cases)
        return builder

    @classmethod
    def quick(cls, *pairs: tuple[str, str]) -> EvalSet:
        """An eval set named ``quick_tests`` from ``(query, expected_response)`` pairs, ids ``test_1``…"""
        builder = cls("quick_tests")
        for i, (query, expected) in enumerate(pairs, start=1):
            builder.add_case(query, expected, case_id=f"test_{i}")
        return builder.build()
