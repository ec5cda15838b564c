"""``tracegrade validate FILE...``: check eval-set, config, tokens and worker-rules files and explain every problem.

Tokens files (``serve --tokens``) and worker rules are checked with the loader the receiver and the worker use,
so a file can be checked before a SIGHUP or a restart puts it in force.

Each file is recognised as an eval set (it has ``eval_cases`` or ``eval_set_id``) or a config (it has
``criteria`` or another ``EvalConfig`` key) — ADK's ``*.evalset.json``, ``*.test.json`` and
``test_config.json`` too — loaded with the same loader a run uses, then checked for
problems that load fine but cannot grade well, with the checks every grading path makes
(:mod:`tracegrade.evaluation.checks`): duplicate case ids, an empty eval set, cases without turns (unless
simulated), malformed simulation scenarios or selectors, a config that enables no criterion,
``rubric_based`` without rubrics, ``contains_keywords`` without keywords, options a slot does not read,
invalid criterion settings.
Exit 0 with one summary line per file when all are valid; exit 2 listing every problem (file, JSON
path, what is wrong) otherwise.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import click
from pydantic import BaseModel, ValidationError

from tracegrade.cli.file_kinds import KIND_NAMES, document_kind
from tracegrade.errors import EvalSetError, FileFormatError
from tracegrade.evaluation.checks import Problem, config_problems, eval_set_problems
from tracegrade.models.adk_files import adk_document
from tracegrade.models.config import EvalConfig
from tracegrade.models.dataset import EvalSet
from tracegrade.models.files import not_an_object, read_json_file, validation_problems

__all__ = ["command"]

_KINDS: dict[str, type[BaseModel]] = {"evalset": EvalSet, "config": EvalConfig}
_SERVER_FILES = ("tokens", "rules")  # read by the receiver and the worker, not by a run
_KIND_LABELS = {"evalset": "eval set", "config": "config", "tokens": "tokens file", "rules": "worker rules"}
# the kind read_json_file is told, which says what a file of it holds when it is empty
_READ_AS = {"auto": "file", "evalset": "eval set", "config": "config"}


def check_file(path: Path, kind: str) -> tuple[str, str | list[Problem]]:
    """``(kind, summary)`` for a valid file, ``(kind, problems)`` otherwise."""
    if kind in _SERVER_FILES:  # read as the receiver or the worker reads it (a tokens file is YAML by any name)
        return kind, _server_file(path, kind)
    try:
        data = read_json_file(path, _READ_AS[kind])
    except FileNotFoundError:
        return kind, [("$", "file not found")]
    except FileFormatError as exc:
        return kind, exc.problems
    detected = document_kind(data) if kind == "auto" else None
    if detected in _SERVER_FILES:
        assert detected is not None
        return detected, _server_file(path, detected)
    try:  # ADK's eval sets (the older ones are JSON lists) and test_config.json, converted as a run reads them
        adk = adk_document(data, str(path), kind)
    except FileFormatError as exc:
        return ("evalset" if isinstance(exc, EvalSetError) else "config"), exc.problems
    if adk is not None:
        return adk[0], _outcome(adk[1])
    if not isinstance(data, dict):
        return kind, [("$", not_an_object(data))]
    if kind == "auto":
        if detected is not None and detected not in _KINDS:
            return kind, [("$", f"not an eval set or a config: it looks like {KIND_NAMES[detected]}")]
        if detected is None:
            return kind, [
                (
                    "$",
                    "cannot tell what this file is: an eval set would have 'eval_cases', a config 'criteria', a "
                    "tokens file 'tenants', worker rules 'rules'; add the key, or pass --kind "
                    "evalset|config|tokens|rules",
                )
            ]
        kind = detected
    try:
        loaded = _KINDS[kind].model_validate(data)
    except ValidationError as exc:
        problems = validation_problems(exc, _KINDS[kind])
        return kind, problems + _problems_behind(data, exc, _KINDS[kind], {where for where, _ in problems})
    return kind, _outcome(loaded)


def _problems_behind(
    data: dict[str, Any], exc: ValidationError, model: type[BaseModel], seen: set[str]
) -> list[Problem]:
    """The checks a file that does not load would also fail: run on it without the keys its errors name (each
    then at its default), so that one run of ``validate`` lists every problem, not one layer at a time."""
    trimmed = copy.deepcopy(data)
    for error in exc.errors(include_url=False):
        *parents, key = error["loc"] or ("",)
        holder: Any = trimmed
        for part in parents:
            holder = _child(holder, part)
        if not isinstance(holder, dict) or key not in holder:
            return []  # a problem that removing a key cannot set aside (a missing field, an item of a list)
        del holder[key]
    try:
        loaded = model.model_validate(trimmed)
    except ValidationError:
        return []
    outcome = _outcome(loaded)
    return [] if isinstance(outcome, str) else [(where, what) for where, what in outcome if where not in seen]


def _child(holder: Any, part: str | int) -> Any:
    """``holder[part]`` where there is one (a key of an object, an index of a list), else None."""
    if isinstance(holder, dict):
        return holder.get(part)
    if isinstance(holder, list) and isinstance(part, int) and 0 <= part < len(holder):
        return holder[part]
    return None


def _server_file(path: Path, kind: str) -> str | list[Problem]:
    """A tokens file's or worker rules' summary line, or what the receiver or the worker would refuse."""
    from tracegrade.evaluation.worker import WorkerRules
    from tracegrade.ingest.tokens import TokensFileError, TokenTable

    if kind == "rules":
        try:
            rules = WorkerRules.from_file(path)
        except FileNotFoundError:
            return [("$", "file not found")]
        except FileFormatError as exc:
            return exc.problems
        names = ", ".join(rule.name for rule in rules.rules)
        return f"worker rules: {len(rules.rules)} rule{'s' * (len(rules.rules) != 1)} ({names})"
    try:
        table = TokenTable.from_file(path)
    except TokensFileError as exc:
        return exc.problems
    warning = table.short_token_warning()
    return f"tokens file: {table.describe()}" + (f"; warning: {warning}" if warning else "")


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
        enabled = [slot for slot, _ in loaded.criteria.enabled_slots()]
        enabled += [f"sql_assertion:{a.name}" for a in loaded.criteria.sql_assertions if a.enabled]
        summary = "config enabling " + ", ".join(enabled)
    return problems or summary


@click.command("validate")
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path, dir_okay=False))
@click.option(
    "--kind",
    type=click.Choice(["auto", "evalset", "config", "tokens", "rules"]),
    default="auto",
    show_default=True,
    help="What the files are; 'auto' tells them apart by their keys (a tokens file has 'tenants', worker "
    "rules have 'rules').",
)
def command(files: tuple[Path, ...], kind: str) -> None:
    """Check eval-set, config, tokens (serve --tokens) and worker-rules FILES (JSON, or YAML) and explain every
    problem."""
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
