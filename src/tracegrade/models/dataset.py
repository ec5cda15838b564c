"""Eval-set data model: what a case expects (pure pydantic, no I/O beyond file helpers)."""

from __future__ import annotations

import hashlib
import json
import unicodedata
import uuid
from collections.abc import Iterator
from enum import Enum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_serializer, model_validator
from pydantic_core import PydanticCustomError

from tracegrade.models.expectations import xfail_problem
from tracegrade.models.json_values import arguments_satisfy, json_equal

__all__ = [
    "EvalCase",
    "EvalSet",
    "Invocation",
    "MessageContent",
    "SessionInput",
    "StepType",
    "ToolCall",
    "TrajectoryStep",
]


class _StrictModel(BaseModel):
    """Base for file-backed models: unknown keys are errors, not silently dropped."""

    model_config = ConfigDict(extra="forbid")


SCENARIO_KEY = "scenario"
"""The ``EvalCase.metadata`` key that makes a case simulated (see :meth:`EvalCase.simulated`)."""


def _new_id() -> str:
    return str(uuid.uuid4())


def _content_id(case: dict[str, Any]) -> str:
    """``case-`` and 12 hex digits of a hash of the case's JSON: the id of a case read without one."""
    text = json.dumps(case, sort_keys=True, ensure_ascii=False, default=str)
    return "case-" + hashlib.sha256(text.encode()).hexdigest()[:12]


def without_control_characters(value: str, field: str) -> str:
    """``value``, the id in ``field``, when it holds no control character; else pydantic's
    ``control_character_in_id`` error, showing the id escaped and where the character is. A case's id (or a
    scenario's, which names its case) names it in pytest, JUnit XML, terminal lines and SQL rows: XML 1.0 cannot
    hold most control characters (the reports write them as escapes: another id), and an ESC printed raw drives
    the terminal."""
    control = next((i for i, ch in enumerate(value) if unicodedata.category(ch) == "Cc"), None)
    if control is None:
        return value
    shown = repr(value)
    raise PydanticCustomError(
        "control_character_in_id",
        "{field} {id} holds the control character {char} (at index {index}): an id names the case in pytest, JUnit "
        "XML, the terminal and SQL, where a control character is refused, altered or acted on; remove it",
        {
            "field": field,
            "id": shown if len(shown) <= 80 else shown[:79] + "…",
            "char": repr(value[control]),
            "index": control,
        },
    )


class StepType(str, Enum):
    """Kind of a recorded trajectory step."""

    NODE = "node"
    TOOL = "tool"
    MESSAGE = "message"
    CONDITIONAL = "conditional"

    def __str__(self) -> str:
        return self.value


class MessageContent(_StrictModel):
    """One chat message: a role and text (or a list of content blocks)."""

    role: str
    content: str | list[dict[str, Any]]
    metadata: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def user(cls, text: str) -> MessageContent:
        return cls(role="user", content=text)

    @classmethod
    def assistant(cls, text: str) -> MessageContent:
        return cls(role="assistant", content=text)

    def get_text(self) -> str:
        """The message text; list content joins every block's ``text`` with a space."""
        if isinstance(self.content, str):
            return self.content
        return " ".join(str(b["text"]) for b in self.content if isinstance(b, dict) and "text" in b)


# Fields that only actual (recorded) calls carry; omitted from dumps while at their defaults so that
# eval-set files stay as small as the reference format.
_ACTUAL_ONLY_DEFAULTS: dict[str, Any] = {
    "args_captured": True,
    "result_captured": True,
    "error": None,
    "duration_seconds": None,
    "span_id": None,
}


class ToolCall(_StrictModel):
    """An expected or recorded tool invocation.

    Recorded calls also say whether their arguments/result were captured at all
    (``args_captured``/``result_captured``: content capture off is not the same as empty), the error
    the tool raised, how long it took and the span it came from. A call written without ``args`` reads as
    ``{}`` but remembers it (:attr:`args_given`), and is dumped without ``args``: ADK tells the two apart.
    """

    name: str
    args: dict[str, Any] = Field(default_factory=dict)
    call_id: str | None = None
    result: Any | None = None
    args_captured: bool = True
    result_captured: bool = True
    error: str | None = None
    duration_seconds: float | None = None
    span_id: str | None = None

    @model_serializer(mode="wrap")
    def _omit_actual_only_defaults(self, handler: Any) -> dict[str, Any]:
        data = handler(self)
        for key, default in _ACTUAL_ONLY_DEFAULTS.items():
            if key in data and data[key] == default:
                del data[key]
        # a report built without validation may hold a bare value where a call belongs: it comes here too
        if isinstance(self, ToolCall) and not self.args_given:
            data.pop("args", None)
        return data

    @property
    def args_given(self) -> bool:
        """Whether the call was written with ``args`` (``{}`` included), not left to the default: google-adk's
        trajectory match fails a call without arguments against one with ``args: {}``."""
        return "args" in self.model_fields_set

    def matches(self, other: ToolCall, check_args: bool = True, check_call_id: bool = False) -> bool:
        """Does this (actual) call satisfy ``other`` (the expected one)?

        Names must be equal. Arguments are compared structurally (JSON values, so ``1 == 1.0`` but
        ``"1" != 1``) only when ``check_args`` is true and the expected call lists arguments; an
        expected call with ``args={}`` accepts any arguments. Arguments that were not captured never
        match a non-empty expectation (the trajectory criterion reports why).
        """
        if self.name != other.name:
            return False
        if check_args and not arguments_satisfy(self.args if self.args_captured else None, other.args):
            return False
        return not (check_call_id and self.call_id != other.call_id)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ToolCall):
            return False
        return self.name == other.name and json_equal(self.args, other.args)

    def __hash__(self) -> int:
        return hash((self.name, json.dumps(self.args, sort_keys=True, default=str)))


class TrajectoryStep(_StrictModel):
    """One recorded step: a node visit, a tool call, a message or a routing decision."""

    step_type: StepType
    name: str
    args: dict[str, Any] = Field(default_factory=dict)
    timestamp: float | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def node(cls, name: str, timestamp: float | None = None, **extra: Any) -> TrajectoryStep:
        return cls(step_type=StepType.NODE, name=name, timestamp=timestamp, metadata=extra)

    @classmethod
    def tool(
        cls, name: str, args: dict[str, Any] | None = None, timestamp: float | None = None, **extra: Any
    ) -> TrajectoryStep:
        return cls(step_type=StepType.TOOL, name=name, args=args or {}, timestamp=timestamp, metadata=extra)

    @classmethod
    def conditional(cls, name: str, chosen: str, timestamp: float | None = None, **extra: Any) -> TrajectoryStep:
        return cls(step_type=StepType.CONDITIONAL, name=name, timestamp=timestamp, metadata={"chosen": chosen, **extra})


class Invocation(_StrictModel):
    """One conversation turn and what is expected of it."""

    invocation_id: str = Field(default_factory=_new_id)
    user_content: MessageContent
    expected_tool_trajectory: list[ToolCall] = Field(default_factory=list)
    expected_node_order: list[str] = Field(default_factory=list)
    expected_intermediate_responses: list[MessageContent] = Field(default_factory=list)
    expected_final_response: MessageContent | None = None

    @classmethod
    def simple(
        cls,
        user_query: str,
        expected_response: str | None = None,
        expected_tools: list[ToolCall] | None = None,
        expected_node_order: list[str] | None = None,
    ) -> Invocation:
        return cls(
            user_content=MessageContent.user(user_query),
            expected_final_response=MessageContent.assistant(expected_response) if expected_response else None,
            expected_tool_trajectory=list(expected_tools or []),
            expected_node_order=list(expected_node_order or []),
        )


class SessionInput(_StrictModel):
    """Per-case session settings: ``state`` seeds the agent input, ``config`` merges into the run config."""

    app_name: str = ""
    user_id: str = "test_user"
    state: dict[str, Any] = Field(default_factory=dict)
    config: dict[str, Any] = Field(default_factory=dict)


class EvalCase(_StrictModel):
    """One labelled test case: a conversation of one or more turns plus free-form metadata.

    ``metadata`` keys read by tracegrade: ``context`` and ``reference_facts`` (LLM criteria),
    ``selector`` (offline trace matching: ``{"conversation_id": …}`` or ``{"where": "<SQL>"}``), ``scenario``
    (a simulated user drives the conversation, see :meth:`simulated`).
    """

    eval_id: str = Field(default_factory=_new_id)
    name: str = ""
    description: str = ""
    conversation: list[Invocation] = Field(default_factory=list)
    session_input: SessionInput = Field(default_factory=SessionInput)
    tags: list[str] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("eval_id")
    @classmethod
    def _named(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("eval_id is blank: give the case an id (it names the case's test and result)")
        return without_control_characters(value, "eval_id")

    @field_validator("metadata")
    @classmethod
    def _expectation_checked(cls, value: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        problem = xfail_problem(value)
        if problem is not None:  # the case named: the JSON path gives only its position in the file
            raise ValueError(f"case {info.data.get('eval_id', '?')!r}: {problem}")
        return value

    @classmethod
    def single_turn(
        cls,
        eval_id: str,
        user_query: str,
        expected_response: str | None = None,
        expected_tools: list[ToolCall] | None = None,
        expected_node_order: list[str] | None = None,
        name: str = "",
        description: str = "",
    ) -> EvalCase:
        return cls(
            eval_id=eval_id,
            name=name,
            description=description,
            conversation=[Invocation.simple(user_query, expected_response, expected_tools, expected_node_order)],
        )

    @classmethod
    def multi_turn(
        cls,
        eval_id: str,
        conversation: list[tuple[str, str]],
        expected_tools: list[ToolCall] | None = None,
        name: str = "",
        description: str = "",
    ) -> EvalCase:
        turns = [
            Invocation.simple(query, expected, expected_tools if i == 0 else None)
            for i, (query, expected) in enumerate(conversation)
        ]
        return cls(eval_id=eval_id, name=name, description=description, conversation=turns)

    @classmethod
    def simulated(
        cls,
        eval_id: str,
        scenario: BaseModel | dict[str, Any],
        expected_tools: list[ToolCall] | None = None,
        expected_response: str | None = None,
        name: str = "",
        description: str = "",
    ) -> EvalCase:
        """A case whose user is simulated: ``metadata["scenario"]`` holds the scenario (a
        ``ConversationScenario`` or its dict). What the whole conversation is expected to do (tools called
        over all turns, the final response) sits on one invocation opening with the scenario's starting prompt.
        """
        if isinstance(scenario, BaseModel):
            data = scenario.model_dump(mode="json", exclude_defaults=True)
        else:
            data = dict(scenario)
        opening = str(data.get("starting_prompt") or data.get("description") or "")
        expects = expected_tools or expected_response
        conversation = [Invocation.simple(opening, expected_response, expected_tools)] if expects else []
        return cls(
            eval_id=eval_id,
            name=name,
            description=description,
            conversation=conversation,
            metadata={SCENARIO_KEY: data},
        )

    # Helpers the criteria share.
    def expected_tools(self) -> list[ToolCall]:
        """Expected tool calls concatenated over every turn."""
        return [tc for inv in self.conversation for tc in inv.expected_tool_trajectory]

    def expected_node_order(self) -> list[str]:
        """Expected node order concatenated over every turn."""
        return [n for inv in self.conversation for n in inv.expected_node_order]

    def last_expected_response(self) -> str:
        """Text of the last turn whose expected final response is non-empty, else ``""``."""
        for inv in reversed(self.conversation):
            if inv.expected_final_response is not None and (text := inv.expected_final_response.get_text()):
                return text
        return ""

    @property
    def is_simulated(self) -> bool:
        """True when a simulated user drives the case (``metadata["scenario"]``)."""
        return SCENARIO_KEY in self.metadata

    def first_user_text(self) -> str:
        return self.conversation[0].user_content.get_text() if self.conversation else ""


class EvalSet(_StrictModel):
    """A collection of eval cases, stored as one JSON object."""

    eval_set_id: str = Field(default_factory=_new_id)
    name: str = ""
    description: str = ""
    eval_cases: list[EvalCase] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _content_ids(cls, data: Any) -> Any:
        """A case read without an ``eval_id`` (from a file, or any JSON) gets one derived from its content, the
        same at every load: a random one would make each run's result of it a new case, which ``diff`` and
        ``gate`` cannot pair with the last run's. (A case built in Python keeps the random default.)"""
        cases = data.get("eval_cases") if isinstance(data, dict) else None
        if not isinstance(cases, list) or all(not isinstance(c, dict) or "eval_id" in c for c in cases):
            return data
        named = [
            {**case, "eval_id": _content_id(case)} if isinstance(case, dict) and "eval_id" not in case else case
            for case in cases
        ]
        return {**data, "eval_cases": named}

    def __len__(self) -> int:
        return len(self.eval_cases)

    def __iter__(self) -> Iterator[EvalCase]:  # type: ignore[override]
        return iter(self.eval_cases)

    def add_case(self, case: EvalCase) -> None:
        self.eval_cases.append(case)

    def get_case(self, eval_id: str) -> EvalCase | None:
        return next((c for c in self.eval_cases if c.eval_id == eval_id), None)

    def filter_by_tags(self, tags: list[str]) -> list[EvalCase]:
        """Cases that carry every one of ``tags`` (all cases for an empty list)."""
        wanted = set(tags)
        return [c for c in self.eval_cases if wanted.issubset(c.tags)]

    @classmethod
    def from_file(cls, path: str | Path) -> EvalSet:
        """Load and validate (ADK's ``*.evalset.json`` and ``*.test.json`` too); raises
        :class:`~tracegrade.errors.EvalSetError` naming every problem."""
        from tracegrade.models.adk_files import load_eval_set

        return load_eval_set(path)

    def to_file(self, path: str | Path) -> None:
        """Write the set to ``path`` as JSON, atomically. Two cases of one id, which :meth:`from_file` would refuse,
        raise the :class:`~tracegrade.errors.EvalSetError` it raises (naming ``path``), and nothing is written."""
        from tracegrade.models.files import refuse_duplicate_ids, save_model

        refuse_duplicate_ids([case.eval_id for case in self.eval_cases], path)
        save_model(self, path)

    save = to_file
