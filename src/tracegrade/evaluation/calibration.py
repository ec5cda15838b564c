"""Judge calibration: how well each LLM-judged criterion agrees with human labels, stored and enforced.

``calibrate`` runs every LLM-judged criterion of a config on a human-labelled set and measures agreement:
accuracy and Cohen's kappa on pass/fail (the judge passes an item when its score reaches the criterion's
threshold; a human score does the same), linear and quadratic weighted kappa on a graded scale (human scores
only), Spearman's correlation of the scores, the 2x2 confusion matrix and the judge's self-consistency across
its ``num_samples``. Each result is stored, with the judge model and the prompt version, in a calibration file
(JSON; one entry per criterion, judge model and prompt version, the newest kept).

A criterion whose config sets ``min_agreement`` is checked when a run starts (:func:`enforce_calibration`):
its judge's newest calibration for this criterion and judge model must exist, be for the current prompt and
reach that kappa. Otherwise the run fails with :class:`CalibrationError`, or, with ``EvalConfig.calibration
= "warn"``, each of the criterion's results carries the reason as a warning.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path
from typing import Any

from tracegrade.criteria.base import BaseCriterion
from tracegrade.criteria.llm.base import NO_PROVIDER_REASON, TemplatedLLMCriterion
from tracegrade.errors import TracegradeError
from tracegrade.evaluation.statistics import cohens_kappa, spearman
from tracegrade.models.config import EvalConfig
from tracegrade.models.dataset import EvalCase
from tracegrade.models.execution import ExecutionResult
from tracegrade.models.results import CriterionResult

__all__ = [
    "DEFAULT_CALIBRATION_FILE",
    "CalibrationError",
    "LabelledItem",
    "agreement",
    "calibrate",
    "calibration_path",
    "enforce_calibration",
    "judged_criteria",
    "load_calibrations",
    "prompt_version",
    "save_calibrations",
]

DEFAULT_CALIBRATION_FILE = ".tracegrade/calibration.json"
FILE_VERSION = 1


class CalibrationError(TracegradeError):
    """A run's judge is not calibrated well enough for a criterion's ``min_agreement`` (or a calibration file
    cannot be read); the message names each criterion, what was found and how to fix it."""


@dataclass
class LabelledItem:
    """One human-labelled item: what the judge grades and the human's verdict (``human`` in [0, 1]).

    ``graded`` is True when the human gave a score (a graded scale) rather than pass/fail; ``criterion``
    limits the label to one criterion (slot or result name), None to every judged criterion.
    """

    item_id: str
    execution: ExecutionResult
    case: EvalCase
    human: float
    graded: bool
    criterion: str | None = None


@dataclass
class _Judged:
    item: LabelledItem
    result: CriterionResult


@dataclass
class Agreement:
    """Agreement between the human and the judge over the items both rated (see :func:`agreement`)."""

    items: int
    accuracy: float | None
    kappa: float | None
    kappa_linear: float | None
    kappa_quadratic: float | None
    spearman: float | None
    confusion: dict[str, dict[str, int]]
    self_consistency: dict[str, Any] | None
    scale: list[float] = field(default_factory=list)


def calibration_path(config: EvalConfig) -> Path:
    """Where ``config``'s runs look for calibrations (and ``tracegrade calibrate`` writes by default)."""
    return Path(config.calibration_file or DEFAULT_CALIBRATION_FILE)


def judged_criteria(config: EvalConfig, only: Iterable[str] = ()) -> list[tuple[str, TemplatedLLMCriterion]]:
    """``(slot, criterion)`` for every enabled LLM-judged slot of ``config`` (``only``: those slots or names)."""
    import tracegrade.criteria  # noqa: F401  (registers the built-in criteria)
    from tracegrade.criteria.registry import CRITERIA_REGISTRY

    wanted = set(only)
    found = []
    for slot, cfg in config.criteria.enabled_slots():
        cls = CRITERIA_REGISTRY.get(slot)
        if cls is None or not issubclass(cls, TemplatedLLMCriterion):
            continue
        if wanted and slot not in wanted and cls.name not in wanted:
            continue
        found.append((slot, cls(config=cfg)))
    return found


def prompt_version(criterion: TemplatedLLMCriterion) -> str:
    """A short digest of what the judge is told: its template, the data rules and (rubrics) the rubric text.
    Editing any of them makes an older calibration stale."""
    templates = resources.files("tracegrade.judges").joinpath("templates")
    digest = hashlib.sha256()
    for name in (criterion.template, "data_rules"):
        digest.update(templates.joinpath(f"{name}.txt").read_bytes())
    digest.update(json.dumps([r.model_dump() for r in criterion.config.rubrics], sort_keys=True).encode())
    return digest.hexdigest()[:12]


# -- measuring ----------------------------------------------------------------------------------------------


def agreement(
    human: Sequence[float],
    judge: Sequence[float],
    threshold: float,
    graded: bool,
    samples: Sequence[Sequence[float]] = (),
    levels: int = 5,
) -> Agreement:
    """Agreement of ``judge`` scores with ``human`` ones, item by item (both in [0, 1]).

    Pass/fail is ``score >= threshold`` on both sides. With ``graded`` (the humans gave scores), both sides are
    also rounded to a scale of ``levels`` evenly spaced values for the weighted kappas. A kappa is None when
    both sides gave one and the same verdict (level) to every item: it is 0/0 then, no evidence of agreement.
    ``samples`` holds each item's individual judge scores: self-consistency is the share of items whose
    samples agree on pass/fail and the mean range and standard deviation of their scores (None when every
    item had one sample).
    """
    n = len(human)
    h_pass = [h >= threshold for h in human]
    j_pass = [j >= threshold for j in judge]
    pairs = list(zip(h_pass, j_pass))
    confusion = {
        f"human_{h}": {f"judge_{j}": pairs.count((h == "pass", j == "pass")) for j in ("pass", "fail")}
        for h in ("pass", "fail")
    }
    if n == 0:
        return Agreement(0, None, None, None, None, None, confusion, None)
    scale: list[float] = []
    linear = quadratic = None
    if graded:
        steps = levels - 1
        scale = [i / steps for i in range(levels)]
        h_level = [round(h * steps) for h in human]
        j_level = [round(j * steps) for j in judge]
        if len(set(h_level) | set(j_level)) > 1:
            linear = cohens_kappa(h_level, j_level, "linear", labels=range(levels))
            quadratic = cohens_kappa(h_level, j_level, "quadratic", labels=range(levels))
    rho = spearman(list(human), list(judge)) if n > 1 else math.nan
    return Agreement(
        items=n,
        accuracy=sum(1 for a, b in pairs if a == b) / n,
        # one verdict throughout, from both sides: kappa is 0/0, not agreement (a judge that passes everything
        # would read 1.0 on a set with no failing item and meet any min_agreement)
        kappa=cohens_kappa(h_pass, j_pass) if len(set(h_pass) | set(j_pass)) > 1 else None,
        kappa_linear=linear,
        kappa_quadratic=quadratic,
        spearman=None if math.isnan(rho) else rho,
        confusion=confusion,
        self_consistency=_self_consistency(samples, threshold),
        scale=scale,
    )


def _self_consistency(samples: Sequence[Sequence[float]], threshold: float) -> dict[str, Any] | None:
    repeated = [list(s) for s in samples if len(s) > 1]
    if not repeated:
        return None
    spreads = [max(s) - min(s) for s in repeated]
    stdevs = [math.sqrt(sum((x - sum(s) / len(s)) ** 2 for x in s) / len(s)) for s in repeated]
    unanimous = [all(x >= threshold for x in s) or all(x < threshold for x in s) for s in repeated]
    return {
        "items": len(repeated),
        "samples_per_item": max(len(s) for s in repeated),
        "unanimous_rate": sum(unanimous) / len(repeated),
        "mean_range": sum(spreads) / len(repeated),
        "mean_stdev": sum(stdevs) / len(repeated),
    }


async def _judge(criterion: TemplatedLLMCriterion, items: Sequence[LabelledItem]) -> list[_Judged]:
    results = await asyncio.gather(*(criterion.evaluate(i.execution, i.case) for i in items))
    return [_Judged(i, r) for i, r in zip(items, results)]


def _exclusion(result: CriterionResult) -> str | None:
    """Why a judge result cannot count as a verdict (an error, a skip, the no-provider placeholder)."""
    if result.error is not None:
        return result.error
    if result.skipped:
        return f"not applicable: {result.reason or 'skipped'}"
    if result.reason == NO_PROVIDER_REASON:
        return f"{NO_PROVIDER_REASON}: {result.details.get('problem', '')}".rstrip(": ")
    return None


async def calibrate(
    config: EvalConfig, items: Sequence[LabelledItem], only: Iterable[str] = (), levels: int = 5
) -> list[dict[str, Any]]:
    """Run each LLM-judged criterion of ``config`` on the labelled items; one calibration entry per criterion.

    Judge calls go through one judge runtime with the config's concurrency and retries but without the judge
    cache: a calibration measures the judge as it answers now, not verdicts it gave before.
    """
    from tracegrade.judges.runtime import JudgeRuntime, judge_runtime

    criteria = judged_criteria(config, only)
    runtime = JudgeRuntime.from_config(config.model_copy(update={"judge_cache": False}))
    created = datetime.now(timezone.utc).isoformat(timespec="seconds")
    entries = []
    with judge_runtime(runtime):
        for slot, criterion in criteria:
            mine = [i for i in items if i.criterion in (None, slot, criterion.name)]
            judged = await _judge(criterion, mine)
            entries.append(_entry(slot, criterion, judged, levels, created))
    return entries


def _entry(
    slot: str, criterion: TemplatedLLMCriterion, judged: list[_Judged], levels: int, created: str
) -> dict[str, Any]:
    excluded = [{"id": j.item.item_id, "reason": why} for j in judged if (why := _exclusion(j.result)) is not None]
    kept = [j for j in judged if _exclusion(j.result) is None]
    graded = bool(kept) and all(j.item.graded for j in kept)
    samples = [j.result.details.get("individual_scores", []) for j in kept]
    measured = agreement(
        [j.item.human for j in kept],
        [j.result.score for j in kept],
        criterion.threshold,
        graded,
        samples,
        levels,
    )
    return {
        "criterion": criterion.name,
        "slot": slot,
        "judge_model": criterion.config.judge_model,
        "prompt_version": prompt_version(criterion),
        "threshold": criterion.threshold,
        "num_samples": criterion.config.num_samples,
        "created_at": created,
        "labelled_items": len(judged),
        "excluded": excluded,
        **asdict(measured),
        "results": [
            {
                "id": j.item.item_id,
                "human": j.item.human,
                "judge": j.result.score,
                "agree": (j.item.human >= criterion.threshold) == (j.result.score >= criterion.threshold),
                "samples": j.result.details.get("individual_scores", []),
            }
            for j in kept
        ],
    }


# -- storing and enforcing ----------------------------------------------------------------------------------


def load_calibrations(path: Path) -> list[dict[str, Any]]:
    """The calibration entries stored in ``path`` ([] when there is no such file)."""
    if not path.exists():
        return []
    try:
        data = json.loads(path.read_text("utf-8"))
        entries = data["calibrations"]
        if not isinstance(entries, list):
            raise TypeError("'calibrations' is not a list")
    except (ValueError, KeyError, TypeError) as exc:
        raise CalibrationError(
            f"calibration file {path} is not one `tracegrade calibrate` wrote ({exc}); delete it and calibrate again"
        ) from None
    return [e for e in entries if isinstance(e, dict)]


def save_calibrations(path: Path, new: Sequence[dict[str, Any]]) -> Path:
    """Add ``new`` entries to ``path``, replacing stored ones for the same criterion, judge model and prompt."""
    from tracegrade.models.files import write_text_file

    def key(e: dict[str, Any]) -> tuple[Any, ...]:
        return e.get("criterion"), e.get("judge_model"), e.get("prompt_version")

    replaced = {key(e) for e in new}
    kept = [e for e in load_calibrations(path) if key(e) not in replaced]
    return write_text_file(
        path, json.dumps({"version": FILE_VERSION, "calibrations": [*kept, *new]}, indent=2, default=str) + "\n"
    )


def _problem(criterion: TemplatedLLMCriterion, path: Path, stored: list[dict[str, Any]]) -> str | None:
    """Why ``criterion``'s judge does not meet its ``min_agreement``, or None when it does."""
    model, wanted = criterion.config.judge_model, criterion.config.min_agreement
    fix = f"run `tracegrade calibrate --labels LABELS --config CONFIG --out {path}`"
    mine = [e for e in stored if e.get("criterion") == criterion.name and e.get("judge_model") == model]
    if not mine:
        return f"judge {model!r} has no calibration for {criterion.name} in {path} (min_agreement {wanted:g}); {fix}"
    newest = max(mine, key=lambda e: str(e.get("created_at", "")))
    version = prompt_version(criterion)
    if newest.get("prompt_version") != version:
        return (
            f"judge {model!r} was calibrated for {criterion.name} with prompt version {newest.get('prompt_version')}, "
            f"the prompt is now {version}; {fix}"
        )
    kappa = newest.get("kappa")
    if not isinstance(kappa, int | float) and newest.get("items"):
        verdict = "pass" if newest.get("confusion", {}).get("human_pass", {}).get("judge_pass") else "fail"
        return (
            f"judge {model!r} and the humans gave all {newest.get('items')} items of its calibration for "
            f"{criterion.name} in {path} the same verdict ({verdict}): kappa is undefined, so agreement is not "
            f"shown (min_agreement {wanted:g}); add labelled items the humans judged the other way and {fix}"
        )
    if not isinstance(kappa, int | float):
        return f"judge {model!r} has a calibration for {criterion.name} in {path} with no item judged; {fix}"
    if wanted is not None and kappa < wanted:
        return (
            f"judge {model!r} agrees with human labels on {criterion.name} at kappa {kappa:.3f} over "
            f"{newest.get('items', 0)} items (calibrated {newest.get('created_at')}), below min_agreement {wanted:g}"
        )
    return None


def enforce_calibration(criteria: Sequence[BaseCriterion], config: EvalConfig) -> dict[str, list[str]]:
    """Check every criterion with ``min_agreement`` against the stored calibrations.

    Raises :class:`CalibrationError` listing every shortfall when ``config.calibration`` is ``"fail"``;
    with ``"warn"`` returns the warnings to add to each criterion's results, by criterion name.
    """
    demanding = [c for c in criteria if c.config.min_agreement is not None]
    if not demanding:
        return {}
    path = calibration_path(config)
    stored = load_calibrations(path)
    problems: dict[str, list[str]] = {}
    for c in demanding:
        problem: str | None
        if not isinstance(c, TemplatedLLMCriterion):
            problem = f"min_agreement applies to LLM judges only; {c.name} has no judge (remove it there)"
        else:
            problem = _problem(c, path, stored)
        if problem is not None:
            problems.setdefault(c.name, []).append(f"calibration: {problem}")
    if problems and config.calibration == "fail":
        lines = [f"  {name}: {p}" for name, ps in problems.items() for p in ps]
        raise CalibrationError(
            "the run's judges are not calibrated well enough (set calibration: warn, or --calibration warn, "
            "to grade anyway):\n" + "\n".join(lines)
        )
    return problems
