"""``tracegrade validate FILE...``: check eval-set and config files and explain every problem.

Each file is recognised as an eval set (it has ``eval_cases`` or ``eval_set_id``) or a config (it has
``criteria`` or another ``EvalConfig`` key) — ADK's ``*.evalset.json``, ``*.test.json`` and
``test_config.json`` too — loaded with the same loader a run uses, then checked for
problems that load fine but cannot grade well: duplicate case ids, an empty eval set, cases without
turns (unless simulated), malformed simulation scenarios, a config that enables no criterion,
``rubric_based`` without rubrics, ``contains_keywords`` without keywords, invalid criterion settings.
Exit 0 with one summary line per file when all are valid; exit 2 listing every problem (file, JSON
path, what is wrong) otherwise.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from pydantic import BaseModel, ValidationError

from tracegrade.cli.file_kinds import KIND_NAMES, document_kind
from tracegrade.errors import EvalSetError, FileFormatError
from tracegrade.models.adk_files import adk_document
from tracegrade.models.config import EvalConfig
from tracegrade.models.dataset import SCENARIO_KEY, EvalCase, EvalSet
from tracegrade.models.files import read_json_file, validation_problems

__all__ = ["command", "config_problems", "eval_set_problems"]

Problem = tuple[str, str]  # (JSON path, what is wrong)

_KINDS: dict[str, type[BaseModel]] = {"evalset": EvalSet, "config": EvalConfig}
_KIND_LABELS = {"evalset": "eval set", "config": "config"}


def eval_set_problems(eval_set: EvalSet) -> list[Problem]:
    """Problems of a loaded eval set that would make grading meaningless or ambiguous."""
    if not eval_set.eval_cases:
        return [("$.eval_cases", "the eval set has no cases; add at least one (an empty eval set cannot be graded)")]
    problems: list[Problem] = []
    first_index: dict[str, int] = {}
    for i, case in enumerate(eval_set.eval_cases):
        where = f"$.eval_cases[{i}]"
        if case.eval_id in first_index:
            problems.append(
                (
                    f"{where}.eval_id",
                    f"duplicate eval_id {case.eval_id!r} (also used at $.eval_cases[{first_index[case.eval_id]}]); "
                    "every case needs its own id",
                )
            )
        else:
            first_index[case.eval_id] = i
        if case.is_simulated:
            problems += _scenario_problems(case, where)
        elif not case.conversation:
            problems.append(
                (f"{where}.conversation", f"case {case.eval_id!r} has no turns; add at least one invocation")
            )
        for j, turn in enumerate(case.conversation):
            if not turn.user_content.get_text().strip():
                problems.append(
                    (f"{where}.conversation[{j}].user_content", "the user message is empty; give the turn a query")
                )
    return problems


def _scenario_problems(case: EvalCase, where: str) -> list[Problem]:
    """A simulated case's ``metadata.scenario`` must be a valid ConversationScenario."""
    from tracegrade.evaluation.simulator import ConversationScenario  # heavy: only for simulated cases

    try:
        ConversationScenario.of_case(case)
    except ValidationError as exc:
        return [(f"{where}.metadata.{SCENARIO_KEY}{path[1:]}", msg) for path, msg in validation_problems(exc)]
    return []


def config_problems(config: EvalConfig) -> list[Problem]:
    """Problems of a loaded config: nothing enabled, or enabled criteria that cannot grade as set up."""
    enabled = config.criteria.enabled_slots()
    if not enabled:
        return [
            (
                "$.criteria",
                'no criterion is enabled; set at least one slot, for example "trajectory": {"match_type": "IN_ORDER"}',
            )
        ]
    problems: list[Problem] = []
    slots = dict(enabled)
    if "rubric_based" in slots and not slots["rubric_based"].rubrics:
        problems.append(
            ("$.criteria.rubric_based.rubrics", "rubric_based is enabled without rubrics; list at least one rubric")
        )
    if "contains_keywords" in slots and not slots["contains_keywords"].keywords:
        problems.append(
            (
                "$.criteria.contains_keywords.keywords",
                "contains_keywords is enabled without keywords, so it always scores 1.0; list the keywords",
            )
        )
    problems += _criterion_setting_problems(enabled)
    return problems


def _criterion_setting_problems(enabled: list[tuple[str, Any]]) -> list[Problem]:
    """What each enabled slot's criterion class says about its own settings (``validate_config``)."""
    from tracegrade.criteria import CRITERIA_REGISTRY

    problems = []
    for slot, cfg in enabled:
        cls = CRITERIA_REGISTRY.get(slot)
        if cls is not None:
            problems += [(f"$.criteria.{slot}", p) for p in cls(config=cfg).validate_config()]
    return problems


def check_file(path: Path, kind: str) -> tuple[str, str | list[Problem]]:
    """``(kind, summary)`` for a valid file, ``(kind, problems)`` otherwise."""
    try:
        data = read_json_file(path, "input")
    except FileNotFoundError:
        return kind, [("$", "file not found")]
    except FileFormatError as exc:
        return kind, exc.problems
    try:  # ADK's eval sets (the older ones are JSON lists) and test_config.json, converted as a run reads them
        adk = adk_document(data, str(path), kind)
    except FileFormatError as exc:
        return ("evalset" if isinstance(exc, EvalSetError) else "config"), exc.problems
    if adk is not None:
        return adk[0], _outcome(adk[1])
    if not isinstance(data, dict):
        return kind, [("$", f"expected a JSON object, got {type(data).__name__}")]
    if kind == "auto":
        detected = document_kind(data)
        if detected is not None and detected not in _KINDS:
            return kind, [("$", f"not an eval set or a config: it looks like {KIND_NAMES[detected]}")]
        if detected is None:
            return kind, [
                (
                    "$",
                    "cannot tell whether this is an eval set (it would have 'eval_cases') or a config (it would "
                    "have 'criteria'); add the key, or pass --kind evalset|config",
                )
            ]
        kind = detected
    try:
        loaded = _KINDS[kind].model_validate(data)
    except ValidationError as exc:
        return kind, validation_problems(exc)
    return kind, _outcome(loaded)


def _outcome(loaded: BaseModel) -> str | list[Problem]:
    """A loaded file's summary line, or the problems it has although it loaded."""
    if isinstance(loaded, EvalSet):
        problems = eval_set_problems(loaded)
        turns = sum(len(c.conversation) for c in loaded.eval_cases)
        summary = (
            f"eval set {loaded.name or loaded.eval_set_id!r}: {len(loaded)} case{'s' * (len(loaded) != 1)}, "
            f"{turns} turn{'s' * (turns != 1)}"
        )
    else:
        assert isinstance(loaded, EvalConfig)
        problems = config_problems(loaded)
        summary = "config enabling " + ", ".join(slot for slot, _ in loaded.criteria.enabled_slots())
    return problems or summary


@click.command("validate")
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path, dir_okay=False))
@click.option(
    "--kind",
    type=click.Choice(["auto", "evalset", "config"]),
    default="auto",
    show_default=True,
    help="What the files are; 'auto' tells eval sets and configs apart by their keys.",
)
def command(files: tuple[Path, ...], kind: str) -> None:
    """Check eval-set and config FILES (JSON, or YAML for configs) and explain every problem."""
    failed = 0
    for path in files:
        file_kind, outcome = check_file(path, kind)
        if isinstance(outcome, str):
            click.echo(f"ok    {path}: {outcome}")
            continue
        failed += 1
        label = _KIND_LABELS.get(file_kind, "file")
        click.echo(f"error {path}: invalid {label} ({len(outcome)} problem{'s' * (len(outcome) != 1)}):", err=True)
        for where, what in outcome:
            click.echo(f"  at {where}: {what}", err=True)
    if failed:
        click.echo(f"{failed} of {len(files)} file{'s' * (len(files) != 1)} invalid", err=True)
        raise SystemExit(2)
