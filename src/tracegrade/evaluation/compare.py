"""Comparing a candidate run with a baseline honestly: paired statistics, flipped cases and a gate verdict.

Cases are paired by eval id (only cases both runs graded count: not one on which a criterion errored in either run,
which has no verdict). For the case pass rate and for each
criterion's pass rate the test is an exact McNemar test on the cases whose verdict flipped; for a
criterion with graded (non-0/1) scores, also a paired sign-flip permutation test of the mean score delta
(exact up to 20 cases that changed; the mean delta's interval is a paired bootstrap). All these tests form one
family whose p-values are Holm-adjusted, so grading more criteria does not make a false
alarm more likely. The verdict is ``fail`` only for a significant regression (or one larger than
``max_drop``, or with ``strict`` any case that went from pass to fail), ``inconclusive`` when the runs
cannot support a verdict (and why), ``pass`` otherwise. A significant improvement never changes the verdict; the
reasons say it after what decided the verdict.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

from tracegrade.errors import InvalidValueError
from tracegrade.evaluation.run_diff import first_divergence, results_by_id
from tracegrade.evaluation.run_outcomes import Case, Run
from tracegrade.evaluation.statistics import (
    holm_adjust,
    mcnemar_exact,
    min_mcnemar_p,
    paired_permutation_p,
    percentile_bootstrap,
)

__all__ = ["CASES", "MARKDOWN_FLIPS", "Flip", "MetricComparison", "RunComparison", "compare_runs", "empty_runs"]

CASES = "cases"  # the name of the case pass-rate metric (criteria have their own names)
MARKDOWN_FLIPS = 50  # flipped cases a summary lists (Markdown, the pytest plugin's terminal): regressions first

Verdict = Literal["pass", "fail", "inconclusive"]


@dataclass(frozen=True)
class MetricComparison:
    """One metric (the case pass rate, or one criterion) over the paired cases.

    ``delta``, ``low`` and ``high`` are the candidate's mean minus the baseline's, with its paired bootstrap
    interval at ``1 - alpha``: of the score for a criterion, of the pass fraction for :data:`CASES`.
    """

    name: str
    pairs: int
    pass_rate_baseline: float
    pass_rate_candidate: float
    pass_to_fail: int
    fail_to_pass: int
    mcnemar_p: float
    mean_baseline: float
    mean_candidate: float
    delta: float
    low: float
    high: float
    permutation_p: float | None  # None when the scores are pass/fail only (McNemar already tests them)
    mcnemar_p_adjusted: float = 1.0
    permutation_p_adjusted: float | None = None
    significant_regression: bool = False
    exceeds_max_drop: bool = False
    significant_improvement: bool = False

    @property
    def pass_rate_delta(self) -> float:
        return self.pass_rate_candidate - self.pass_rate_baseline


@dataclass(frozen=True)
class Flip:
    """A case whose verdict changed, the criteria that changed with it and where the trajectories part."""

    eval_id: str
    name: str
    direction: Literal["pass->fail", "fail->pass"]
    criteria: list[str]
    divergence: str | None


@dataclass
class RunComparison:
    """The typed result of :func:`compare_runs`; ``verdict`` and ``reasons`` say what a gate should do."""

    baseline: str
    candidate: str
    alpha: float
    max_drop: float | None
    strict: bool
    paired_cases: int
    only_baseline: list[str]
    only_candidate: list[str]
    metrics: list[MetricComparison]
    flips: list[Flip]
    verdict: Verdict
    reasons: list[str] = field(default_factory=list)
    ungraded: list[str] = field(default_factory=list)  # shared cases left out: a criterion errored on them

    @property
    def cases(self) -> MetricComparison:
        """The case pass-rate comparison (always the first metric)."""
        return self.metrics[0]

    @property
    def criteria(self) -> list[MetricComparison]:
        return self.metrics[1:]

    @property
    def regressions(self) -> list[MetricComparison]:
        return [m for m in self.metrics if m.significant_regression or m.exceeds_max_drop]

    def listed_flips(self) -> tuple[list[Flip], str | None]:
        """The flipped cases a summary lists: regressions first, at most :data:`MARKDOWN_FLIPS` (GitHub refuses a
        step summary over 1 MiB, and 50,000 rows help no reviewer); and when some are left out, a sentence saying
        how many of each direction, to which the summary adds where to see them all."""
        shown = sorted(self.flips, key=lambda f: f.direction != "pass->fail")[:MARKDOWN_FLIPS]
        if len(shown) == len(self.flips):
            return shown, None
        worse = sum(f.direction == "pass->fail" for f in self.flips)
        return shown, (
            f"The first {len(shown)} of {len(self.flips)} flipped cases ({worse} pass->fail, "
            f"{len(self.flips) - worse} fail->pass)"
        )

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        for metric in data["metrics"]:
            metric["pass_rate_delta"] = metric["pass_rate_candidate"] - metric["pass_rate_baseline"]
        return data

    def to_markdown(self) -> str:
        """A summary for a pull-request comment: the verdict, why, the metrics table and the flips."""
        icon = {"pass": "✅", "fail": "❌", "inconclusive": "⚠️"}[self.verdict]
        lines = [
            f"### {icon} tracegrade gate: {self.verdict}",
            "",
            f"Baseline `{self.baseline}` → candidate `{self.candidate}`: {self.paired_cases} paired cases, "
            f"alpha {self.alpha:g}" + (f", max drop {self.max_drop:g}" if self.max_drop is not None else "") + ".",
        ]
        if self.reasons:
            lines += ["", *(f"- {_markdown(r)}" for r in self.reasons)]
        lines += [
            "",
            f"| metric | pass rate | flips (↓/↑) | McNemar p (adj.) | mean | Δ [{1 - self.alpha:.0%} interval] | |",
            "|---|---|---|---|---|---|---|",
        ]
        for m in self.metrics:
            mark = "❌" if m.significant_regression or m.exceeds_max_drop else "⬆️" if m.significant_improvement else ""
            lines.append(
                f"| {_markdown(m.name, cell=True)} | {m.pass_rate_baseline:.0%} → {m.pass_rate_candidate:.0%} | "
                f"{m.pass_to_fail}/{m.fail_to_pass} | {m.mcnemar_p_adjusted:.3g} | "
                f"{m.mean_baseline:.3f} → {m.mean_candidate:.3f} | {m.delta:+.3f} [{m.low:+.3f}, {m.high:+.3f}] | "
                f"{mark} |"
            )
        if self.flips:
            shown, cut = self.listed_flips()
            lines += ["", "| case | flip | criteria | where the trajectories part |", "|---|---|---|---|"]
            for f in shown:
                cells = (f.name or f.eval_id, f.direction, ", ".join(f.criteria), f.divergence or "same trajectory")
                lines.append("| " + " | ".join(_markdown(cell, cell=True) for cell in cells) + " |")
            if cut is not None:
                lines += ["", f"{cut}; `--format json` lists them all."]
        if self.only_baseline or self.only_candidate:
            lines += [
                "",
                f"Not compared: {len(self.only_baseline)} case(s) only in the baseline, "
                f"{len(self.only_candidate)} only in the candidate.",
            ]
        return "\n".join(lines) + "\n"


def _markdown(text: str, *, cell: bool = False) -> str:
    """Text from eval sets and traces (case, criterion and tool names, arguments) as literal Markdown on one line.
    GitHub renders HTML in a comment: ``<!--`` in a case name would hide the rest of the summary, ``<details>``
    fold it: a ``<`` that would start a tag or a comment is written ``&lt;`` (``p < 0.05`` stays as it is). A line
    break would end a list item or a table row, and in a table cell ``|`` starts another cell."""
    text = _TAG_START.sub("&lt;", " ".join(text.splitlines()))
    return text.replace("|", "\\|") if cell else text


_TAG_START = re.compile(r"<(?=[A-Za-z!/?])")


def compare_runs(
    baseline: Run,
    candidate: Run,
    *,
    alpha: float = 0.05,
    max_drop: float | None = None,
    strict: bool = False,
    baseline_name: str = "baseline",
    candidate_name: str = "candidate",
    resamples: int = 2000,
    seed: int = 0,
) -> RunComparison:
    """Compare ``candidate`` with ``baseline`` case by case and decide whether it regressed.

    ``max_drop`` (a fraction, e.g. 0.05) fails the comparison on an observed drop of the case pass rate or
    of a criterion's mean score larger than it, significant or not. Raises ``ValueError`` for an ``alpha``
    outside (0, 1) or a negative ``max_drop``, InvalidValueError for a run holding an eval id twice.
    """
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be between 0 and 1 (exclusive), got {alpha}")
    if max_drop is not None and max_drop < 0:
        raise ValueError(f"max_drop must be a non-negative fraction, got {max_drop}")
    by_base = results_by_id(baseline, baseline_name)
    by_cand = results_by_id(candidate, candidate_name)
    names = (baseline_name, candidate_name)
    shared = [(by_base[k], by_cand[k]) for k in by_base if k in by_cand]
    # a criterion that errored (its judge failed, it lacked a schema) gave no verdict: that case is not compared, or
    # a judge outage in one run would read as the agent's regression
    ungraded = {a.eval_id: why for a, b in shared if (why := _grading_error((a, b), names)) is not None}
    paired = [(a, b) for a, b in shared if a.eval_id not in ungraded]
    confidence = 1 - alpha
    metrics = [_metric(CASES, [(_case_pass(a), _case_pass(b), _case_score(a), _case_score(b)) for a, b in paired])]
    metrics[0] = _with_delta(metrics[0], _case_deltas(paired), confidence, resamples, seed, test=False)
    for name in _criterion_names(paired):
        rows = _criterion_rows(paired, name, (baseline_name, candidate_name))
        if not rows:
            continue
        metric = _metric(name, rows)
        graded = any(s not in (0.0, 1.0) for _, _, sa, sb in rows for s in (sa, sb))
        deltas = [sb - sa for _, _, sa, sb in rows]
        metrics.append(_with_delta(metric, deltas, confidence, resamples, seed, test=graded))
    metrics = _judge(metrics, alpha, max_drop)
    flips = _flips(paired)
    missing = [k for k in by_base if k not in by_cand]
    unsure = _coverage_doubts(baseline, candidate, names, missing)
    if ungraded:
        first, why = next(iter(ungraded.items()))
        unsure.append(
            f"{len(ungraded)} case(s) in both runs are not compared: a criterion errored on them (first {first!r}: "
            f"{why}), and an error is no verdict on the agent; fix the cause and grade them again"
        )
    elif not paired:
        unsure.append(_nothing_paired(baseline, candidate, names))
    verdict, reasons = _decide(metrics, flips, len(paired), alpha, max_drop, strict, unsure)
    # improvements never change the verdict (the gate is about regressions), but a pass over a candidate that
    # fixed every case should say so
    reasons += [_significant(m, alpha, worse=False) for m in metrics if m.significant_improvement]
    return RunComparison(
        baseline=baseline_name,
        candidate=candidate_name,
        alpha=alpha,
        max_drop=max_drop,
        strict=strict,
        paired_cases=len(paired),
        only_baseline=missing,
        only_candidate=[k for k in by_cand if k not in by_base],
        ungraded=list(ungraded),
        metrics=metrics,
        flips=flips,
        verdict=verdict,
        reasons=reasons,
    )


Row = tuple[bool, bool, float, float]  # passed in baseline, in candidate; score in baseline, in candidate


def _case_pass(r: Case) -> bool:
    return r.passed and not r.is_error


def _case_score(r: Case) -> float:
    """The case's pass fraction: over its trials when it ran several (finer than its one verdict). Counted from the
    trial counts, which are whole numbers: the ``mean`` beside them is the same fraction as a float, which a saved
    report may hold as null (NaN). Counts that do not make a fraction (hand-edited) leave the case's verdict."""
    stats = r.trial_stats
    if stats is not None and 0 <= stats.passed <= stats.trials > 0:
        return stats.passed / stats.trials
    return 1.0 if _case_pass(r) else 0.0


def _grading_error(pair: tuple[Case, Case], names: tuple[str, str]) -> str | None:
    """Why a case both runs hold has no verdict to compare, in words: the first criterion whose grading errored on it
    in either run; None when both graded it. A run without a response (its agent crashed or said nothing) is graded:
    it failed, as the same run graded live fails with the agent's error."""
    for name, result in zip(names, pair):
        failed = next((c for c in result.criterion_results if c.is_grading_error and not c.skipped), None)
        if failed is not None:
            return f"{failed.criterion} errored in {name}: {failed.error}"
    return None


def _case_deltas(paired: list[tuple[Case, Case]]) -> list[float]:
    return [_case_score(b) - _case_score(a) for a, b in paired]


def _criterion_names(paired: list[tuple[Case, Case]]) -> list[str]:
    names: dict[str, None] = {}
    for a, _ in paired:
        names.update((c.criterion, None) for c in a.criterion_results)
    return list(names)


def _criterion_rows(paired: list[tuple[Case, Case]], name: str, runs: tuple[str, str]) -> list[Row]:
    """The cases where both runs graded ``name`` (a skipped criterion is not graded). A score that is not a
    finite number (NaN from a hand-edited report or a custom criterion) is refused: it would make every
    statistic of the criterion NaN and its p-value meaningless (the sign-flip test gave 2.0)."""
    rows = []
    for a, b in paired:
        ca, cb = a.get_criterion_result(name), b.get_criterion_result(name)
        if ca is None or cb is None or ca.skipped or cb.skipped:
            continue
        for run, case, result in ((runs[0], a, ca), (runs[1], b, cb)):
            if not math.isfinite(result.score):
                raise InvalidValueError(
                    f"{run}: case {case.eval_id!r}, criterion {name!r} has score {result.score}, which cannot be "
                    "compared; a score must be a finite number (0 to 1): fix that result or grade the case again"
                )
        rows.append((ca.passed, cb.passed, ca.score, cb.score))
    return rows


def _metric(name: str, rows: list[Row]) -> MetricComparison:
    n = len(rows)
    pass_to_fail = sum(1 for pa, pb, _, _ in rows if pa and not pb)
    fail_to_pass = sum(1 for pa, pb, _, _ in rows if pb and not pa)
    return MetricComparison(
        name=name,
        pairs=n,
        pass_rate_baseline=sum(pa for pa, _, _, _ in rows) / n if n else 0.0,
        pass_rate_candidate=sum(pb for _, pb, _, _ in rows) / n if n else 0.0,
        pass_to_fail=pass_to_fail,
        fail_to_pass=fail_to_pass,
        mcnemar_p=mcnemar_exact(pass_to_fail, fail_to_pass),
        mean_baseline=sum(sa for _, _, sa, _ in rows) / n if n else 0.0,
        mean_candidate=sum(sb for _, _, _, sb in rows) / n if n else 0.0,
        delta=0.0,
        low=0.0,
        high=0.0,
        permutation_p=None,
    )


def _with_delta(
    metric: MetricComparison, deltas: list[float], confidence: float, resamples: int, seed: int, test: bool
) -> MetricComparison:
    """``metric`` with its mean delta and paired bootstrap interval, and when ``test`` the permutation test's
    p-value, which then joins the family of tests."""
    if not deltas:
        return metric
    boot = percentile_bootstrap(deltas, confidence, resamples, seed)
    p = paired_permutation_p(deltas, resamples, seed) if test else None
    return replace(metric, delta=boot.estimate, low=boot.low, high=boot.high, permutation_p=p)


def _judge(metrics: list[MetricComparison], alpha: float, max_drop: float | None) -> list[MetricComparison]:
    """Holm-adjust every test of the family and mark significant regressions and drops past ``max_drop``."""
    tests: list[tuple[int, str, float]] = [(i, "mcnemar", m.mcnemar_p) for i, m in enumerate(metrics)]
    tests += [(i, "permutation", m.permutation_p) for i, m in enumerate(metrics) if m.permutation_p is not None]
    adjusted = holm_adjust([p for _, _, p in tests])
    updates: list[dict[str, Any]] = [{} for _ in metrics]
    for (i, kind, _), p in zip(tests, adjusted):
        updates[i][f"{kind}_p_adjusted"] = p
    judged = []
    for m, update in zip(metrics, updates):
        m = replace(m, **update)
        verdicts_differ = m.mcnemar_p_adjusted < alpha
        scores_differ = m.permutation_p_adjusted is not None and m.permutation_p_adjusted < alpha
        drop = m.pass_rate_delta if m.name == CASES else m.delta
        judged.append(
            replace(
                m,
                significant_regression=(verdicts_differ and m.pass_to_fail > m.fail_to_pass)
                or (scores_differ and m.delta < 0),
                exceeds_max_drop=max_drop is not None and m.pairs > 0 and drop < -max_drop - 1e-12,
                significant_improvement=(verdicts_differ and m.fail_to_pass > m.pass_to_fail)
                or (scores_differ and m.delta > 0),
            )
        )
    return judged


def _flips(paired: list[tuple[Case, Case]]) -> list[Flip]:
    flips = []
    for a, b in paired:
        before, after = _case_pass(a), _case_pass(b)
        if before == after:
            continue
        changed = [
            c.criterion
            for c in a.criterion_results
            if (other := b.get_criterion_result(c.criterion)) is not None
            and not (c.skipped or other.skipped)
            and c.passed == before
            and other.passed == after
        ]
        if b.is_error != a.is_error:
            changed.append("error" if b.is_error else "error cleared")
        direction: Literal["pass->fail", "fail->pass"] = "pass->fail" if before else "fail->pass"
        flips.append(Flip(a.eval_id, b.name or a.name, direction, changed, first_divergence(a, b)))
    return flips


def _significant(m: MetricComparison, alpha: float, *, worse: bool) -> str:
    """``case pass rate regressed significantly: ...`` (``improved`` unless ``worse``) with the numbers that say
    so: the smallest adjusted p-value of the tests that found a change that way."""
    sign = -1 if worse else 1
    p_values = [m.mcnemar_p_adjusted] if (m.fail_to_pass - m.pass_to_fail) * sign > 0 else []
    if m.permutation_p_adjusted is not None and m.delta * sign > 0:
        p_values.append(m.permutation_p_adjusted)
    label = "case pass rate" if m.name == CASES else f"criterion {m.name}"
    change = "regressed" if worse else "improved"
    return (
        f"{label} {change} significantly: pass rate {m.pass_rate_baseline:.0%} → {m.pass_rate_candidate:.0%}, "
        f"mean {m.delta:+.3f} [{m.low:+.3f}, {m.high:+.3f}], adjusted p = {min(p_values):.3g} < {alpha:g}"
    )


def _decide(
    metrics: list[MetricComparison],
    flips: list[Flip],
    pairs: int,
    alpha: float,
    max_drop: float | None,
    strict: bool,
    coverage_doubts: list[str],
) -> tuple[Verdict, list[str]]:
    failing = []
    for m in metrics:
        label = "case pass rate" if m.name == CASES else f"criterion {m.name}"
        if m.significant_regression:
            failing.append(_significant(m, alpha, worse=True))
        if m.exceeds_max_drop:
            drop = m.pass_rate_delta if m.name == CASES else m.delta
            failing.append(f"{label} dropped by {-drop:.3f}, more than --max-drop {max_drop:g}")
    regressed_cases = [f for f in flips if f.direction == "pass->fail"]
    if strict and regressed_cases:
        names = ", ".join(f.eval_id for f in regressed_cases[:5]) + ("…" if len(regressed_cases) > 5 else "")
        failing.append(f"strict: {len(regressed_cases)} case(s) went from pass to fail ({names})")
    if failing:
        return "fail", failing
    doubts = list(coverage_doubts)
    tests = _family_size(metrics)
    if pairs and tests * min_mcnemar_p(pairs) >= alpha:
        # Holm multiplies the smallest p-value of the family by its size: with too few cases for that, even
        # every case going from pass to fail is no significant regression, and "pass" would be a false all-clear.
        needed = _cases_needed(tests, alpha)
        family = f", Holm-adjusted over {tests} tests," if tests > 1 else ""
        doubts.append(
            f"only {pairs} case(s) were graded in both runs: at alpha {alpha:g}{family} an exact McNemar test needs "
            f"at least {needed} paired cases to call any change significant; grade more cases"
        )
    if max_drop is not None and pairs:
        cases = metrics[0]
        if cases.low < -max_drop and not cases.significant_regression:
            doubts.append(
                f"the {1 - alpha:.0%} interval of the pass-rate change [{cases.low:+.3f}, {cases.high:+.3f}] still "
                f"allows a drop larger than --max-drop {max_drop:g}; grade more cases or run more trials"
            )
    if doubts:
        return "inconclusive", doubts
    return "pass", []


def empty_runs(baseline: Run, candidate: Run, names: tuple[str, str]) -> list[str]:
    """The names of the runs without any case result (their grading failed, or their eval set selected nothing):
    told apart from two runs of different eval sets when no case pairs."""
    return [name for name, report in zip(names, (baseline, candidate)) if not report.results]


def _nothing_paired(baseline: Run, candidate: Run, names: tuple[str, str]) -> str:
    """Why no case was graded in both runs, in words."""
    empty = empty_runs(baseline, candidate, names)
    if empty:
        runs = " and ".join(f"the {name} run" for name in empty)
        return f"no case was graded in both runs: {runs} has no case results (did its grading fail?)"
    return "no case was graded in both runs: nothing to compare (are these runs of the same eval set?)"


def _coverage_doubts(baseline: Run, candidate: Run, names: tuple[str, str], missing: list[str]) -> list[str]:
    """Why the paired cases may not stand for the candidate run: a run that was interrupted (its report marked
    ``metadata.incomplete``), or baseline cases the candidate lacks (a case that crashed the harness, was cut
    from the eval set or never ran would otherwise pass the gate unseen)."""
    doubts = [
        f"the {name} run is incomplete ({report.metadata['incomplete']}): only its finished cases are compared"
        for name, report in zip(names, (baseline, candidate))
        if report.metadata.get("incomplete")
    ]
    if missing and len(missing) < len(baseline.results):  # none paired at all has its own reason (_decide)
        shown = ", ".join(missing[:5]) + ("…" if len(missing) > 5 else "")
        base, cand = _run_label("baseline", names[0]), _run_label("candidate", names[1])
        doubts.append(
            f"{len(missing)} case(s) of {base} are missing from {cand} ({shown}) and are not compared: grade them "
            f"in the candidate run, or take a baseline of the current eval set"
        )
    return doubts


def _run_label(role: str, name: str) -> str:
    """``the baseline``, or ``baseline main`` when the run has a name of its own."""
    return f"the {role}" if name == role else f"{role} {name}"


def _family_size(metrics: list[MetricComparison]) -> int:
    """How many tests :func:`_judge` Holm-adjusted together: a McNemar test per metric, a permutation test per
    graded criterion."""
    return len(metrics) + sum(m.permutation_p is not None for m in metrics)


def _cases_needed(tests: int, alpha: float) -> int:
    """The fewest paired cases with which a family of ``tests`` Holm-adjusted tests can reach ``alpha``: the
    smallest exact p-value halves with each case, so this ends (by 1100 cases it is 0.0)."""
    needed = 1
    while tests * min_mcnemar_p(needed) >= alpha:
        needed += 1
    return needed
