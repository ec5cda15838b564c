"""The shapes of Google ADK's eval files as pydantic models, so that a wrong type or an unknown key in one is
refused at its JSON path before anything is converted (``adk_files`` converts what these models hold).

They follow ``google.adk.evaluation`` 2.x (``eval_set``, ``eval_case``, ``eval_metrics``, ``eval_rubrics`` and the
older-format migration in ``local_eval_sets_manager``) with keys in snake_case (``adk_files`` turns ADK's camelCase
aliases into snake_case first). Unlike ADK, an unknown key is refused everywhere, also where ADK's own models let
one through (criteria, cases, session inputs): there it is almost always a misspelt key whose setting would be
lost. Keys ADK writes that tracegrade has no use for are accepted and dropped: :data:`IGNORED_KEYS` lists them.
genai's own objects (a ``Part``, a ``FunctionCall``, a ``FunctionResponse``) refuse an unknown key as genai's
models do (their keys are those of google-genai 2.34, which google-adk 2.13 uses); a part is kept as written.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, field_validator, model_validator
from pydantic_core import PydanticCustomError

__all__ = [
    "CRITERION_MODELS",
    "IGNORED_KEYS",
    "AdkEvalCase",
    "AdkEvalSet",
    "AdkModel",
    "Content",
    "Criterion",
    "FunctionCall",
    "FunctionResponse",
    "IntermediateData",
    "Invocation",
    "InvocationEvent",
    "JudgeCriterion",
    "OldCase",
    "OldTurn",
    "Part",
    "RubricCriterion",
    "SessionInput",
    "TrajectoryCriterion",
]

# ADK keys that tracegrade accepts and does not use, by the model that holds them (a subclass inherits its
# bases'): timings, app details and ADK's per-invocation rubrics describe a recorded run, not what to expect of one
IGNORED_KEYS: dict[str, frozenset[str]] = {
    "Invocation": frozenset(
        {"creation_timestamp", "duration", "model_duration", "tool_duration", "rubrics", "app_details"}
    ),
    "Criterion": frozenset({"include_intermediate_responses_in_final"}),
    "HallucinationCriterion": frozenset({"evaluate_intermediate_nl_responses"}),
    "JudgeModelOptions": frozenset({"judge_model_config", "parallelism_limit"}),
    "AdkRubric": frozenset({"description", "type"}),
    "OldToolUse": frozenset({"mock_tool_output"}),
}


class AdkModel(BaseModel):
    """An object of an ADK file: unknown keys refused, the :data:`IGNORED_KEYS` of its class dropped."""

    model_config = ConfigDict(extra="forbid")

    @classmethod
    def ignored_keys(cls) -> frozenset[str]:
        return frozenset().union(*(IGNORED_KEYS.get(c.__name__, frozenset()) for c in cls.__mro__))

    @classmethod
    def accepted_keys(cls) -> list[str]:
        """Every key this object may have, for the "did you mean" of an unknown one."""
        return [*cls.model_fields, *sorted(cls.ignored_keys())]

    @model_validator(mode="before")
    @classmethod
    def _drop_ignored(cls, data: Any) -> Any:
        ignored = cls.ignored_keys()
        if isinstance(data, dict) and ignored:
            return {k: v for k, v in data.items() if k not in ignored}
        return data


class _GenaiObject(BaseModel):
    """One of genai's objects: an unknown key is refused, as genai does; the fields tracegrade reads are typed."""

    model_config = ConfigDict(extra="forbid")


class FunctionCall(_GenaiObject):
    name: str
    args: dict[str, Any] | None = None
    id: str | None = None
    partial_args: Any = None
    will_continue: Any = None


class FunctionResponse(_GenaiObject):
    name: str | None = None
    response: dict[str, Any] | None = None
    id: str | None = None
    parts: Any = None
    scheduling: Any = None
    will_continue: Any = None


class Part(_GenaiObject):
    """genai ``Part``: ``{"text": ...}``, ``{"function_call": ...}``, ``{"inline_data": ...}``..."""

    text: str | None = None
    function_call: FunctionCall | None = None
    function_response: FunctionResponse | None = None
    audio_transcription: Any = None
    code_execution_result: Any = None
    executable_code: Any = None
    file_data: Any = None
    inline_data: Any = None
    media_processing: Any = None
    media_resolution: Any = None
    part_metadata: Any = None
    speech_metadata: Any = None
    thought: Any = None
    thought_signature: Any = None
    tool_call: Any = None
    tool_response: Any = None
    video_metadata: Any = None

    def as_written(self) -> dict[str, Any]:
        """The part with the keys its file gave (nulls included), for writing it back."""
        return self.model_dump(mode="json", exclude_unset=True)


class Content(AdkModel):
    """genai ``Content``: ``{"role": ..., "parts": [{"text": ...}, {"function_call": ...}, ...]}``."""

    role: str | None = None
    parts: list[Part] = []


class InvocationEvent(BaseModel):
    """ADK ignores other keys here (an ``Event`` dumped whole), and so does tracegrade."""

    model_config = ConfigDict(extra="ignore")

    author: str = ""
    content: Content | None = None


class IntermediateData(AdkModel):
    """ADK's ``IntermediateData`` or its ``InvocationEvents`` form (one or the other, never both)."""

    tool_uses: list[FunctionCall] = []
    tool_responses: list[FunctionResponse] = []
    intermediate_responses: list[tuple[str, list[Part]]] = []
    invocation_events: list[InvocationEvent] = []

    @model_validator(mode="after")
    def _one_form(self) -> IntermediateData:
        if "invocation_events" in self.model_fields_set and len(self.model_fields_set) > 1:
            raise ValueError(
                "give either invocation_events or tool_uses / tool_responses / intermediate_responses, not both"
            )
        return self


class Invocation(AdkModel):
    invocation_id: str = ""
    user_content: Content
    final_response: Content | None = None
    intermediate_data: IntermediateData | None = None


class SessionInput(AdkModel):
    app_name: str | None = None
    user_id: str | None = None
    session_id: str | None = None
    state: dict[str, Any] = {}


class AdkEvalCase(AdkModel):
    # the last three keys are kept under metadata["adk"], so that writing the set back gives ADK the same file
    KEPT: ClassVar[tuple[str, ...]] = ("creation_timestamp", "rubrics", "final_session_state")

    eval_id: str
    conversation: list[Invocation] = []
    conversation_scenario: Any = None
    session_input: SessionInput | None = None
    creation_timestamp: float | None = None
    rubrics: list[Any] | None = None
    final_session_state: dict[str, Any] | None = None

    @field_validator("conversation_scenario")
    @classmethod
    def _no_scenario(cls, value: Any) -> Any:
        if value is not None:
            raise PydanticCustomError(
                "not_read",
                "ADK conversation scenarios (user simulation) are not read by tracegrade; give the case a "
                '"conversation", or write it as a tracegrade simulated case (metadata.scenario)',
            )
        return value


class AdkEvalSet(AdkModel):
    eval_set_id: str | None = None
    name: str | None = None
    description: str | None = None
    eval_cases: list[AdkEvalCase]
    creation_timestamp: float | None = None  # kept under metadata["adk"], as a case's


# ---- the older format: a list of turns, or of named cases holding turns ----


class OldToolUse(AdkModel):
    tool_name: str
    tool_input: dict[str, Any] = {}


class OldResponse(AdkModel):
    author: str = ""
    text: str = ""


class OldTurn(AdkModel):
    query: str
    reference: str = ""
    expected_tool_use: list[OldToolUse] = []
    expected_intermediate_agent_responses: list[OldResponse] = []


class OldCase(AdkModel):
    name: str | None = None
    data: list[OldTurn]
    initial_session: SessionInput | None = None


# ---- test_config.json criteria, by the metrics tracegrade grades ----


class JudgeModelOptions(AdkModel):
    judge_model: str | None = None
    num_samples: int | None = None


class AdkRubricContent(AdkModel):
    text_property: str | None = None


class AdkRubric(AdkModel):
    rubric_id: str
    rubric_content: AdkRubricContent


class Criterion(AdkModel):
    threshold: float


class TrajectoryCriterion(Criterion):
    match_type: int | str = "EXACT"
    ignore_args: bool = False


class JudgeCriterion(Criterion):
    judge_model_options: JudgeModelOptions = JudgeModelOptions()


class RubricCriterion(JudgeCriterion):
    rubrics: list[AdkRubric] = []


class HallucinationCriterion(JudgeCriterion):
    pass


# the criterion object each graded ADK metric takes
CRITERION_MODELS: dict[str, type[Criterion]] = {
    "tool_trajectory_avg_score": TrajectoryCriterion,
    "response_match_score": Criterion,
    "final_response_match_v2": JudgeCriterion,
    "rubric_based_final_response_quality_v1": RubricCriterion,
    "hallucinations_v1": HallucinationCriterion,
    "safety_v1": Criterion,
}
