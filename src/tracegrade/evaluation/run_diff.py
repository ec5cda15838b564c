"""Comparing two grading runs: per case and criterion what regressed, what improved, what changed in the trajectory."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tracegrade.errors import InvalidValueError
from tracegrade.evaluation.run_outcomes import Call, Case, Criterion, Run
from tracegrade.models.json_values import json_equal

__all__ = ["KINDS", "CaseDiff", "CriterionChange", "RunDiff", "diff_reports", "first_divergence", "results_by_id"]

_EPS = 1e-9


@dataclass
class CriterionChange:
    criterion: str
    score_a: float | None
    score_b: float | None
    passed_a: bool | None
    passed_b: bool | None
    skipped_a: bool = False
    skipped_b: bool = False
    # why the criterion errored in A (its judge failed...): None when it gave a verdict there or did not apply
    error_a: str | None = None
    error_b: str | None = None

    @property
    def errored(self) -> bool:
        return self.error_a is not None or self.error_b is not None

    @property
    def kind(self) -> str:
        """``errored``, ``regressed``, ``improved``, ``unchanged``, ``added`` or ``removed``. An error (a judge that
        failed) is no verdict: a criterion that errored in either run is ``errored``, whatever its placeholder score
        of 0 says. A skipped criterion (it did not apply) gave no verdict either: one graded in A and skipped in B
        is ``removed``, the other way ``added``; its placeholder score of 0 is no regression (the paired statistics
        leave such cases out too)."""
        if self.errored:
            return "errored"
        if self.score_a is None or (self.skipped_a and not self.skipped_b):
            return "added"
        if self.score_b is None or (self.skipped_b and not self.skipped_a):
            return "removed"
        if self.skipped_a and self.skipped_b:
            return "unchanged"
        if self.passed_a and not self.passed_b:
            return "regressed"
        if self.passed_b and not self.passed_a:
            return "improved"
        if self.score_b < self.score_a - _EPS:
            return "regressed"
        if self.score_b > self.score_a + _EPS:
            return "improved"
        return "unchanged"


@dataclass
class CaseDiff:
    eval_id: str
    name: str
    status_a: str | None
    status_b: str | None
    criteria: list[CriterionChange] = field(default_factory=list)
    trajectory_changes: list[str] = field(default_factory=list)

    @property
    def kind(self) -> str:
        """``added`` or ``removed`` (a case in one run only), ``errored`` when a criterion errored on it in either
        run (no verdict to compare: the paired statistics leave it out too), else ``regressed``, ``improved``,
        ``changed`` (the trajectory only) or ``unchanged``."""
        if self.status_a is None:
            return "added"
        if self.status_b is None:
            return "removed"
        if any(c.errored for c in self.criteria):
            return "errored"
        kinds = {c.kind for c in self.criteria}
        if (self.status_a == "pass" and self.status_b in ("fail", "error")) or "regressed" in kinds:
            return "regressed"
        if (self.status_b == "pass" and self.status_a in ("fail", "error")) or "improved" in kinds:
            return "improved"
        return "changed" if self.trajectory_changes else "unchanged"


KINDS = ("regressed", "improved", "changed", "unchanged", "added", "removed", "errored")  # of a case, as counted


@dataclass
class RunDiff:
    run_a: str
    run_b: str
    cases: list[CaseDiff]

    def count(self, kind: str) -> int:
        return sum(1 for c in self.cases if c.kind == kind)

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_a": self.run_a,
            "run_b": self.run_b,
            "summary": {k: self.count(k) for k in KINDS},
            "cases": [
                {
                    "eval_id": c.eval_id,
                    "name": c.name,
                    "kind": c.kind,
                    "status_a": c.status_a,
                    "status_b": c.status_b,
                    "trajectory_changes": c.trajectory_changes,
                    "criteria": [
                        {
                            "criterion": x.criterion,
                            "kind": x.kind,
                            "score_a": x.score_a,
                            "score_b": x.score_b,
                            "passed_a": x.passed_a,
                            "passed_b": x.passed_b,
                            "skipped_a": x.skipped_a,
                            "skipped_b": x.skipped_b,
                            "error_a": x.error_a,
                            "error_b": x.error_b,
                        }
                        for x in c.criteria
                    ],
                }
                for c in self.cases
            ],
        }


def _status(r: Case | None) -> str | None:
    if r is None:
        return None
    return "error" if r.is_error else "pass" if r.passed else "fail"


def _trajectory_changes(a: Case, b: Case) -> list[str]:
    changes = []
    calls_a: Sequence[Call] = a.actual_tool_calls
    calls_b: Sequence[Call] = b.actual_tool_calls
    tools_a = [t.name for t in calls_a]
    tools_b = [t.name for t in calls_b]
    if tools_a != tools_b:
        changes.append(f"tool calls: {tools_a} -> {tools_b}")
    else:
        for i, (x, y) in enumerate(zip(calls_a, calls_b), 1):  # counted from 1, as below
            if not json_equal(x.args, y.args):
                changes.append(f"tool call {i} ({x.name}) arguments: {x.args} -> {y.args}")
    if a.node_visits != b.node_visits:
        changes.append(f"node order: {a.node_visits} -> {b.node_visits}")
    if a.actual_response != b.actual_response:
        changes.append(f"final response changed: {_short(a.actual_response)!r} -> {_short(b.actual_response)!r}")
    return changes


def first_divergence(a: Case, b: Case) -> str | None:
    """Where B's trajectory first leaves A's, in words ("call 3: search(q=a) became search(q=b)"); None
    when the tool calls, the node order and the final response are all the same."""
    calls_a, calls_b = a.actual_tool_calls, b.actual_tool_calls
    for i in range(max(len(calls_a), len(calls_b))):
        x = calls_a[i] if i < len(calls_a) else None
        y = calls_b[i] if i < len(calls_b) else None
        if x is None:
            return f"call {i + 1}: {_call(calls_b[i])} was added"
        if y is None:
            return f"call {i + 1}: {_call(x)} was dropped"
        if x.name != y.name or not json_equal(x.args, y.args):
            return f"call {i + 1}: {_call(x)} became {_call(y)}"
    for i in range(max(len(a.node_visits), len(b.node_visits))):
        x_node = a.node_visits[i] if i < len(a.node_visits) else "(nothing)"
        y_node = b.node_visits[i] if i < len(b.node_visits) else "(nothing)"
        if x_node != y_node:
            return f"step {i + 1}: node {x_node} became {y_node}"
    if a.actual_response != b.actual_response:
        return f"final response: {_short(a.actual_response)!r} became {_short(b.actual_response)!r}"
    return None


def _call(call: Call) -> str:
    """``name(key=value, ...)``: strings bare, other values as compact JSON."""
    shown = ", ".join(f"{k}={v if isinstance(v, str) else json.dumps(v, default=str)}" for k, v in call.args.items())
    return _short(f"{call.name}({shown})")


def _short(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def results_by_id(report: Run, run: str) -> dict[str, Case]:
    """``report``'s case results by eval id, in its order. Two runs are compared case by case, paired by eval id:
    a run (``run`` names it) holding one eval id twice has no one result to pair, so it is refused, naming the
    ids. An eval set cannot hold an id twice, and repeated trials are combined into one result, so such a report
    was put together some other way (two reports merged by hand)."""
    by_id: dict[str, Case] = {}
    repeated: dict[str, int] = {}
    for result in report.results:
        if result.eval_id in by_id:
            repeated[result.eval_id] = repeated.get(result.eval_id, 1) + 1
        by_id[result.eval_id] = result
    if repeated:
        shown = ", ".join(f"{eval_id!r} ({n} results)" for eval_id, n in list(repeated.items())[:5])
        more = f" and {len(repeated) - 5} more" if len(repeated) > 5 else ""
        raise InvalidValueError(
            f"{run} has more than one result for {len(repeated)} eval id(s): {shown}{more}; cases are paired by eval "
            "id, so each must appear once: keep one result per case (or grade the eval set again)"
        )
    return by_id


def _error(result: Criterion | None) -> str | None:
    """Why ``result`` has no verdict: its grading error, unless it was skipped (it did not apply, so nothing
    failed); a run that recorded no response has a verdict (it failed), as ``compare_runs`` reads it too."""
    return result.error if result is not None and not result.skipped and result.is_grading_error else None


def diff_reports(a: Run, b: Run, run_a: str = "A", run_b: str = "B") -> RunDiff:
    """Case by case (matched by eval id, in A's order then B's new cases); a run holding an eval id twice is
    refused (see :func:`results_by_id`)."""
    by_a = results_by_id(a, run_a)
    by_b = results_by_id(b, run_b)
    order = list(by_a) + [k for k in by_b if k not in by_a]
    cases = []
    for eval_id in order:
        ra, rb = by_a.get(eval_id), by_b.get(eval_id)
        crit_a = {c.criterion: c for c in ra.criterion_results} if ra else {}
        crit_b = {c.criterion: c for c in rb.criterion_results} if rb else {}
        names = list(crit_a) + [k for k in crit_b if k not in crit_a]
        criteria = [
            CriterionChange(
                n,
                crit_a[n].score if n in crit_a else None,
                crit_b[n].score if n in crit_b else None,
                crit_a[n].passed if n in crit_a else None,
                crit_b[n].passed if n in crit_b else None,
                n in crit_a and crit_a[n].skipped,
                n in crit_b and crit_b[n].skipped,
                _error(crit_a.get(n)),
                _error(crit_b.get(n)),
            )
            for n in names
        ]
        traj = _trajectory_changes(ra, rb) if ra and rb else []
        cases.append(CaseDiff(eval_id, (rb or ra).name, _status(ra), _status(rb), criteria, traj))  # type: ignore[union-attr]
    return RunDiff(run_a, run_b, cases)
