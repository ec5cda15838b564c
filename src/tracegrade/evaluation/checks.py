"""What "valid" means for an eval set and a config: one set of checks for ``tracegrade validate`` and for
every path that grades (``tracegrade grade``, the worker, ``AgentEvaluator``, ``TraceGrader``), so that a file
``validate`` passes runs, and one it refuses is refused everywhere with the same message.

Each check lists ``(JSON path, what is wrong)`` problems of something that loaded fine but cannot grade well.
:func:`checked_eval_set` and :func:`checked_config` load a file (or take an object) and raise its error,
naming the file and every problem; :func:`~tracegrade.evaluation.engine.compile_criteria` refuses criteria
with problems, however the config was made.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from tracegrade.errors import ConfigError, EvalSetError
from tracegrade.models.config import SLOT_OPTIONS, CriteriaConfig, CriterionConfig, EvalConfig
from tracegrade.models.dataset import SCENARIO_KEY, EvalCase, EvalSet
from tracegrade.models.files import duplicate_id_problems, validation_problems

__all__ = [
    "Problem",
    "checked_config",
    "checked_eval_set",
    "config_problems",
    "criteria_problems",
    "eval_set_problems",
]

Problem = tuple[str, str]  # (JSON path, what is wrong)

# Settings every slot has; any other CriterionConfig option must be one its slot reads (SLOT_OPTIONS).
_COMMON_OPTIONS = frozenset({"threshold", "enabled", "metadata"})
_OPTIONS = frozenset(CriterionConfig.model_fields) - _COMMON_OPTIONS


def checked_eval_set(eval_set: EvalSet | str | Path) -> EvalSet:
    """The eval set (loaded when given a path), refused with an EvalSetError listing every problem when it
    cannot be graded as it is (:func:`eval_set_problems`)."""
    from tracegrade.models.adk_files import load_eval_set

    # its ids are checked below with the rest, so that a file's every problem is listed at once, as validate does
    loaded = eval_set if isinstance(eval_set, EvalSet) else load_eval_set(eval_set, check_ids=False)
    problems = eval_set_problems(loaded)
    if problems:
        source = f"<EvalSet {loaded.eval_set_id}>" if isinstance(eval_set, EvalSet) else str(eval_set)
        raise EvalSetError(source, problems)
    return loaded


def checked_config(path: str | Path) -> EvalConfig:
    """The config of file ``path``, refused with a ConfigError naming the file and every problem when it
    cannot grade as set up (:func:`config_problems`)."""
    config = EvalConfig.from_file(path)
    problems = config_problems(config)
    if problems:
        raise ConfigError(str(path), problems)
    return config


# ------------------------------------------------------------------------------------------------ eval sets


def eval_set_problems(eval_set: EvalSet) -> list[Problem]:
    """Problems of a loaded eval set that would make grading meaningless or ambiguous."""
    if not eval_set.eval_cases:
        return [("$.eval_cases", "the eval set has no cases; add at least one (an empty eval set cannot be graded)")]
    repeats = duplicate_id_problems([case.eval_id for case in eval_set.eval_cases])
    problems: list[Problem] = []
    for i, case in enumerate(eval_set.eval_cases):
        problems += repeats.get(i, [])
        problems += _case_problems(case, f"$.eval_cases[{i}]")
    return problems


def _case_problems(case: EvalCase, where: str) -> list[Problem]:
    problems = _scenario_problems(case, where) if case.is_simulated else []
    # A turn's user message is what the agent is sent, or what finds the case's traces in a store; a case with a
    # selector is found by it (an exported case of a trace whose query was not captured has an empty message).
    selected = bool(case.metadata.get("selector"))
    if not case.is_simulated and not selected and not case.conversation:
        problems.append((f"{where}.conversation", f"case {case.eval_id!r} has no turns; add at least one invocation"))
    for j, turn in enumerate(() if selected else case.conversation):
        if not turn.user_content.get_text().strip():
            problems.append(
                (f"{where}.conversation[{j}].user_content", "the user message is empty; give the turn a query")
            )
    if "selector" in case.metadata:
        from tracegrade.evaluation.matching import selector_problems

        problems += [(f"{where}.metadata.selector{at}", what) for at, what in selector_problems(case)]
    return problems


def _scenario_problems(case: EvalCase, where: str) -> list[Problem]:
    """A simulated case's ``metadata.scenario`` must be a valid ConversationScenario."""
    from tracegrade.evaluation.simulator import ConversationScenario  # heavy: only for simulated cases

    try:
        ConversationScenario.of_case(case)
    except ValidationError as exc:
        return [(f"{where}.metadata.{SCENARIO_KEY}{path[1:]}", msg) for path, msg in validation_problems(exc)]
    return []


# -------------------------------------------------------------------------------------------------- configs


def config_problems(config: EvalConfig) -> list[Problem]:
    """Problems of a loaded config: nothing enabled, or enabled criteria that cannot grade as set up."""
    if not config.has_enabled_criteria():
        return [
            (
                "$.criteria",
                'no criterion is enabled; set at least one slot, for example "trajectory": {"match_type": "IN_ORDER"}',
            )
        ]
    return criteria_problems(config.criteria)


def criteria_problems(criteria: CriteriaConfig, where: str = "$.criteria") -> list[Problem]:
    """Problems of each enabled slot (``where``: the JSON path of ``criteria`` in its file), then those of slots
    together (a judge cost cap over a judge model without a price)."""
    from tracegrade.judges.pricing import judge_cost_cap_problems

    problems = [
        problem for slot, cfg in criteria.enabled_slots() for problem in _slot_problems(slot, cfg, f"{where}.{slot}")
    ]
    return problems + judge_cost_cap_problems(criteria, where)


def _slot_problems(slot: str, cfg: CriterionConfig, where: str) -> list[Problem]:
    """Options the slot does not read, settings that make it meaningless, and what its criterion class says
    about its settings (``validate_config``)."""
    from tracegrade.criteria.registry import criterion_class

    problems = [(f"{where}.{option}", _misplaced(option, slot)) for option in _ignored_options(slot, cfg)]
    if slot == "rubric_based" and not cfg.rubrics:
        problems.append((f"{where}.rubrics", "rubric_based is enabled without rubrics; list at least one rubric"))
    if slot == "contains_keywords" and not cfg.keywords:
        problems.append(
            (
                f"{where}.keywords",
                "contains_keywords is enabled without keywords, so it always scores 1.0; list the keywords",
            )
        )
    problems += [(where, p) for p in criterion_class(slot, cfg)(config=cfg).validate_config()]
    return problems


def _ignored_options(slot: str, cfg: CriterionConfig) -> list[str]:
    """The options set on ``slot`` to something other than their default that its criterion never reads (an
    option at its default changes nothing: a saved config writes every option out)."""
    fields = CriterionConfig.model_fields
    return [
        option
        for option in sorted((cfg.model_fields_set & _OPTIONS) - SLOT_OPTIONS[slot])
        if getattr(cfg, option) != fields[option].get_default(call_default_factory=True)
    ]


def _misplaced(option: str, slot: str) -> str:
    readers = [s for s, options in SLOT_OPTIONS.items() if option in options]
    return f"option {option!r} does not apply to slot {slot!r} (it applies to {', '.join(readers)})"
