"""Budgets: each set limit checked and named with its value when exceeded, the same live and offline;
agent cost from litellm's local cost map (unpriced models named), judge cost from the judges' results."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.support.capture_agents import build_support_agent
from tests.support.live_and_stored import grade_live_and_stored, verdicts
from tracegrade.criteria import BudgetCriterion, SyncCriterion
from tracegrade.criteria.budget import percentile
from tracegrade.criteria.registry import build_criteria
from tracegrade.criteria.running import evaluate_all
from tracegrade.judges.llm import load_litellm
from tracegrade.models import EvalCase, EvalSet, ExecutionResult, Invocation, ToolCall
from tracegrade.models.config import BudgetConfig, CriteriaConfig, CriterionConfig, EvalConfig
from tracegrade.models.execution import LLMCall
from tracegrade.models.results import CriterionResult, TokenUsage

CASE = EvalCase(eval_id="case", conversation=[])
SUPPORT_SET = EvalSet(
    eval_set_id="budget",
    eval_cases=[
        EvalCase(eval_id="two-skus", conversation=[Invocation.simple("check sku-1 and sku-2")]),
        EvalCase(eval_id="retry", conversation=[Invocation.simple("strict sku-9")]),
    ],
)


def _grade(execution: ExecutionResult, **limits) -> CriterionResult:
    return BudgetCriterion(BudgetConfig(**limits)).evaluate_sync(execution, CASE)


def _llm(model: str, provider: str | None, tokens_in: int, tokens_out: int) -> LLMCall:
    return LLMCall(
        model=model, provider=provider, token_usage=TokenUsage(input_tokens=tokens_in, output_tokens=tokens_out)
    )


def test_live_and_offline_give_the_same_budget_verdicts(tmp_path: Path) -> None:
    budget = BudgetConfig(
        max_duration_seconds=60,
        max_tool_latency_seconds=30,
        max_tool_p95_seconds=30,
        max_total_tokens=100_000,
        max_llm_calls=2,
        max_tool_errors=0,
        max_error_spans=0,
        max_agent_cost_usd=1.0,
    )
    config = EvalConfig(criteria=CriteriaConfig(budget=budget))
    live, offline = grade_live_and_stored(build_support_agent(), SUPPORT_SET, config, tmp_path / "store.duckdb")
    assert verdicts(live, "limits", "reason") == verdicts(offline, "limits", "reason")
    by_case = {r.eval_id: r.criterion_results[0] for r in live.results}
    assert by_case["two-skus"].passed and by_case["two-skus"].score == 1.0
    retry = by_case["retry"]
    assert not retry.passed
    exceeded = {d["limit"] for d in retry.details["limits"] if not d["met"]}
    assert exceeded == {"max_llm_calls", "max_tool_errors", "max_error_spans"}
    assert "LLM calls 3 > 2" in retry.details["reason"] and "tool errors 1 > 0" in retry.details["reason"]
    assert retry.score == pytest.approx(1 - 3 / len(retry.details["limits"]))
    # pydantic-ai's FunctionModel has no price: said, and counted as 0
    assert "no price for function:_support_model" in retry.details["reason"]


def test_each_exceeded_limit_is_named_with_its_value_and_the_score_is_the_fraction_met() -> None:
    execution = ExecutionResult(
        duration_seconds=12.5,
        tool_calls=[ToolCall(name="search", duration_seconds=d) for d in (0.1, 0.2, 0.3, 0.4, 4.0)]
        + [ToolCall(name="fetch", duration_seconds=0.5, error="timeout")],
        llm_calls=[_llm("m", None, 6000, 500), _llm("m", None, 3000, 100)],
    )
    result = _grade(
        execution,
        max_duration_seconds=10,
        max_tool_latency_seconds=1,
        max_tool_p95_seconds=2,
        max_input_tokens=8000,
        max_output_tokens=1000,
        max_llm_calls=5,
        max_tool_errors=0,
    )
    reason = result.details["reason"]
    assert "duration (s) 12.5 > 10" in reason
    assert "max latency (s) of 'search' 4 > 1" in reason
    assert f"p95 latency (s) of 'search' {percentile([0.1, 0.2, 0.3, 0.4, 4.0], 0.95):g} > 2" in reason
    assert "input tokens 9000 > 8000" in reason and "tool errors 1 > 0" in reason
    assert "fetch" not in reason and "output tokens" not in reason and "LLM calls" not in reason
    # 9 checks (the two latency limits per tool): search max and p95, duration, input tokens, tool errors fail
    assert len(result.details["limits"]) == 9 and result.score == pytest.approx(4 / 9) and not result.passed


def test_agent_cost_uses_the_local_cost_map_and_names_unpriced_models() -> None:
    prices = load_litellm().model_cost["gpt-4o-mini"]
    calls = [_llm("gpt-4o-mini", "openai", 10_000, 2_000), _llm("house-model-7", None, 50, 50)]
    expected = 10_000 * prices["input_cost_per_token"] + 2_000 * prices["output_cost_per_token"]
    cheap = _grade(ExecutionResult(llm_calls=calls), max_agent_cost_usd=expected * 1.01)
    dear = _grade(ExecutionResult(llm_calls=calls), max_agent_cost_usd=expected * 0.99)
    assert cheap.passed and not dear.passed
    assert dear.details["limits"][0]["value"] == pytest.approx(expected)
    assert "no price for house-model-7" in cheap.details["reason"]
    assert cheap.details["unpriced_models"] == ["house-model-7"]


class _PricedJudge(SyncCriterion):
    """A user criterion that reports judge usage, as the LLM judges do."""

    name = "priced_judge"

    def evaluate_sync(self, actual: ExecutionResult, expected: EvalCase) -> CriterionResult:
        return self._result(1.0, token_usage=TokenUsage(input_tokens=10, cost_usd=0.03, calls=1))


def test_judge_cost_counts_what_the_other_criteria_reported_and_is_separate_from_agent_cost() -> None:
    execution = ExecutionResult(llm_calls=[_llm("gpt-4o-mini", "openai", 10, 10)])
    budget = BudgetCriterion(BudgetConfig(max_judge_cost_usd=0.05, max_agent_cost_usd=1.0))
    criteria = [budget, _PricedJudge(), _PricedJudge()]  # listed first, graded last
    results = asyncio.run(evaluate_all(criteria, execution, CASE))
    assert [r.criterion for r in results] == ["budget", "priced_judge", "priced_judge"]
    judged = {d["limit"]: d for d in results[0].details["limits"]}
    assert judged["max_judge_cost_usd"]["value"] == pytest.approx(0.06) and not judged["max_judge_cost_usd"]["met"]
    assert judged["max_agent_cost_usd"]["met"] and judged["max_agent_cost_usd"]["value"] < 0.001
    assert "judge cost (USD) 0.06 > 0.05" in results[0].details["reason"]


def test_the_budget_slot_builds_the_criterion_and_a_budget_without_limits_is_refused() -> None:
    (built,) = build_criteria(CriteriaConfig(budget=CriterionConfig(threshold=0.5)))
    assert isinstance(built, BudgetCriterion) and built.threshold == 0.5
    assert "without any limit" in " ".join(built.validate_config())
    assert _grade(ExecutionResult(duration_seconds=1.0), max_duration_seconds=2).details["reason"] == "all 1 limits met"
