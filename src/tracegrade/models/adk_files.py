"""Google ADK's eval files, read and written directly: ``*.evalset.json``, the older ``*.test.json`` lists and
``test_config.json``.

Formats (from ``google.adk.evaluation``): an **EvalSet** holds ``eval_cases``; a case has ``eval_id``, a
``conversation`` of invocations and an optional ``session_input`` (``app_name``, ``user_id``, ``state``). An
invocation has ``user_content`` and ``final_response`` as genai ``Content`` (``role`` plus ``parts``, each part
``{"text": ...}``, ``{"function_call": ...}``...) and ``intermediate_data``: either ``tool_uses`` /
``tool_responses`` / ``intermediate_responses`` (``[author, parts]`` pairs) or ``invocation_events``
(``author`` plus ``content``). ADK's models accept camelCase aliases as well. The **older format** is a JSON list
of turns ``{query, expected_tool_use: [{tool_name, tool_input}], reference}`` (one case, named by the file), or a
list of cases ``{name, data: [turns], initial_session}``. A **config** maps metric names to a threshold or a
criterion object (``threshold``, ``match_type``, ``ignore_args``, ``judge_model_options``, ``rubrics``).

Reading maps these onto tracegrade's models; ADK fields tracegrade has no place for are kept under
``metadata["adk"]`` so that writing the set back gives ADK the same file. Writing keeps what ADK's case has no
field for (a case's name, description, tags, metadata and session config, each turn's expected node order) under
the case's ``tracegrade`` key, which ADK's EvalCase keeps as it is; anything else ADK's format cannot hold (an eval
set's metadata, a message's metadata, a tool result without a call id...) is listed by :func:`eval_set_losses`.
A case's ``session_input`` is written only when the ADK file gave one or it differs from tracegrade's default:
ADK runs a case without one under its own app and user names.

ADK metrics become slots with ``scoring="adk"`` where tracegrade computes ADK's numbers
(``tool_trajectory_avg_score`` -> ``trajectory``, ``response_match_score`` -> ``rouge_match``); the judge metrics
map to tracegrade's judges.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError

from tracegrade.errors import ConfigError, EvalSetError, did_you_mean
from tracegrade.models.adk_schema import (
    CRITERION_MODELS,
    AdkEvalCase,
    AdkEvalSet,
    Content,
    FunctionCall,
    FunctionResponse,
    IntermediateData,
    JudgeCriterion,
    OldCase,
    OldTurn,
    Part,
    RubricCriterion,
    TrajectoryCriterion,
)
from tracegrade.models.adk_schema import Invocation as AdkInvocation
from tracegrade.models.adk_schema import SessionInput as AdkSessionInput
from tracegrade.models.config import CRITERIA_SLOTS, CriterionConfig, EvalConfig, MatchType, Rubric
from tracegrade.models.dataset import EvalCase, EvalSet, Invocation, MessageContent, SessionInput, ToolCall
from tracegrade.models.files import (
    duplicate_id_problems,
    model_from_data,
    read_model_file,
    refuse_duplicate_ids,
    validation_problems,
)

__all__ = [
    "ADK_METRIC_SLOTS",
    "adk_document",
    "config_from_adk",
    "config_losses",
    "config_to_adk",
    "eval_set_from_adk",
    "eval_set_losses",
    "eval_set_to_adk",
    "is_adk_config",
    "is_adk_eval_set",
    "load_eval_config",
    "load_eval_set",
]

Problem = tuple[str, str]

# ADK metric -> the tracegrade slot that grades it
ADK_METRIC_SLOTS = {
    "tool_trajectory_avg_score": "trajectory",
    "response_match_score": "rouge_match",
    "final_response_match_v2": "llm_judge",
    "rubric_based_final_response_quality_v1": "rubric_based",
    "hallucinations_v1": "hallucination",
    "safety_v1": "safety",
}
_SLOT_METRICS = {slot: metric for metric, slot in ADK_METRIC_SLOTS.items()}
_ADK_SCORED = frozenset({"trajectory", "rouge_match"})  # slots where scoring="adk" reproduces ADK's numbers
# ADK's other prebuilt metrics: recognised (so the file is read as ADK's) but not graded by tracegrade
_OTHER_ADK_METRICS = frozenset(
    {
        "response_evaluation_score",
        "rubric_based_tool_use_quality_v1",
        "per_turn_user_simulator_quality_v1",
        "multi_turn_task_success_v1",
        "multi_turn_trajectory_quality_v1",
        "multi_turn_tool_use_quality_v1",
        "rubric_based_multi_turn_trajectory_quality_v1",
        "tool_call_count_v1",
        "inference_call_count_v1",
        "token_usage_v1",
        "invocation_duration_v1",
    }
)
_ADK_MATCH_TYPES = ("EXACT", "IN_ORDER", "ANY_ORDER")  # ADK's enum values 0, 1, 2
_DEFAULT_JUDGE = "gemini-2.5-flash"  # ADK's JudgeModelOptions default
_DEFAULT_SAMPLES = 5  # ADK's JudgeModelOptions default, where its judge samples (not tracegrade's 3)
# the keys besides "criteria" ADK's EvalConfig writes (null when unset); tracegrade honours none of them
_OTHER_CONFIG_KEYS = ("custom_metrics", "user_simulator_config", "live_model_config")
# what ADK does in place of a tracegrade setting config_to_adk drops, for the message naming the loss
_CONFIG_LOSS_HINTS = {
    "tool_args": "; ADK compares a call's arguments whole (ignore_args: false) or not at all",
    "num_runs": "; ADK takes the number of runs as AgentEvaluator.evaluate's num_runs",
    "timeout": "; ADK's evaluation has no time limit per case",
}
_CARRIED = "tracegrade"  # an ADK case's key holding what ADK's EvalCase has no field for (see _CaseExtras)
# ``metadata["adk"]`` marks of a case read from ADK's file with expected calls written without args, or with args {}:
# they are ADK's calls (made without arguments; made with none), written back as they were. Any other such call means
# "any arguments" to tracegrade, which ADK's format cannot say (see _any_arguments_losses)
_CALLS_WITHOUT_ARGS = "calls_without_args"
_CALLS_WITH_EMPTY_ARGS = "calls_with_empty_args"
# for each mark: how such a call is written, and what ADK matches it against
_ANY_ARGUMENTS_WRITTEN = {
    _CALLS_WITHOUT_ARGS: ("written without args", "it would match only a call made without arguments"),
    _CALLS_WITH_EMPTY_ARGS: (
        "written with args {}",
        "it reads {} as no arguments: it would match only a call made with none",
    ),
}


class _CaseExtras(BaseModel):
    """What a tracegrade case holds that ADK's has no field for, written under the ADK case's ``tracegrade`` key:
    ADK's EvalCase keeps keys it does not know, so ADK's own tools load and save them unchanged."""

    model_config = ConfigDict(extra="forbid")

    name: str = ""
    description: str = ""
    tags: list[str] = []
    metadata: dict[str, Any] = {}
    session_config: dict[str, Any] = {}
    expected_node_order: list[list[str]] = []  # one list per turn of the conversation


def _snake(key: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", key).lower()


def _json(value: Any) -> str:
    """``value`` as a short JSON text, for a message."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 60 else text[:59] + "…"


def _snaked(value: Any, where: str, problems: list[Problem]) -> Any:
    """ADK's models accept camelCase aliases: read every key in snake_case (values such as ``state``, tool
    arguments and the ``tracegrade`` key are the user's own and keep their keys). An object giving one key in
    both spellings (``eval_id`` and ``evalId``) is a problem: which one ADK reads depends on its version."""
    if isinstance(value, list):
        return [_snaked(v, f"{where}[{i}]", problems) for i, v in enumerate(value)]
    if not isinstance(value, dict):
        return value
    out: dict[str, Any] = {}
    spelt: dict[str, Any] = {}
    for key, item in value.items():
        name = _snake(key) if isinstance(key, str) else key
        if name in out:
            problems.append(
                (
                    f"{where}.{name}",
                    f"both {spelt[name]!r} ({_json(value[spelt[name]])}) and {key!r} ({_json(item)}) are given: "
                    "they are one key in two spellings; keep one",
                )
            )
            continue
        spelt[name] = key
        verbatim = name in ("state", "args", "response", "final_session_state", _CARRIED)
        out[name] = item if verbatim else _snaked(item, f"{where}.{name}", problems)
    return out


# ---- telling the formats apart ----


def _has_parts(content: Any) -> bool:
    return isinstance(content, dict) and "parts" in content


def _turns(case: Any) -> list[Any]:
    turns = case.get("conversation") if isinstance(case, dict) else None
    return turns if isinstance(turns, list) else []  # a wrong type is the reader's to report


def _is_adk_case(case: dict[str, Any]) -> bool:
    if "conversation_scenario" in case or "conversationScenario" in case:
        return True
    return any(isinstance(t, dict) and (_has_parts(t.get("user_content")) or "userContent" in t) for t in _turns(case))


def _is_tracegrade_case(case: dict[str, Any]) -> bool:
    """A case in tracegrade's own format: a message with ``content``, or an ``expected_*`` key ADK never has."""
    return any(
        isinstance(t, dict)
        and (
            (isinstance(t.get("user_content"), dict) and "content" in t["user_content"])
            or any(str(k).startswith("expected_") for k in t)
        )
        for t in _turns(case)
    )


def is_adk_eval_set(data: Any) -> bool:
    """Whether parsed JSON is one of ADK's eval-set forms (tracegrade's own has ``content``, not ``parts``)."""
    if isinstance(data, list):  # tracegrade's eval set is an object: an empty list is an ADK file with no turns
        # one turn or case of ADK's makes it ADK's file, whose other items are then checked as ADK's (a stray
        # item is reported where it is, not as "expected a JSON object" for the whole file)
        return not data or any(isinstance(d, dict) and ("query" in d or "data" in d) for d in data)
    if not isinstance(data, dict):
        return False
    if "evalSetId" in data or "evalCases" in data:
        return True
    cases = data.get("eval_cases")
    return isinstance(cases, list) and any(isinstance(c, dict) and _is_adk_case(c) for c in cases)


def _mixed_formats(data: dict[str, Any]) -> list[Problem]:
    """A problem when an ADK eval set also holds cases in tracegrade's format: read as ADK's, their content and
    expectations would be lost."""
    cases = data.get("eval_cases", data.get("evalCases"))
    cases = [c if isinstance(c, dict) else {} for c in cases] if isinstance(cases, list) else []
    ours = [f"$.eval_cases[{i}]" for i, c in enumerate(cases) if _is_tracegrade_case(c)]
    if not ours:
        return []
    adk = [f"$.eval_cases[{i}]" for i, c in enumerate(cases) if _is_adk_case(c)]
    adk += [f"$.{k}" for k in ("evalSetId", "evalCases") if k in data]
    message = (
        f"the eval set mixes Google ADK's format ({', '.join(adk)}: turns with parts, camelCase keys) and "
        f"tracegrade's ({', '.join(ours)}: messages with content, expected_* keys); write every case in one "
        "format (`tracegrade convert` rewrites a whole file in the other)"
    )
    return [("$.eval_cases", message)]


def is_adk_config(data: Any) -> bool:
    """Whether parsed JSON is an ADK config: its ``criteria`` name ADK metrics, or give bare thresholds."""
    if not isinstance(data, dict) or not isinstance(data.get("criteria"), dict):
        return False
    criteria = data["criteria"]
    return any(
        name in ADK_METRIC_SLOTS or name in _OTHER_ADK_METRICS or isinstance(value, (int, float))
        for name, value in criteria.items()
    )


def _validated(shape: Any, data: Any, source: str, error: type[EvalSetError] | type[ConfigError]) -> Any:
    """``data`` validated as ``shape`` (an ADK model, or a list of one); its problems raise ``error``."""
    try:
        return TypeAdapter(shape).validate_python(data)
    except ValidationError as exc:
        raise error(source, validation_problems(exc, shape)) from None


# ---- eval sets: ADK -> tracegrade ----


def _message(content: Content | None, role: str) -> MessageContent | None:
    """A genai ``Content`` as a MessageContent: one text part becomes plain text, several become blocks."""
    if content is None:
        return None
    blocks = [_block(p) for p in content.parts]
    adk_role = content.role or ("model" if role == "assistant" else "user")
    plain = len(blocks) == 1 and blocks[0]["type"] == "text"
    text: str | list[dict[str, Any]] = blocks[0]["text"] if plain else blocks
    if not blocks:
        text = ""
    metadata = {"adk_role": adk_role} if adk_role not in ("user", "model") else {}
    return MessageContent(role=role, content=text, metadata=metadata)


def _block(part: Part) -> dict[str, Any]:
    """One part as a content block: a text block when it is text alone; else (an image, a file, a thought or signed
    text...) an ``adk_part`` block keeping the part as written, for writing back, with its text if it has one:
    ADK's response match reads every part's text, a thought's too."""
    if part.text is not None and part.model_dump(exclude_none=True).keys() == {"text"}:
        return {"type": "text", "text": part.text}
    kept = {"type": "adk_part", "part": part.as_written()}
    return kept if part.text is None else {**kept, "text": part.text}


def _event_calls(
    data: IntermediateData,
) -> tuple[list[FunctionCall], list[FunctionResponse], list[tuple[str, list[Part]]]]:
    """Tool calls, tool responses and text replies of the ``invocation_events`` form."""
    calls: list[FunctionCall] = []
    responses: list[FunctionResponse] = []
    texts: list[tuple[str, list[Part]]] = []
    for event in data.invocation_events:
        for part in event.content.parts if event.content else []:
            if part.function_call:
                calls.append(part.function_call)
            elif part.function_response:
                responses.append(part.function_response)
            elif part.text is not None:
                texts.append((event.author, [part]))
    return calls, responses, texts


def _parsed(shape: type[Any], value: Any, where: str, problems: list[Problem]) -> list[Any]:
    """``[value]`` as a ``shape`` object, or [] with its problems noted at ``where``: for what is not validated
    with the rest of the file (a case's ``tracegrade`` key is set aside)."""
    try:
        return [shape.model_validate(value)]
    except ValidationError as exc:
        problems += [(where + path[1:], message) for path, message in validation_problems(exc, shape)]
        return []


def _tool_calls(data: IntermediateData | None) -> tuple[list[ToolCall], list[MessageContent]]:
    """Expected tool calls (results joined by call id) and intermediate responses of ``intermediate_data``."""
    if data is None:
        return [], []
    if data.invocation_events:
        calls, responses, texts = _event_calls(data)
    else:
        calls, responses, texts = data.tool_uses, data.tool_responses, data.intermediate_responses
    by_id = {r.id: r.response for r in responses if r.id}
    tools = [_tool_call(c, by_id.get(c.id) if c.id else None) for c in calls]
    intermediate = [
        MessageContent(role="assistant", content=_joined_text(parts), metadata={"author": author})
        for author, parts in texts
    ]
    return tools, intermediate


def _tool_call(call: FunctionCall, result: Any) -> ToolCall:
    """An expected call; one without args (or args: null) stays one: ADK fails it against a call with args {}."""
    if call.args is None:
        return ToolCall(name=call.name, call_id=call.id, result=result)
    return ToolCall(name=call.name, args=call.args, call_id=call.id, result=result)


def _joined_text(parts: list[Part]) -> str:
    return "\n".join(p.text for p in parts if p.text is not None)


def _invocation(turn: AdkInvocation, node_order: list[str]) -> Invocation:
    tools, intermediate = _tool_calls(turn.intermediate_data)
    user = _message(turn.user_content, "user")
    assert user is not None  # user_content is required by the shape
    fields: dict[str, Any] = {"invocation_id": turn.invocation_id} if turn.invocation_id else {}
    return Invocation(
        user_content=user,
        expected_final_response=_message(turn.final_response, "assistant"),
        expected_tool_trajectory=tools,
        expected_intermediate_responses=intermediate,
        expected_node_order=node_order,
        **fields,
    )


def _case(case: AdkEvalCase, carried: Any, where: str, problems: list[Problem]) -> EvalCase | None:
    """``case`` with what tracegrade wrote under its ``tracegrade`` key (``carried``, None when there is none);
    None, with its problems noted at ``where``, when tracegrade refuses it (a blank id, a control character in
    it)."""
    extras = next(iter(_parsed(_CaseExtras, carried or {}, f"{where}.{_CARRIED}", problems)), _CaseExtras())
    orders = extras.expected_node_order
    if len(orders) > len(case.conversation):
        problems.append(
            (
                f"{where}.{_CARRIED}.expected_node_order",
                f"holds the node orders of {len(orders)} turns but the case has {len(case.conversation)}; "
                "give one list per turn",
            )
        )
    orders = orders + [[]] * (len(case.conversation) - len(orders))
    turns = [_invocation(t, order) for t, order in zip(case.conversation, orders)]
    given = case.session_input or AdkSessionInput()
    session = SessionInput(
        app_name=given.app_name or "",
        user_id=given.user_id or "test_user",
        state=given.state,
        config=extras.session_config,
    )
    kept = {k: v for k, v in case.model_dump(include=set(case.KEPT)).items() if v not in (None, {}, [], 0, 0.0)}
    if given.session_id:
        kept["session_id"] = given.session_id
    if case.session_input is not None and _is_default_session(session):
        kept["session_input"] = True  # given with tracegrade's defaults: written back all the same
    marks = {_any_arguments_mark(call) for turn in turns for call in turn.expected_tool_trajectory}
    kept.update({mark: True for mark in _ANY_ARGUMENTS_WRITTEN if mark in marks})
    try:
        return EvalCase(
            eval_id=case.eval_id,
            name=extras.name,
            description=extras.description,
            tags=extras.tags,
            conversation=turns,
            session_input=session,
            metadata={**extras.metadata, **({"adk": kept} if kept else {})},
        )
    except ValidationError as exc:
        problems += [(where + path[1:], message) for path, message in validation_problems(exc, EvalCase)]
        return None


def _is_default_session(session: SessionInput) -> bool:
    """Whether ``session`` holds what tracegrade reads for an ADK case without a ``session_input``: writing one
    back would replace ADK's own defaults (app ``EvaluationGenerator``, user ``test_user_id``)."""
    return session.model_dump(exclude={"config"}) == SessionInput().model_dump(exclude={"config"})


def _stem(source: str) -> str:
    """``dice`` for ``dir/dice.test.json`` or ``dice.evalset.json``."""
    return Path(source).name.removesuffix(".json").removesuffix(".test").removesuffix(".evalset")


def _old_format_cases(data: list[Any], source: str) -> list[dict[str, Any]]:
    """The older list formats (turns, or named cases of turns: the first item says which) as EvalSet cases,
    the same conversion ADK's migration performs; problems are reported at their paths in the list."""
    if not data:
        message = (
            'the file is an empty list: it holds no turns ({"query": ..., "expected_tool_use": [...], '
            '"reference": ...}) or cases ({"name": ..., "data": [turns]}); add at least one'
        )
        raise EvalSetError(source, [("$", message)])
    if isinstance(data[0], dict) and "data" in data[0]:
        old_cases: list[OldCase] = _validated(list[OldCase], data, source, EvalSetError)
        # ADK's migration reads an empty initial_session as none: the case runs under ADK's own app and user names
        sessions = [
            c.initial_session if c.initial_session and c.initial_session.model_fields_set else None for c in old_cases
        ]
        named = [(c.name or f"case_{i}", c.data, sessions[i]) for i, c in enumerate(old_cases)]
    else:
        named = [(_stem(source), _validated(list[OldTurn], data, source, EvalSetError), None)]
    cases = []
    for name, turns, session in named:
        conversation = [
            {
                "user_content": {"role": "user", "parts": [{"text": turn.query}]},
                "final_response": {"role": "model", "parts": [{"text": turn.reference}]},
                "intermediate_data": {
                    "tool_uses": [{"name": u.tool_name, "args": u.tool_input} for u in turn.expected_tool_use],
                    "intermediate_responses": [
                        [r.author, [{"text": r.text}]] for r in turn.expected_intermediate_agent_responses
                    ],
                },
            }
            for turn in turns
        ]
        cases.append(
            {
                "eval_id": name,
                "conversation": conversation,
                "session_input": session.model_dump(exclude_none=True) if session else None,
            }
        )
    return cases


def eval_set_from_adk(data: Any, source: str = "<ADK eval set>") -> EvalSet:
    """An ADK eval set (any of its forms, parsed JSON) as a tracegrade EvalSet; every problem is reported at
    once as an :class:`~tracegrade.errors.EvalSetError` with paths in the ADK file."""
    older = isinstance(data, list)  # ADK's older list, whose cases are named by their "name"
    if older:
        data = {"eval_set_id": _stem(source), "eval_cases": _old_format_cases(data, source)}
    problems = _mixed_formats(data) if isinstance(data, dict) else []
    snaked = _snaked(data, "$", problems)
    if problems:
        raise EvalSetError(source, problems)
    raw_cases = snaked.get("eval_cases") if isinstance(snaked, dict) else None
    carried = [
        c.pop(_CARRIED, None) if isinstance(c, dict) else None
        for c in (raw_cases if isinstance(raw_cases, list) else [])
    ]
    parsed: AdkEvalSet = _validated(AdkEvalSet, snaked, source, EvalSetError)
    built_cases = [_case(c, carried[i], f"$.eval_cases[{i}]", problems) for i, c in enumerate(parsed.eval_cases)]
    cases = [c for c in built_cases if c is not None]
    ids = [c.eval_id for c in parsed.eval_cases]
    repeats = duplicate_id_problems(ids, "$", "name") if older else duplicate_id_problems(ids)
    problems += [problem for found in repeats.values() for problem in found]
    kept = {"creation_timestamp": parsed.creation_timestamp} if parsed.creation_timestamp else {}
    try:
        built = EvalSet(
            eval_set_id=parsed.eval_set_id or _stem(source),
            name=parsed.name or "",
            description=parsed.description or "",
            eval_cases=cases,
            metadata={"adk": kept} if kept else {},
        )
    except ValidationError as exc:
        problems += validation_problems(exc)
    if problems:
        raise EvalSetError(source, problems)
    return built


# ---- eval sets: tracegrade -> ADK ----


def _content(message: MessageContent | None, default_role: str) -> dict[str, Any] | None:
    if message is None:
        return None
    role = message.metadata.get("adk_role") or default_role
    if isinstance(message.content, str):
        return {"role": role, "parts": [{"text": message.content}]}
    parts = [b["part"] if b.get("type") == "adk_part" else {"text": str(b.get("text", ""))} for b in message.content]
    return {"role": role, "parts": parts}


def _adk_invocation(turn: Invocation) -> dict[str, Any]:
    tool_uses = []
    tool_responses = []
    for call in turn.expected_tool_trajectory:
        args = {"args": call.args} if call.args_given else {}
        tool_uses.append({"name": call.name, **args, **({"id": call.call_id} if call.call_id else {})})
        if call.result is not None and call.call_id:
            tool_responses.append({"id": call.call_id, "name": call.name, "response": call.result})
    out: dict[str, Any] = {
        "invocation_id": turn.invocation_id,
        "user_content": _content(turn.user_content, "user"),
        "intermediate_data": {
            "tool_uses": tool_uses,
            "tool_responses": tool_responses,
            "intermediate_responses": [
                [str(m.metadata.get("author", "")), [{"text": m.get_text()}]]
                for m in turn.expected_intermediate_responses
            ],
        },
    }
    final = _content(turn.expected_final_response, "model")
    if final is not None:
        out["final_response"] = final
    return out


def _case_extras(case: EvalCase) -> dict[str, Any]:
    """What ``case`` holds that ADK's case has no field for (see :class:`_CaseExtras`), without defaults."""
    orders = [t.expected_node_order for t in case.conversation]
    return _CaseExtras(
        name=case.name,
        description=case.description,
        tags=case.tags,
        metadata={k: v for k, v in case.metadata.items() if k != "adk"},  # "adk" is written as ADK's own keys
        session_config=case.session_input.config,
        expected_node_order=orders if any(orders) else [],
    ).model_dump(exclude_defaults=True)


def eval_set_to_adk(eval_set: EvalSet, *, lossy: bool = False, source: str = "<EvalSet>") -> dict[str, Any]:
    """``eval_set`` as an ADK ``EvalSet`` document (snake_case keys, as ADK writes them). What ADK's format
    cannot hold (:func:`eval_set_losses`) raises an :class:`~tracegrade.errors.EvalSetError` naming ``source``
    unless ``lossy`` (then it is left out)."""
    cases = []
    for case in eval_set.eval_cases:
        extra = dict(case.metadata.get("adk") or {})
        for mark in _ANY_ARGUMENTS_WRITTEN:
            extra.pop(mark, None)
        session_id = extra.pop("session_id", None)
        # written when the ADK file gave one (see _case) or it is set: ADK's own defaults stay otherwise
        write_session = extra.pop("session_input", False) or session_id or not _is_default_session(case.session_input)
        session = case.session_input.model_dump(include={"app_name", "user_id", "state"})
        if session_id:
            session["session_id"] = session_id
        carried = _case_extras(case)
        cases.append(
            {
                "eval_id": case.eval_id,
                "conversation": [_adk_invocation(t) for t in case.conversation],
                **({"session_input": session} if write_session else {}),
                **extra,
                **({_CARRIED: carried} if carried else {}),
            }
        )
    out: dict[str, Any] = {"eval_set_id": eval_set.eval_set_id, "eval_cases": cases}
    if eval_set.name:
        out["name"] = eval_set.name
    if eval_set.description:
        out["description"] = eval_set.description
    out.update(eval_set.metadata.get("adk") or {})
    if not lossy:
        _refuse_losses(EvalSetError, source, eval_set_losses(eval_set, out))
    return out


def _refuse_losses(error: type[EvalSetError] | type[ConfigError], source: str, losses: list[Problem]) -> None:
    """Raise ``error`` listing ``losses`` (what writing for ADK would leave out), when there are any."""
    if losses:
        raise error(source, [(where, f"{what} (use --lossy to drop it)") for where, what in losses])


def _lost(original: Any, back: Any, where: str, out: list[tuple[str, Any]]) -> None:
    """Adds to ``out`` each ``(path, value)`` that ``original`` holds and ``back`` (its round trip) does not."""
    if original is None or original == back or original == [{"type": "text", "text": back}]:
        return  # (one text block reads back as plain text: the same message)
    if isinstance(original, dict) and isinstance(back, dict):
        for key, value in original.items():
            _lost(value, back.get(key), f"{where}.{key}", out)
    elif isinstance(original, list) and isinstance(back, list):
        for i, value in enumerate(original):
            _lost(value, back[i] if i < len(back) else None, f"{where}[{i}]", out)
    else:
        out.append((where, original))


def eval_set_losses(eval_set: EvalSet, document: dict[str, Any]) -> list[Problem]:
    """What of ``eval_set`` its ADK ``document`` (:func:`eval_set_to_adk`) does not hold: ``(path in the
    tracegrade eval set, what is lost)``, found by reading the document back."""
    lost: list[tuple[str, Any]] = []
    back = eval_set_from_adk(document, "<written for ADK>")
    ours = eval_set.model_dump(mode="json")
    for case in ours["eval_cases"]:  # the marks of ADK's calls are not written: the calls themselves say it
        kept = case["metadata"].get("adk")
        if not isinstance(kept, dict):
            continue
        marked = [kept.pop(mark) for mark in _ANY_ARGUMENTS_WRITTEN if mark in kept]
        if marked and not kept:
            del case["metadata"]["adk"]
    _lost(ours, back.model_dump(mode="json"), "$", lost)
    problems = []
    for where, value in lost:
        found = re.match(r"\$\.eval_cases\[(\d+)\](?:\.conversation\[(\d+)\])?\.(.+)", where)
        if found is None:
            place, field = "the eval set", where.removeprefix("$.")
        else:
            case, turn, field = found.groups()
            place = f"case {eval_set.eval_cases[int(case)].eval_id!r}" + (f", turn {int(turn) + 1}" if turn else "")
        # ADK pairs a tool response with its call by the call's id
        hint = (
            "; give the call a call_id to keep it"
            if re.search(r"expected_tool_trajectory\[\d+\]\.result$", where)
            else ""
        )
        problems.append((where, f"{place}: {field} ({_json(value)}) has no place in ADK's eval set format{hint}"))
    return problems + _any_arguments_losses(eval_set)


def _any_arguments_mark(call: ToolCall) -> str | None:
    """The mark of an expected call that tracegrade's trajectory rules read as "any arguments": one written without
    args, or with args {} (see _CALLS_WITHOUT_ARGS); None for a call that lists arguments."""
    if call.args:
        return None
    return _CALLS_WITH_EMPTY_ARGS if call.args_given else _CALLS_WITHOUT_ARGS


def _any_arguments_losses(eval_set: EvalSet) -> list[Problem]:
    """Each expected call written without args, or with args {}, unless its case was read from ADK's file with such
    calls (its mark): tracegrade's trajectory rules read it as "any arguments", which ADK cannot say of one call (its
    trajectory match compares a call's args whole: a call without args is one made without arguments, {} one made
    with none)."""
    problems = []
    for i, case in enumerate(eval_set.eval_cases):
        kept = case.metadata.get("adk")
        marks = kept if isinstance(kept, dict) else {}
        for j, turn in enumerate(case.conversation):
            for k, call in enumerate(turn.expected_tool_trajectory):
                mark = _any_arguments_mark(call)
                if mark is None or marks.get(mark):
                    continue
                written, matched = _ANY_ARGUMENTS_WRITTEN[mark]
                problems.append(
                    (
                        f"$.eval_cases[{i}].conversation[{j}].expected_tool_trajectory[{k}]",
                        f"case {case.eval_id!r}, turn {j + 1}: call {call.name!r} is {written}, which tracegrade reads "
                        f"as any arguments; ADK has no such call ({matched}): give the call the args it expects, or "
                        "let ADK ignore every call's arguments (ignore_args in its tool_trajectory_avg_score)",
                    )
                )
    return problems


# ---- configs ----


def _match_type(value: Any, where: str, problems: list[Problem]) -> MatchType:
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < len(_ADK_MATCH_TYPES):
        return MatchType(_ADK_MATCH_TYPES[value])
    if isinstance(value, str):
        name = value.strip().upper().replace("-", "_").replace(" ", "_")
        if name in _ADK_MATCH_TYPES:
            return MatchType(name)
    problems.append((where, f"match_type must be EXACT, IN_ORDER or ANY_ORDER (or 0, 1, 2), got {value!r}"))
    return MatchType.EXACT


def _criterion(metric: str, value: Any, where: str, problems: list[Problem]) -> CriterionConfig | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = {"threshold": value}
    if not isinstance(value, dict) or "threshold" not in value:
        misspelt = (
            [f"{k!r}{hint}" for k in value if (hint := did_you_mean(k, ["threshold"]))]
            if isinstance(value, dict)
            else []
        )
        found = f"it has {misspelt[0]}" if misspelt else f"got {_json(value)}"
        problems.append(
            (where, f'ADK metric {metric!r} needs a threshold: a number or an object with "threshold"; {found}')
        )
        return None
    shape = CRITERION_MODELS[metric]
    try:
        criterion = shape.model_validate(value)
    except ValidationError as exc:
        problems += [(where + path[1:], message) for path, message in validation_problems(exc, shape)]
        return None
    slot = ADK_METRIC_SLOTS[metric]
    fields: dict[str, Any] = {"threshold": criterion.threshold}
    if slot in _ADK_SCORED:
        fields["scoring"] = "adk"
    if isinstance(criterion, TrajectoryCriterion):
        fields["check_args"] = not criterion.ignore_args
        fields["match_type"] = _match_type(criterion.match_type, f"{where}.match_type", problems)
    if isinstance(criterion, JudgeCriterion):
        judge = criterion.judge_model_options
        fields["judge_model"] = judge.judge_model or _DEFAULT_JUDGE
        if judge.num_samples is not None:
            fields["num_samples"] = judge.num_samples
        elif slot in ("llm_judge", "rubric_based"):  # ADK's hallucinations_v1 judges each sentence once
            fields["num_samples"] = _DEFAULT_SAMPLES
    if isinstance(criterion, RubricCriterion):
        fields["rubrics"] = [
            Rubric(rubric_id=r.rubric_id, content=r.rubric_content.text_property or "") for r in criterion.rubrics
        ]
    try:
        return CriterionConfig(**fields)
    except ValidationError as exc:
        problems += [(where + path[1:], message) for path, message in validation_problems(exc)]
        return None


def _slot_in_adk_config(slot: str, value: Any, adk_metrics: list[str]) -> str:
    """The problem with tracegrade slot ``slot`` in a config read as ADK's (it names ``adk_metrics``)."""
    if not adk_metrics:  # read as ADK's for its bare thresholds
        example = value if isinstance(value, (int, float)) and not isinstance(value, bool) else 1.0
        return f"tracegrade slot {slot!r} takes an object such as {_json({'threshold': example})}"
    metric = _SLOT_METRICS.get(slot)
    how = (
        f"name it by ADK's metric {metric!r}"
        if metric
        else "ADK has no metric for it: write the whole config in tracegrade's format (`tracegrade convert`)"
    )
    return (
        f"{slot!r} is a tracegrade slot name, but {', '.join(map(repr, adk_metrics))} "
        f"{'is an ADK metric' if len(adk_metrics) == 1 else 'are ADK metrics'}: a config names all its criteria "
        f"one way; {how}"
    )


def config_from_adk(data: dict[str, Any], source: str = "<ADK config>") -> EvalConfig:
    """An ADK ``test_config.json`` (parsed) as an EvalConfig; trajectory and response match score as ADK does.
    ADK's other keys are accepted when unset (null or empty, as ADK writes them), refused when set."""
    problems: list[Problem] = []
    data = _snaked(data, "$", problems)
    for key, value in data.items():
        if key in _OTHER_CONFIG_KEYS and value not in (None, {}, []):
            problems.append(
                (f"$.{key}", f"ADK's {key!r} is not read by tracegrade; remove it or set it in an EvalConfig")
            )
        elif key not in _OTHER_CONFIG_KEYS and key != "criteria":
            meant = did_you_mean(key, ["criteria", *_OTHER_CONFIG_KEYS])
            problems.append((f"$.{key}", f"unknown key {key!r}{meant or ' (an ADK config has criteria)'}"))
    criteria = data.get("criteria") or {}
    adk_metrics = [m for m in criteria if m in ADK_METRIC_SLOTS or m in _OTHER_ADK_METRICS]
    slots: dict[str, CriterionConfig] = {}
    for metric, value in criteria.items():
        where = f"$.criteria.{metric}"
        if metric in ADK_METRIC_SLOTS:
            built = _criterion(metric, value, where, problems)
            if built is not None:
                slots[ADK_METRIC_SLOTS[metric]] = built
        elif metric in CRITERIA_SLOTS:
            problems.append((where, _slot_in_adk_config(metric, value, adk_metrics)))
        elif metric in _OTHER_ADK_METRICS:
            problems.append((where, f"ADK metric {metric!r} has no tracegrade counterpart; remove it"))
        else:
            known = ", ".join(ADK_METRIC_SLOTS)
            meant = did_you_mean(metric, [*ADK_METRIC_SLOTS, *_OTHER_ADK_METRICS])
            problems.append((where, f"unknown ADK metric {metric!r}{meant}; tracegrade reads {known}"))
    if problems:
        raise ConfigError(source, problems)
    return EvalConfig(criteria=slots)  # type: ignore[arg-type]


def config_losses(config: EvalConfig) -> list[Problem]:
    """What of ``config`` ADK's config cannot hold: ``(path in the tracegrade config, what is lost)``. Beside
    the slots ADK has no metric for, every setting that differs from what the written config reads back as
    (a run setting or a slot option away from its default, such as ``num_runs`` or ``tool_args``)."""
    enabled = config.criteria.enabled_slots()
    losses = [
        (f"$.criteria.{slot}", f"ADK has no metric for tracegrade's {slot!r}")
        for slot, _ in enabled
        if slot not in _SLOT_METRICS
    ]
    if config.criteria.sql_assertions:
        losses.append(("$.criteria.sql_assertions", "ADK has no SQL assertions"))
    back = config_from_adk(config_to_adk(config, lossy=True), "<written for ADK>")
    ours, theirs = config.redacted_dump(), back.redacted_dump()  # a message never shows an API key
    # compared: the run settings and the options of each slot written as an ADK metric (its scoring is ADK's)
    ours["criteria"] = {
        slot: {k: v for k, v in ours["criteria"][slot].items() if k != "scoring"}
        for slot, _ in enabled
        if slot in _SLOT_METRICS
    }
    lost: list[tuple[str, Any]] = []
    _lost(ours, theirs, "$", lost)
    for where, value in lost:
        keys = where.split(".")  # ["$", "criteria", slot, option, ...] or ["$", setting, ...]
        slot = keys[2] if keys[1] == "criteria" else None
        place = f"ADK's {_SLOT_METRICS[slot]!r}" if slot else "ADK's test_config.json"
        hint = _CONFIG_LOSS_HINTS.get(keys[3] if slot else keys[1], "")
        losses.append((where, f"set to {_json(value)}; {place} has no setting for it{hint}"))
    return losses


def config_to_adk(config: EvalConfig, *, lossy: bool = False, source: str = "<EvalConfig>") -> dict[str, Any]:
    """``config`` as an ADK ``test_config.json`` document. What ADK's config cannot hold (:func:`config_losses`)
    raises a :class:`~tracegrade.errors.ConfigError` naming ``source`` unless ``lossy`` (then it is left out)."""
    if not lossy:
        _refuse_losses(ConfigError, source, config_losses(config))
    criteria: dict[str, Any] = {}
    for slot, cfg in config.criteria.enabled_slots():
        metric = _SLOT_METRICS.get(slot)
        if metric is None:
            continue
        if slot == "trajectory":
            criteria[metric] = {
                "threshold": cfg.threshold,
                "match_type": cfg.match_type.value,
                "ignore_args": not cfg.check_args,
            }
        elif slot in ("llm_judge", "rubric_based", "hallucination"):
            entry: dict[str, Any] = {
                "threshold": cfg.threshold,
                "judge_model_options": {"judge_model": cfg.judge_model, "num_samples": cfg.num_samples},
            }
            if slot == "rubric_based":
                entry["rubrics"] = [
                    {"rubric_id": r.rubric_id, "rubric_content": {"text_property": r.content}} for r in cfg.rubrics
                ]
            criteria[metric] = entry
        else:
            criteria[metric] = cfg.threshold
    return {"criteria": criteria}


# ---- loading, as EvalSet.from_file / EvalConfig.from_file do ----


def load_eval_set(path: str | Path, *, check_ids: bool = True) -> EvalSet:
    """The eval set in ``path``, in one of ADK's forms or tracegrade's (the file is read and parsed once); two
    cases of one id are refused, naming both positions, unless ``check_ids`` is false (for a caller that checks
    them with the rest, :func:`~tracegrade.evaluation.checks.checked_eval_set`; ADK's files are always checked,
    to place the problem in ADK's file)."""
    data = read_model_file(EvalSet, path)
    if is_adk_eval_set(data):
        return eval_set_from_adk(data, str(path))
    eval_set = model_from_data(EvalSet, data, path)
    if check_ids:
        refuse_duplicate_ids([case.eval_id for case in eval_set.eval_cases], path)
    return eval_set


def load_eval_config(path: str | Path) -> EvalConfig:
    """The config in ``path``, an ADK config or tracegrade's (the file is read and parsed once)."""
    data = read_model_file(EvalConfig, path)
    return config_from_adk(data, str(path)) if is_adk_config(data) else model_from_data(EvalConfig, data, path)


def adk_document(data: Any, source: str, kind: str = "auto") -> tuple[str, EvalSet | EvalConfig] | None:
    """``("evalset", EvalSet)`` or ``("config", EvalConfig)`` when parsed ``data`` is an ADK file of the wanted
    ``kind`` (``auto``, ``evalset`` or ``config``), None when it is not ADK's; problems raise as for a load."""
    if kind in ("auto", "evalset") and is_adk_eval_set(data):
        return "evalset", eval_set_from_adk(data, source)
    if kind in ("auto", "config") and is_adk_config(data):
        return "config", config_from_adk(data, source)
    return None
