"""Readable failure messages: why a case or a criterion failed, from the details the criteria record.

A failing assertion in a test must say what went wrong without opening a report: for the trajectory
criteria the missing, extra and mismatched calls (with the argument difference), for a judge its
reasoning, for a limit the value that exceeded it, and the reason every criterion records.

pytest prints these messages to the terminal as they are, and they quote what agents, tools and eval sets say:
control characters (an ESC that clears the screen or recolours the rest of the run), lone surrogates and bidi
overrides are shown as visible escapes (:func:`~tracegrade.reporters.text.clean_text`), as the reports show them.
"""

from __future__ import annotations

import json
from typing import Any

from tracegrade.models.results import CriterionResult, EvalCaseResult, EvalReport
from tracegrade.reporters.text import clean_text, one_line

__all__ = ["explain_case", "explain_criterion", "explain_report"]

_MAX_VALUE_CHARS = 120
_MAX_ITEMS = 8
# detail keys that name a limit or what exceeded it (budget-style criteria)
_LIMIT_WORDS = ("budget", "limit", "exceeded", "maximum", "max_")


def _short(value: Any) -> str:
    """``value`` as compact JSON (so a string shows its quotes), cut to a readable length."""
    text = json.dumps(value, ensure_ascii=False, default=str, sort_keys=True)
    return text if len(text) <= _MAX_VALUE_CHARS else text[: _MAX_VALUE_CHARS - 1] + "…"


def _text(value: Any) -> str:
    text = str(value)
    return text if len(text) <= 2 * _MAX_VALUE_CHARS else text[: 2 * _MAX_VALUE_CHARS - 1] + "…"


def _call(item: dict[str, Any]) -> str:
    args = item.get("args") or {}
    shown = ", ".join(f"{k}={_short(v)}" for k, v in args.items())
    if item.get("args_captured") is False:
        shown = "<arguments not captured>"
    return f"{item.get('name', '?')}({shown})"


def _listed(lines: list[str], header: str, items: list[str]) -> None:
    if not items:
        return
    lines.append(f"  {header}:")
    lines.extend(f"    - {text}" for text in items[:_MAX_ITEMS])
    if len(items) > _MAX_ITEMS:
        lines.append(f"    … and {len(items) - _MAX_ITEMS} more")


def _sequence_lines(details: dict[str, Any]) -> list[str]:
    """Missing and extra items of the trajectory and node-order criteria."""
    lines: list[str] = []
    missing = [m for m in details.get("missing", []) if isinstance(m, dict)]
    extra = [e for e in details.get("extra", []) if isinstance(e, dict)]
    mismatched = [m for m in missing if str(m.get("reason", "")).startswith("called with different arguments")]
    absent = [m for m in missing if m not in mismatched]
    _listed(
        lines,
        "mismatched arguments",
        [f"{_call(m)}: {str(m['reason']).removeprefix('called with different arguments: ')}" for m in mismatched],
    )
    _listed(lines, "missing", [f"{_call(m) if 'args' in m else m.get('name')}: {m.get('reason', '')}" for m in absent])
    _listed(lines, "extra", [_call(e) if "args" in e else str(e.get("name")) for e in extra])
    if missing_names := details.get("missing_names"):
        _listed(lines, "missing tools", [str(n) for n in missing_names])
    return lines


def _judge_lines(details: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    reasonings = [r for r in details.get("reasonings", []) if r]
    if len(reasonings) > 1:
        _listed(lines, f"judge reasoning ({details.get('judge_model', 'judge')})", [_text(r) for r in reasonings])
    elif reasonings and reasonings[0] != details.get("reason"):
        lines.append(f"  judge reasoning: {_text(reasonings[0])}")
    for key in ("errors", "clamped_scores"):
        if details.get(key):
            _listed(lines, key.replace("_", " "), [_short(v) for v in details[key]])
    return lines


def _limit_lines(details: dict[str, Any]) -> list[str]:
    return [
        f"  {key}: {_short(value)}"
        for key, value in details.items()
        if any(word in key.lower() for word in _LIMIT_WORDS) and value not in (None, "", [], {})
    ]


def explain_criterion(result: CriterionResult) -> str:
    """One criterion's verdict and why: ``tool_trajectory_avg_score: 0.50 < 1.00 (FAIL)`` plus its reasons."""
    status = "SKIPPED" if result.skipped else "ERROR" if result.is_error else "PASS" if result.passed else "FAIL"
    relation = ">=" if result.score >= result.threshold else "<"
    lines = [f"{result.criterion}: {result.score:.2f} {relation} {result.threshold:.2f} ({status})"]
    details = result.details if isinstance(result.details, dict) else {}
    if result.error:
        lines.append(f"  error: {result.error}")
    if details.get("reason"):
        lines.append(f"  reason: {_text(details['reason'])}")
    lines += _sequence_lines(details) + _judge_lines(details) + _limit_lines(details)
    lines += [f"  warning: {w}" for w in result.warnings]
    return clean_text("\n".join(lines))


def explain_case(result: EvalCaseResult) -> str:
    """Why a case failed: its error or every failing criterion explained (a passing case: one line)."""
    # the id and name on the title's line even when they hold a newline
    named = f" ({one_line(result.name)})" if result.name and result.name != result.eval_id else ""
    title = one_line(result.eval_id) + named
    if result.passed:
        return f"{title}: PASS"
    lines = [f"{title}: {'ERROR' if result.is_error else 'FAIL'}"]
    if result.error:
        lines.append(f"  error: {result.error}")
        if result.error_traceback:  # the agent's own frames: where to look, as pytest shows a test's error
            lines.extend("    " + line for line in result.error_traceback.rstrip().splitlines())
    for criterion in result.failed_criteria:
        lines.extend("  " + line for line in explain_criterion(criterion).splitlines())
    if not result.is_error and result.actual_response:
        lines.append(f"  actual response: {_text(result.actual_response)}")
    return clean_text("\n".join(lines))


def explain_report(report: EvalReport) -> str:
    """Every failed case of a run, explained."""
    return "\n".join(explain_case(r) for r in report.failed_cases)
