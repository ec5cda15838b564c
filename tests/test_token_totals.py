"""Token usage totals: ``TokenUsage.total`` (zero usages passed over) and the run summary built from it.

Each total is checked against the plain ``sum(usages, TokenUsage())``; the summary's per-criterion figures
against counts made here from the same results.
"""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from tracegrade.models.results import CriterionResult, EvalCaseResult, EvalSummary, TokenUsage, no_tokens
from tracegrade.reporters.text import format_usage

USAGES = [
    TokenUsage(),
    TokenUsage(input_tokens=10, output_tokens=5, calls=1),
    TokenUsage(),
    TokenUsage(cache_creation_tokens=7),  # no input/output tokens, still not nothing
    TokenUsage(cost_usd=0.25),
    TokenUsage(cache_read_tokens=3, calls=2),
]


def test_total_is_the_plain_sum_as_a_new_model() -> None:
    for end in range(len(USAGES) + 1):
        usages = USAGES[:end]
        total = TokenUsage.total(usages)
        assert total.counts() == sum(usages, TokenUsage()).counts()
        assert all(total is not u for u in usages)
    assert TokenUsage.total(iter(USAGES)).counts() == sum(USAGES, TokenUsage()).counts()


def test_zero_sums_share_the_one_zero_usage() -> None:
    # usages are immutable, so a sum that adds nothing builds nothing
    assert TokenUsage.total([]) is no_tokens()
    assert TokenUsage.total([TokenUsage(), TokenUsage()]) is no_tokens()
    used = USAGES[1]
    assert used + TokenUsage() is used
    assert TokenUsage() + used is used
    assert (used + used).counts() == (20, 10, 0, 0, 0.0, 2)
    assert sum(USAGES, TokenUsage()).counts() == (10, 5, 3, 7, 0.25, 3)
    with pytest.raises(ValidationError):
        used.input_tokens = 1  # type: ignore[misc]


def test_has_any_sees_every_field() -> None:
    assert [u.has_any() for u in USAGES] == [False, True, False, True, True, True]
    # reporters show a usage unless it is zero: a prompt-cache write alone is shown
    assert [u.is_zero() for u in USAGES] == [True, False, True, False, False, False]
    assert format_usage(USAGES[3]) == "0 tokens (in 0 / out 0), cache write 7"
    assert format_usage(USAGES[5]) == "0 tokens (in 0 / out 0), cache read 3, 2 calls"


def _case(eval_id: str, agent: TokenUsage, criteria: list[CriterionResult]) -> EvalCaseResult:
    return EvalCaseResult.success(eval_id, criteria, agent_token_usage=agent)


def test_summary_counts_and_totals_match_the_results() -> None:
    judged = TokenUsage(input_tokens=100, output_tokens=20, cost_usd=0.01, calls=1)
    failing = CriterionResult.success("rouge", 0.2, 0.5)
    failing.warnings.append("judge below agreement")
    results = [
        _case("a", USAGES[1], [CriterionResult.success("rouge", 0.9, 0.5), CriterionResult.success("judge", 1, 0.5)]),
        _case("b", TokenUsage(), [failing, CriterionResult.success("judge", 0.4, 0.5, token_usage=judged)]),
        _case("c", USAGES[3], [CriterionResult.failure("rouge", "boom", 0.5), failing.model_copy()]),
        _case(
            "d",
            USAGES[5],
            [
                CriterionResult(criterion="judge", score=0, passed=True, skipped=True, token_usage=judged),
                CriterionResult.success("rouge", 1, 0.5),
            ],
        ),
        EvalCaseResult.failure("e", "no trace"),
    ]
    summary = EvalSummary.from_results(results)
    assert list(summary.criterion_stats) == ["rouge", "judge"]
    for name, stats in summary.criterion_stats.items():
        mine = [c for r in results for c in r.criterion_results if c.criterion == name]
        graded = [c for c in mine if not c.skipped]
        assert stats.total == len(graded)
        assert stats.passed == sum(c.passed for c in graded)
        assert stats.failed == sum(not c.passed and not c.is_error for c in graded)
        assert stats.skipped == len(mine) - len(graded)
        assert stats.errors == sum(c.is_error for c in graded)
        assert stats.avg_score == sum(c.score for c in graded) / len(graded)
        assert stats.pass_rate == stats.passed / stats.total
        assert stats.token_usage.counts() == sum((c.token_usage for c in mine), TokenUsage()).counts()
    assert summary.criterion_stats["judge"].token_usage.calls == 2  # the skipped result's usage counts too
    assert summary.warnings == ["rouge: judge below agreement (2 cases)"]
    totals = [
        (summary.total_token_usage, [r.token_usage for r in results]),
        (summary.agent_token_usage, [r.agent_token_usage for r in results]),
        (summary.judge_token_usage, [r.token_usage.minus(r.agent_token_usage) for r in results]),
    ]
    for total, parts in totals:
        assert total.counts() == sum(parts, TokenUsage()).counts()
    assert summary.judge_token_usage.calls == 2
    assert (summary.passed_cases, summary.failed_cases, summary.error_cases) == (2, 2, 1)


def test_results_without_usage_share_one_zero_usage_nobody_can_change() -> None:
    plain = CriterionResult(criterion="a", score=1.0, passed=True)
    made = CriterionResult.success("b", 0.5, 0.7)
    assert plain.token_usage is made.token_usage  # one shared zero usage, not one built per result
    assert made.token_usage.counts() == TokenUsage().counts()
    with pytest.raises(ValidationError):
        made.token_usage.input_tokens = 5  # type: ignore[misc]  # frozen: sharing it is safe
    assert plain.token_usage.input_tokens == 0
    added = made.token_usage + TokenUsage(input_tokens=3)
    assert added.input_tokens == 3 and made.token_usage.input_tokens == 0
