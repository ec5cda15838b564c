"""Reporter-neutral views of results: statuses, warnings, and tolerant readers of a case's recorded data.

``EvalCaseResult`` list fields are not re-validated on assignment, so a field may hold models, plain
dicts or bare strings; every reader here accepts all three and never raises.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tracegrade.models.expectations import XFAILED, XPASSED, case_expectation, xfail_reason
from tracegrade.models.results import CriterionResult, EvalCaseResult, EvalReport, TokenUsage, TrialStats
from tracegrade.reporters.text import message_text, to_json_text

__all__ = [
    "NO_PROVIDER_WARNING",
    "PARTIAL_CREDIT_KEYS",
    "STATUS_ICONS",
    "STATUS_LABELS",
    "LLMOutputView",
    "StepView",
    "ToolCallView",
    "TurnView",
    "case_display_name",
    "case_outcome",
    "case_score",
    "case_status",
    "case_warnings",
    "criterion_status",
    "criterion_warnings",
    "expectation_counts",
    "expectation_note",
    "llm_output_views",
    "message_views",
    "node_visit_names",
    "partial_item_text",
    "run_status",
    "run_trials_text",
    "run_warnings",
    "samples_text",
    "skipped_case_count",
    "split_details",
    "step_views",
    "tool_call_views",
    "trials_text",
    "turn_views",
]

NO_PROVIDER_WARNING = "No LLM provider available"
PARTIAL_CREDIT_KEYS = ("matches", "matched", "missing", "extra")  # trajectory partial-credit details
# xfail/xpass: a case marked metadata.xfail that failed as expected / passed (see case_outcome); pytest's letters
STATUS_LABELS = {
    "pass": "PASS",
    "fail": "FAIL",
    "error": "ERROR",
    "skipped": "SKIPPED",
    "xfail": "XFAIL",
    "xpass": "XPASS",
}
STATUS_ICONS = {"pass": "✓", "fail": "✗", "error": "!", "skipped": "–", "xfail": "x", "xpass": "X"}


def _get(obj: Any, name: str, default: Any = None) -> Any:
    """``obj[name]`` for mappings, ``obj.name`` otherwise, ``default`` when missing or None."""
    value = obj.get(name) if isinstance(obj, Mapping) else getattr(obj, name, None)
    return default if value is None else value


def _first(obj: Any, names: tuple[str, ...], default: Any = None) -> Any:
    return next((v for v in (_get(obj, n) for n in names) if v is not None), default)


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return list(value)
    return [value]


def _as_usage(value: Any) -> TokenUsage | None:
    if isinstance(value, TokenUsage):
        return value
    if isinstance(value, Mapping):
        try:
            return TokenUsage.model_validate(value)
        except ValueError:
            return None
    return None


# --- statuses -----------------------------------------------------------------------------------------


def case_status(result: EvalCaseResult) -> str:
    """``"error"`` (the run failed), ``"fail"``, ``"skipped"`` (every criterion was skipped) or ``"pass"``.

    The summary counts an all-skipped case as passed; reporters still show it as skipped.
    """
    if result.error is not None:
        return "error"
    if not result.passed:
        return "fail"
    if result.criterion_results and all(c.skipped for c in result.criterion_results):
        return "skipped"
    return "pass"


def case_outcome(result: EvalCaseResult) -> str:
    """:func:`case_status`, except for a case marked ``metadata.xfail``: ``"xfail"`` when it failed or errored (as
    expected), ``"xpass"`` when it passed (which fails the run). What reporters show as a case's status."""
    return case_expectation(result) or case_status(result)


def expectation_note(result: EvalCaseResult) -> str | None:
    """Why a case marked ``metadata.xfail`` is reported as it is (None for an unmarked case), with the reason given."""
    expected = case_expectation(result)
    if expected is None:
        return None
    reason = xfail_reason(result.metadata) or "no reason given"
    return f"expected to fail: {reason}" if expected == XFAILED else f"unexpected pass (marked xfail: {reason})"


def expectation_counts(report: EvalReport) -> tuple[int, int]:
    """``(expected failures, unexpected passes)`` among the report's cases."""
    outcomes = [case_expectation(r) for r in report.results]
    return outcomes.count(XFAILED), outcomes.count(XPASSED)


def skipped_case_count(report: EvalReport) -> int:
    """Cases counted as passed although every one of their criteria was skipped."""
    return sum(1 for r in report.results if case_status(r) == "skipped")


def criterion_status(result: CriterionResult) -> str:
    """``"skipped"``, ``"error"``, ``"pass"`` or ``"fail"`` — a skipped criterion is never a pass."""
    if result.skipped:
        return "skipped"
    if result.error is not None:
        return "error"
    return "pass" if result.passed else "fail"


def run_status(report: EvalReport) -> str:
    """``ALL PASSED``, ``ALL FAILED``, ``PARTIAL``, or ``NO CASES`` for a report without cases (nothing failed)."""
    if not report.results:
        return "NO CASES"
    if report.summary.pass_rate == 1.0:
        return "ALL PASSED"
    if report.summary.pass_rate == 0.0:
        return "ALL FAILED"
    return "PARTIAL"


def case_display_name(result: EvalCaseResult) -> str:
    return result.name or result.eval_id


def trials_text(stats: TrialStats | None) -> str:
    """A criterion's or a case's repeated trials in words; "" for a single trial (reports look as before)."""
    if stats is None:
        return ""
    k = stats.trials
    text = (
        f"{stats.passed}/{k} trials passed, mean {stats.mean:.2f} (95% {stats.ci_low:.2f}-{stats.ci_high:.2f}), "
        f"pass@{k} {stats.pass_at_k:g}, pass^{k} {stats.pass_hat_k:g}"
    )
    return text + (", flaky" if stats.flaky else "")


def samples_text(result: CriterionResult) -> str:
    """How far a judge's samples disagree on this criterion ("" for one sample or a criterion without a judge)."""
    spread = result.details.get("sample_spread") if isinstance(result.details, Mapping) else None
    if not isinstance(spread, Mapping):
        return ""
    text = f"{spread.get('samples')} judge samples, range {_two_places(spread.get('range', 0))}, "
    text += f"sd {_two_places(spread.get('stdev', 0))}"
    return text + (", split on pass/fail" if spread.get("split") else "")


def _two_places(value: Any) -> str:
    """A number to two decimals, ``n/a`` for none; anything else as it is. Details are free-form JSON: a saved
    report holds a NaN as ``null`` (earlier versions: the string "nan"), and a custom criterion may put anything
    under ``sample_spread``."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{value:.2f}"
    return "n/a" if value is None else str(value)


def run_trials_text(report: EvalReport) -> str:
    """The run's trials, pass-rate interval and flaky cases; "" when no case ran several trials."""
    s = report.summary
    if s.pass_rate_ci is None:
        return ""
    low, high = s.pass_rate_ci
    # offline, each case has as many trials as recorded traces it matched: say so when they differ
    counts = {r.trial_stats.trials if r.trial_stats is not None else 1 for r in report.results}
    per_case = f"{min(counts)}-{max(counts)}" if len(counts) > 1 else f"{s.num_runs}"
    return f"{per_case} per case, pass rate 95% interval {low:.1%}-{high:.1%}, {s.flaky_cases} flaky case(s)"


def case_score(result: EvalCaseResult) -> float | None:
    """Mean score of the criteria that ran (skipped ones excluded); None when none ran."""
    scored = [c.score for c in result.criterion_results if not c.skipped]
    return sum(scored) / len(scored) if scored else None


# --- warnings -----------------------------------------------------------------------------------------


def criterion_warnings(result: CriterionResult) -> list[str]:
    """The criterion's warnings, plus the judge placeholder (reason "No LLM provider available")."""
    warnings = [str(w) for w in result.warnings]
    reason = result.reason
    already_said = any(w.startswith(NO_PROVIDER_WARNING) for w in warnings)
    if isinstance(reason, str) and reason.startswith(NO_PROVIDER_WARNING) and not already_said:
        warnings.append(f"{reason} (score {result.score:.2f} is a placeholder, not a judgement)")
    return warnings


def case_warnings(result: EvalCaseResult) -> list[str]:
    """``"<criterion>: <warning>"`` for every warning of the case's criteria."""
    return [f"{c.criterion}: {w}" for c in result.criterion_results for w in criterion_warnings(c)]


def run_warnings(report: EvalReport) -> list[str]:
    """Run-level warnings: that the run is incomplete (``metadata["incomplete"]``, set by a stopped live run or
    pytest session), the summary's, plus any criterion warning the summary does not already carry."""
    incomplete = report.metadata.get("incomplete")
    warnings = [f"incomplete: {incomplete}; the counts cover only the cases that finished"] if incomplete else []
    warnings += [str(w) for w in report.summary.warnings]
    counts: dict[str, int] = {}
    for result in report.results:
        for warning in case_warnings(result):
            counts[warning] = counts.get(warning, 0) + 1
    for warning, n in counts.items():
        if not any(w.startswith(warning) for w in warnings):
            warnings.append(f"{warning} ({n} case{'s' if n != 1 else ''})")
    return warnings


def split_details(details: Any) -> tuple[str | None, dict[str, list[Any]], dict[str, Any]]:
    """``(reason, partial_credit, other)``: the reason text, the matched/missing/extra lists, the rest."""
    if not isinstance(details, Mapping):
        return None, {}, ({"details": details} if details else {})
    reason = details.get("reason")
    partial = {k: _as_list(details[k]) for k in PARTIAL_CREDIT_KEYS if k in details}
    rest = {k: v for k, v in details.items() if k != "reason" and k not in partial}
    return (str(reason) if reason is not None else None), partial, rest


def partial_item_text(item: Any) -> str:
    """One partial-credit entry as a line: ``name {args} (expected #i ↔ actual #j) — reason``."""
    if not isinstance(item, Mapping) or "name" not in item:
        return to_json_text(item)
    parts = [str(item["name"])]
    if item.get("args"):
        parts.append(to_json_text(item["args"]))
    positions = [f"{side} #{item[f'{side}_index']}" for side in ("expected", "actual") if f"{side}_index" in item]
    if positions:
        parts.append(f"({' ↔ '.join(positions)})")
    if item.get("reason"):
        parts.append(f"— {item['reason']}")
    return " ".join(parts)


# --- recorded execution data --------------------------------------------------------------------------


@dataclass(frozen=True)
class ToolCallView:
    name: str
    call_id: str | None = None
    args: Any = field(default_factory=dict)
    result: Any = None
    error: str | None = None
    args_captured: bool = True
    result_captured: bool = True
    duration_seconds: float | None = None

    @property
    def args_text(self) -> str:
        """Compact JSON of the arguments, ``""`` when there are none, ``not captured`` when unknown."""
        if not self.args_captured:
            return "not captured"
        return to_json_text(self.args) if self.args else ""


def tool_call_views(items: Any) -> list[ToolCallView]:
    views = []
    for item in _as_list(items):
        if isinstance(item, str):
            views.append(ToolCallView(name=item))
            continue
        views.append(
            ToolCallView(
                name=str(_first(item, ("name", "tool_name"), "?")),
                call_id=_first(item, ("call_id", "id")),
                args=_first(item, ("args", "arguments"), {}),
                result=_get(item, "result"),
                error=_get(item, "error"),
                args_captured=bool(_get(item, "args_captured", True)),
                result_captured=bool(_get(item, "result_captured", True)),
                duration_seconds=_get(item, "duration_seconds"),
            )
        )
    return views


@dataclass(frozen=True)
class StepView:
    kind: str  # "node", "tool", "conditional" (a routing decision), "message" or "step" when unknown
    name: str
    args: Any = None
    metadata: dict[str, Any] = field(default_factory=dict)
    timestamp: float | None = None


def step_views(items: Any) -> list[StepView]:
    views = []
    for item in _as_list(items):
        if isinstance(item, str):
            views.append(StepView(kind="step", name=item))
            continue
        kind = _first(item, ("step_type", "type", "kind"), "step")
        metadata = _get(item, "metadata", {})
        views.append(
            StepView(
                kind=str(getattr(kind, "value", kind)),
                name=str(_get(item, "name", "?")),
                args=_get(item, "args"),
                metadata=dict(metadata) if isinstance(metadata, Mapping) else {"metadata": metadata},
                timestamp=_get(item, "timestamp"),
            )
        )
    return views


def node_visit_names(items: Any) -> list[str]:
    return [item if isinstance(item, str) else str(_get(item, "name", item)) for item in _as_list(items)]


@dataclass(frozen=True)
class TurnView:
    index: int
    user: str
    agent: str
    tool_names: list[str]
    nodes: list[str]
    duration_seconds: float | None
    token_usage: TokenUsage | None


def turn_views(items: Any) -> list[TurnView]:
    views = []
    for i, item in enumerate(_as_list(items)):
        if not isinstance(item, Mapping) and not hasattr(item, "__dict__"):
            views.append(TurnView(i, "", message_text(item), [], [], None, None))
            continue
        index = _first(item, ("turn_index", "turn", "index"), i)
        views.append(
            TurnView(
                index=index if isinstance(index, int) else i,
                user=message_text(_first(item, ("user_input", "user_query", "user"), "")),
                agent=message_text(_first(item, ("agent_response", "response", "agent"), "")),
                tool_names=[v.name for v in tool_call_views(_get(item, "tool_calls", []))],
                nodes=node_visit_names(_get(item, "node_visits", [])),
                duration_seconds=_get(item, "duration_seconds"),
                token_usage=_as_usage(_get(item, "token_usage")),
            )
        )
    return views


def message_views(items: Any) -> list[tuple[str, str]]:
    """``(role, text)`` per message; list-shaped content is flattened to its text parts."""
    views = []
    for item in _as_list(items):
        if isinstance(item, Mapping) or hasattr(item, "content"):
            views.append((str(_get(item, "role", "")), message_text(_get(item, "content", ""))))
        else:
            views.append(("", message_text(item)))
    return views


@dataclass(frozen=True)
class LLMOutputView:
    node: str
    model: str | None
    text: str
    tool_names: list[str]
    token_usage: TokenUsage | None
    is_final: bool = False


def llm_output_views(result: EvalCaseResult) -> list[LLMOutputView]:
    """Per-node LLM output: the node details (one per LLM call) or, without them, the node responses."""
    details = _as_list(result.node_details)
    if details:
        return [
            LLMOutputView(
                node=str(_first(d, ("node_name", "node"), "")),
                model=_get(d, "model"),
                text=message_text(_first(d, ("response_text", "output_text"), "")),
                tool_names=[v.name for v in tool_call_views(_get(d, "tool_calls", []))],
                token_usage=_as_usage(_get(d, "token_usage")),
            )
            for d in details
        ]
    return [
        LLMOutputView(
            node=str(_first(r, ("node_name", "node"), "")),
            model=_get(r, "model"),
            text=message_text(_first(r, ("response_text", "output"), "")),
            tool_names=[str(n) for n in _as_list(_get(r, "tool_call_names", []))],
            token_usage=_as_usage(_get(r, "token_usage")),
            is_final=bool(_get(r, "is_final", False)),
        )
        for r in _as_list(result.node_responses)
    ]
