"""Budgets as a criterion: limits on what a case took (time, tokens, money, calls, errors).

Every limit set in :class:`~tracegrade.models.config.BudgetConfig` is checked; the score is the fraction
met and the reason names each exceeded limit with its value. Agent cost prices each LLM call's tokens
with litellm's local cost map (a model without a price is named and counts 0); judge cost is what the
case's judge criteria reported, so the budget is graded after them. Error spans are counted in the
case's trajectory tables (:mod:`tracegrade.criteria.trajectory_db`), the same live and offline.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

from tracegrade.criteria.base import SyncCriterion
from tracegrade.criteria.registry import register_criterion
from tracegrade.criteria.trajectory_db import sandbox
from tracegrade.models.config import BudgetConfig, CriterionConfig
from tracegrade.models.dataset import EvalCase
from tracegrade.models.execution import ExecutionResult, LLMCall
from tracegrade.models.results import CriterionResult

__all__ = ["BudgetCriterion", "agent_cost", "percentile"]


def percentile(values: list[float], fraction: float) -> float:
    """Linear-interpolated percentile (DuckDB's ``quantile_cont``) of a non-empty list."""
    ordered = sorted(values)
    position = fraction * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


@cache
def _price(model: str, provider: str | None) -> tuple[float, float] | None:
    """USD per input and per output token from litellm's cost map, or None when the model has no price."""
    from tracegrade.judges.llm import load_litellm

    table = load_litellm().model_cost
    names = [model, f"{provider}/{model}" if provider else None, model.rsplit("/", 1)[-1]]
    for name in names:
        entry = table.get(name) if name else None
        if entry and ("input_cost_per_token" in entry or "output_cost_per_token" in entry):
            return float(entry.get("input_cost_per_token") or 0.0), float(entry.get("output_cost_per_token") or 0.0)
    return None


def agent_cost(calls: list[LLMCall]) -> tuple[float, list[str]]:
    """USD the agent's LLM calls cost, and the models (sorted) that have no price (counted as 0)."""
    total, unpriced = 0.0, set()
    for call in calls:
        price = _price(call.model, call.provider) if call.model else None
        if price is None:
            unpriced.add(call.model or "<unknown model>")
            continue
        total += call.token_usage.input_tokens * price[0] + call.token_usage.output_tokens * price[1]
    return total, sorted(unpriced)


@dataclass
class _Check:
    limit: str  # the config field
    value: float
    maximum: float
    what: str  # how the reason names the measure

    @property
    def met(self) -> bool:
        return self.value <= self.maximum


def _error_spans(execution: ExecutionResult) -> float:
    box = sandbox()
    box.load(execution)
    return float(box.run("SELECT count(*) FROM spans WHERE status_code = 'ERROR'")[1][0][0])


@register_criterion()
class BudgetCriterion(SyncCriterion):
    """Checks a case against the limits of its ``budget`` config slot."""

    name = "budget"
    description = "The case stayed within its time, token, cost, call and error limits"
    requires_reference = False
    sees_other_results = True  # judge cost is known once the judges have graded

    def __init__(self, config: CriterionConfig | None = None) -> None:
        super().__init__(BudgetConfig.coerce(config))
        self.limits: BudgetConfig = self.config  # type: ignore[assignment]

    def validate_config(self) -> list[str]:
        problems = super().validate_config()
        if not any(getattr(self.limits, f) is not None for f in _MEASURES):
            problems.append("budget is enabled without any limit; set at least one max_* field")
        return problems

    def evaluate_sync(self, actual: ExecutionResult, expected: EvalCase) -> CriterionResult:
        return self.evaluate_after(actual, expected, [])

    def evaluate_after(
        self, actual: ExecutionResult, expected: EvalCase, others: list[CriterionResult]
    ) -> CriterionResult:
        checks: list[_Check] = []
        details: dict[str, Any] = {}
        for field, (what, measure) in _MEASURES.items():
            maximum = getattr(self.limits, field)
            if maximum is None:
                continue
            if field in _PER_TOOL:
                for tool, value in measure(actual, others, details).items():
                    checks.append(_Check(field, value, maximum, f"{what} of {tool!r}"))
            else:
                checks.append(_Check(field, measure(actual, others, details), maximum, what))
        exceeded = [c for c in checks if not c.met]
        details["limits"] = [
            {"limit": c.limit, "measure": c.what, "value": c.value, "max": c.maximum, "met": c.met} for c in checks
        ]
        reason = (
            "exceeded: " + "; ".join(f"{c.what} {_shown(c.value)} > {_shown(c.maximum)}" for c in exceeded)
            if exceeded
            else f"all {len(checks)} limits met"
        )
        if details.get("unpriced_models"):
            reason += f" (no price for {', '.join(details['unpriced_models'])}: its calls count 0 in agent cost)"
        details["reason"] = reason
        return self._result(1.0 - len(exceeded) / len(checks) if checks else 1.0, details)


def _shown(value: float) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _tool_durations(actual: ExecutionResult) -> dict[str, list[float]]:
    by_tool: dict[str, list[float]] = {}
    for call in actual.tool_calls:
        if call.duration_seconds is not None:
            by_tool.setdefault(call.name, []).append(call.duration_seconds)
    return by_tool


def _agent_cost(actual: ExecutionResult, others: list[CriterionResult], details: dict[str, Any]) -> float:
    cost, unpriced = agent_cost(actual.llm_calls)
    if unpriced:
        details["unpriced_models"] = unpriced
    return cost


Measure = Callable[[ExecutionResult, list[CriterionResult], dict[str, Any]], Any]
# config field -> (how the reason names it, how it is measured); per-tool measures return {tool: value}
_MEASURES: dict[str, tuple[str, Measure]] = {
    "max_duration_seconds": ("duration (s)", lambda a, o, d: a.duration_seconds),
    "max_tool_latency_seconds": (
        "max latency (s)",
        lambda a, o, d: {t: max(v) for t, v in _tool_durations(a).items()},
    ),
    "max_tool_p95_seconds": (
        "p95 latency (s)",
        lambda a, o, d: {t: percentile(v, 0.95) for t, v in _tool_durations(a).items()},
    ),
    "max_input_tokens": ("input tokens", lambda a, o, d: a.token_usage.input_tokens),
    "max_output_tokens": ("output tokens", lambda a, o, d: a.token_usage.output_tokens),
    "max_total_tokens": ("total tokens", lambda a, o, d: a.token_usage.total_tokens),
    "max_agent_cost_usd": ("agent cost (USD)", _agent_cost),
    "max_judge_cost_usd": ("judge cost (USD)", lambda a, o, d: sum(r.token_usage.cost_usd for r in o)),
    "max_llm_calls": ("LLM calls", lambda a, o, d: len(a.llm_calls)),
    "max_tool_errors": ("tool errors", lambda a, o, d: sum(1 for c in a.tool_calls if c.error is not None)),
    "max_error_spans": ("error spans", lambda a, o, d: int(_error_spans(a))),
}
_PER_TOOL = frozenset({"max_tool_latency_seconds", "max_tool_p95_seconds"})
