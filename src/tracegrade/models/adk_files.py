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
``metadata["adk"]`` so that writing the set back gives ADK the same file. ADK metrics become slots with
``scoring="adk"`` where tracegrade computes ADK's numbers (``tool_trajectory_avg_score`` -> ``trajectory``,
``response_match_score`` -> ``rouge_match``); the judge metrics map to tracegrade's judges.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from tracegrade.errors import ConfigError, EvalSetError, FileFormatError
from tracegrade.models.config import CRITERIA_SLOTS, CriterionConfig, EvalConfig, MatchType, Rubric
from tracegrade.models.dataset import EvalCase, EvalSet, Invocation, MessageContent, SessionInput, ToolCall
from tracegrade.models.files import read_json_file, validation_problems

__all__ = [
    "ADK_METRIC_SLOTS",
    "adk_document",
    "config_from_adk",
    "config_to_adk",
    "eval_set_from_adk",
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


def _snake(key: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", key).lower()


def _snaked(value: Any) -> Any:
    """ADK's models accept camelCase aliases: read every key in snake_case (values such as ``state`` and tool
    arguments are the user's own and keep their keys)."""
    if isinstance(value, list):
        return [_snaked(v) for v in value]
    if not isinstance(value, dict):
        return value
    out: dict[str, Any] = {}
    for key, item in value.items():
        name = _snake(key) if isinstance(key, str) else key
        out[name] = item if name in ("state", "args", "response", "final_session_state") else _snaked(item)
    return out


# ---- telling the formats apart ----


def _has_parts(content: Any) -> bool:
    return isinstance(content, dict) and "parts" in content


def is_adk_eval_set(data: Any) -> bool:
    """Whether parsed JSON is one of ADK's eval-set forms (tracegrade's own has ``content``, not ``parts``)."""
    if isinstance(data, list):
        return bool(data) and all(isinstance(d, dict) and ("query" in d or "data" in d) for d in data)
    if not isinstance(data, dict):
        return False
    if "evalSetId" in data or "evalCases" in data:
        return True
    cases = data.get("eval_cases")
    if not isinstance(cases, list):
        return False
    for case in cases:
        if not isinstance(case, dict):
            continue
        if "conversation_scenario" in case or "conversationScenario" in case:
            return True
        for turn in case.get("conversation") or []:
            if isinstance(turn, dict) and (_has_parts(turn.get("user_content")) or "userContent" in turn):
                return True
    return False


def is_adk_config(data: Any) -> bool:
    """Whether parsed JSON is an ADK config: its ``criteria`` name ADK metrics, or give bare thresholds."""
    if not isinstance(data, dict) or not isinstance(data.get("criteria"), dict):
        return False
    criteria = data["criteria"]
    return any(
        name in ADK_METRIC_SLOTS or name in _OTHER_ADK_METRICS or isinstance(value, (int, float))
        for name, value in criteria.items()
    )


# ---- eval sets: ADK -> tracegrade ----


def _part_blocks(parts: list[Any], where: str, problems: list[Problem]) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for i, part in enumerate(parts):
        if not isinstance(part, dict):
            problems.append((f"{where}[{i}]", f"a part must be an object, got {type(part).__name__}"))
        elif isinstance(part.get("text"), str):
            blocks.append({"type": "text", "text": part["text"]})
        else:
            blocks.append({"type": "adk_part", "part": part})  # images, files...: kept for writing back
    return blocks


def _message(content: Any, where: str, problems: list[Problem], role: str) -> MessageContent | None:
    """A genai ``Content`` as a MessageContent: one text part becomes plain text, several become blocks."""
    if content is None:
        return None
    if not isinstance(content, dict) or not isinstance(content.get("parts", []), list):
        problems.append((where, 'expected a Content object {"role": ..., "parts": [{"text": ...}]}'))
        return None
    blocks = _part_blocks(content.get("parts") or [], f"{where}.parts", problems)
    adk_role = content.get("role") or ("model" if role == "assistant" else "user")
    text: str | list[dict[str, Any]] = blocks[0]["text"] if len(blocks) == 1 and "text" in blocks[0] else blocks
    if not blocks:
        text = ""
    metadata = {"adk_role": adk_role} if adk_role not in ("user", "model") else {}
    return MessageContent(role=role, content=text, metadata=metadata)


def _tool_calls(data: dict[str, Any], where: str, problems: list[Problem]) -> tuple[list[ToolCall], list[Any]]:
    """Expected tool calls (results joined by call id) and intermediate responses of ``intermediate_data``."""
    calls: list[dict[str, Any]] = []
    responses: list[dict[str, Any]] = []
    texts: list[tuple[str, list[Any]]] = []
    if "invocation_events" in data:
        for event in data.get("invocation_events") or []:
            parts = ((event or {}).get("content") or {}).get("parts") or []
            author = str((event or {}).get("author", ""))
            for part in parts:
                if not isinstance(part, dict):
                    continue
                if part.get("function_call"):
                    calls.append(part["function_call"])
                elif part.get("function_response"):
                    responses.append(part["function_response"])
                elif "text" in part:
                    texts.append((author, [part]))
    else:
        calls = list(data.get("tool_uses") or [])
        responses = list(data.get("tool_responses") or [])
        for i, pair in enumerate(data.get("intermediate_responses") or []):
            if isinstance(pair, list) and len(pair) == 2 and isinstance(pair[1], list):
                texts.append((str(pair[0]), pair[1]))
            else:
                problems.append((f"{where}.intermediate_responses[{i}]", "expected an [author, parts] pair"))
    by_id = {r.get("id"): r.get("response") for r in responses if isinstance(r, dict) and r.get("id")}
    tools: list[ToolCall] = []
    for i, call in enumerate(calls):
        if not isinstance(call, dict) or not isinstance(call.get("name"), str):
            problems.append((f"{where}.tool_uses[{i}]", 'a tool use needs a "name"'))
            continue
        args = call.get("args")
        if args is not None and not isinstance(args, dict):
            problems.append((f"{where}.tool_uses[{i}].args", "tool arguments must be an object"))
            continue
        call_id = call.get("id")
        tools.append(ToolCall(name=call["name"], args=args or {}, call_id=call_id, result=by_id.get(call_id)))
    intermediate = [
        MessageContent(role="assistant", content=_joined_text(parts), metadata={"author": author})
        for author, parts in texts
    ]
    return tools, intermediate


def _joined_text(parts: list[Any]) -> str:
    return "\n".join(p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str))


def _invocation(turn: Any, where: str, problems: list[Problem]) -> Invocation | None:
    if not isinstance(turn, dict):
        problems.append((where, "an invocation must be an object"))
        return None
    user = _message(turn.get("user_content"), f"{where}.user_content", problems, "user")
    if user is None:
        problems.append((f"{where}.user_content", "every invocation needs user_content"))
        return None
    final = _message(turn.get("final_response"), f"{where}.final_response", problems, "assistant")
    tools, intermediate = _tool_calls(turn.get("intermediate_data") or {}, f"{where}.intermediate_data", problems)
    fields: dict[str, Any] = {}
    if turn.get("invocation_id"):
        fields["invocation_id"] = str(turn["invocation_id"])
    return Invocation(
        user_content=user,
        expected_final_response=final,
        expected_tool_trajectory=tools,
        expected_intermediate_responses=intermediate,
        **fields,
    )


_CASE_KEYS = frozenset({"eval_id", "conversation", "session_input"})


def _case(case: Any, where: str, problems: list[Problem]) -> EvalCase | None:
    if not isinstance(case, dict) or not case.get("eval_id"):
        problems.append((where, 'an eval case must be an object with an "eval_id"'))
        return None
    if case.get("conversation_scenario") is not None:
        problems.append(
            (
                f"{where}.conversation_scenario",
                "ADK conversation scenarios (user simulation) are not read by tracegrade; give the case a "
                '"conversation", or write it as a tracegrade simulated case (metadata.scenario)',
            )
        )
        return None
    turns = [
        _invocation(t, f"{where}.conversation[{i}]", problems) for i, t in enumerate(case.get("conversation") or [])
    ]
    session = case.get("session_input") or {}
    extra = {k: v for k, v in case.items() if k not in _CASE_KEYS and v not in (None, {}, [], 0, 0.0)}
    if session.get("session_id"):
        extra["session_id"] = session["session_id"]
    return EvalCase(
        eval_id=str(case["eval_id"]),
        conversation=[t for t in turns if t is not None],
        session_input=SessionInput(
            app_name=str(session.get("app_name") or ""),
            user_id=str(session.get("user_id") or "test_user"),
            state=dict(session.get("state") or {}),
        ),
        metadata={"adk": extra} if extra else {},
    )


def _stem(source: str) -> str:
    """``dice`` for ``dir/dice.test.json`` or ``dice.evalset.json``."""
    return Path(source).name.removesuffix(".json").removesuffix(".test").removesuffix(".evalset")


def _old_format_cases(data: list[Any], source: str) -> list[dict[str, Any]]:
    """The older list formats as EvalSet cases (the same conversion ADK's migration performs)."""
    if all("data" in d for d in data):
        named = [
            (str(d.get("name") or f"case_{i}"), d.get("data") or [], d.get("initial_session") or {})
            for i, d in enumerate(data)
        ]
    else:
        named = [(_stem(source), data, {})]
    cases = []
    for name, turns, session in named:
        conversation = []
        for turn in turns:
            if not isinstance(turn, dict):
                conversation.append(turn)  # reported by _invocation
                continue
            tool_uses = [
                {"name": u.get("tool_name"), "args": u.get("tool_input")} for u in turn.get("expected_tool_use") or []
            ]
            intermediate = [
                [r.get("author", ""), [{"text": r.get("text", "")}]]
                for r in turn.get("expected_intermediate_agent_responses") or []
            ]
            conversation.append(
                {
                    "user_content": {"role": "user", "parts": [{"text": turn.get("query", "")}]},
                    "final_response": {"role": "model", "parts": [{"text": turn.get("reference", "")}]},
                    "intermediate_data": {"tool_uses": tool_uses, "intermediate_responses": intermediate},
                }
            )
        cases.append({"eval_id": name, "conversation": conversation, "session_input": session or None})
    return cases


def eval_set_from_adk(data: Any, source: str = "<ADK eval set>") -> EvalSet:
    """An ADK eval set (any of its forms, parsed JSON) as a tracegrade EvalSet; every problem is reported at
    once as an :class:`~tracegrade.errors.EvalSetError` with paths in the ADK file."""
    if isinstance(data, list):
        data = {"eval_set_id": _stem(source), "eval_cases": _old_format_cases(data, source)}
    data = _snaked(data)
    problems: list[Problem] = []
    if not isinstance(data.get("eval_cases"), list):
        raise EvalSetError(source, [("$.eval_cases", "an ADK eval set needs an eval_cases list")])
    cases = [_case(c, f"$.eval_cases[{i}]", problems) for i, c in enumerate(data["eval_cases"])]
    extra = {k: v for k, v in data.items() if k not in ("eval_set_id", "name", "description", "eval_cases") and v}
    try:
        built = EvalSet(
            eval_set_id=str(data.get("eval_set_id") or _stem(source)),
            name=str(data.get("name") or ""),
            description=str(data.get("description") or ""),
            eval_cases=[c for c in cases if c is not None],
            metadata={"adk": extra} if extra else {},
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
        tool_uses.append({"name": call.name, "args": call.args, **({"id": call.call_id} if call.call_id else {})})
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


def eval_set_to_adk(eval_set: EvalSet) -> dict[str, Any]:
    """``eval_set`` as an ADK ``EvalSet`` document (snake_case keys, as ADK writes them)."""
    cases = []
    for case in eval_set.eval_cases:
        extra = dict(case.metadata.get("adk") or {})
        session_id = extra.pop("session_id", None)
        session: dict[str, Any] = {
            "app_name": case.session_input.app_name,
            "user_id": case.session_input.user_id,
            "state": case.session_input.state,
        }
        if session_id:
            session["session_id"] = session_id
        cases.append(
            {
                "eval_id": case.eval_id,
                "conversation": [_adk_invocation(t) for t in case.conversation],
                "session_input": session,
                **extra,
            }
        )
    out: dict[str, Any] = {"eval_set_id": eval_set.eval_set_id, "eval_cases": cases}
    if eval_set.name:
        out["name"] = eval_set.name
    if eval_set.description:
        out["description"] = eval_set.description
    out.update(eval_set.metadata.get("adk") or {})
    return out


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
        problems.append((where, f'ADK metric {metric!r} needs a threshold: a number or an object with "threshold"'))
        return None
    slot = ADK_METRIC_SLOTS[metric]
    fields: dict[str, Any] = {"threshold": value["threshold"]}
    if slot in _ADK_SCORED:
        fields["scoring"] = "adk"
    if slot == "trajectory":
        fields["check_args"] = not value.get("ignore_args", False)
        if "match_type" in value:
            fields["match_type"] = _match_type(value["match_type"], f"{where}.match_type", problems)
    judge = value.get("judge_model_options") or {}
    if slot in ("llm_judge", "rubric_based", "hallucination"):
        fields["judge_model"] = judge.get("judge_model") or _DEFAULT_JUDGE
        if "num_samples" in judge:
            fields["num_samples"] = judge["num_samples"]
    if slot == "rubric_based":
        rubrics = value.get("rubrics") or []
        fields["rubrics"] = [
            Rubric(
                rubric_id=str(r.get("rubric_id", f"rubric_{i}")),
                content=str((r.get("rubric_content") or {}).get("text_property") or ""),
            )
            for i, r in enumerate(rubrics)
            if isinstance(r, dict)
        ]
    try:
        return CriterionConfig(**fields)
    except ValidationError as exc:
        problems += [(where + path[1:], message) for path, message in validation_problems(exc)]
        return None


def config_from_adk(data: dict[str, Any], source: str = "<ADK config>") -> EvalConfig:
    """An ADK ``test_config.json`` (parsed) as an EvalConfig; trajectory and response match score as ADK does."""
    data = _snaked(data)
    problems: list[Problem] = []
    for key in data:
        if key != "criteria":
            problems.append(
                (f"$.{key}", f"ADK's {key!r} is not read by tracegrade; remove it or set it in an EvalConfig")
            )
    slots: dict[str, CriterionConfig] = {}
    for metric, value in (data.get("criteria") or {}).items():
        where = f"$.criteria.{metric}"
        if metric in ADK_METRIC_SLOTS:
            built = _criterion(metric, value, where, problems)
            if built is not None:
                slots[ADK_METRIC_SLOTS[metric]] = built
        elif metric in CRITERIA_SLOTS:
            problems.append((where, f'tracegrade slot {metric!r} takes an object such as {{"threshold": {value!r}}}'))
        elif metric in _OTHER_ADK_METRICS:
            problems.append((where, f"ADK metric {metric!r} has no tracegrade counterpart; remove it"))
        else:
            known = ", ".join(ADK_METRIC_SLOTS)
            problems.append((where, f"unknown ADK metric {metric!r}; tracegrade reads {known}"))
    if problems:
        raise ConfigError(source, problems)
    return EvalConfig(criteria=slots)  # type: ignore[arg-type]


def config_to_adk(config: EvalConfig, *, lossy: bool = False) -> dict[str, Any]:
    """``config`` as an ADK ``test_config.json`` document. Slots ADK has no metric for are an error unless
    ``lossy`` (then they are left out)."""
    criteria: dict[str, Any] = {}
    problems: list[Problem] = []
    for slot, cfg in config.criteria.enabled_slots():
        metric = _SLOT_METRICS.get(slot)
        if metric is None:
            if not lossy:
                problems.append(
                    (f"$.criteria.{slot}", f"ADK has no metric for tracegrade's {slot!r} (use --lossy to drop it)")
                )
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
    if config.criteria.sql_assertions and not lossy:
        problems.append(("$.criteria.sql_assertions", "ADK has no SQL assertions (use --lossy to drop them)"))
    if problems:
        raise ConfigError("<EvalConfig>", problems)
    return {"criteria": criteria}


# ---- loading, as EvalSet.from_file / EvalConfig.from_file do ----


def load_eval_set(path: str | Path) -> EvalSet | None:
    """The eval set in ``path`` if the file is in one of ADK's forms, else None (load it as tracegrade's)."""
    data = _read(path, "eval set", EvalSetError)
    return eval_set_from_adk(data, str(path)) if is_adk_eval_set(data) else None


def load_eval_config(path: str | Path) -> EvalConfig | None:
    """The config in ``path`` if the file is an ADK config, else None (load it as tracegrade's)."""
    data = _read(path, "config", ConfigError)
    return config_from_adk(data, str(path)) if is_adk_config(data) else None


def _read(path: str | Path, kind: str, error: type[EvalSetError] | type[ConfigError]) -> Any:
    try:
        return read_json_file(path, kind)
    except FileFormatError as exc:
        raise error(str(path), exc.problems) from None


def adk_document(data: Any, source: str, kind: str = "auto") -> tuple[str, EvalSet | EvalConfig] | None:
    """``("evalset", EvalSet)`` or ``("config", EvalConfig)`` when parsed ``data`` is an ADK file of the wanted
    ``kind`` (``auto``, ``evalset`` or ``config``), None when it is not ADK's; problems raise as for a load."""
    if kind in ("auto", "evalset") and is_adk_eval_set(data):
        return "evalset", eval_set_from_adk(data, source)
    if kind in ("auto", "config") and is_adk_config(data):
        return "config", config_from_adk(data, source)
    return None
