"""Composite and weighted criteria, the registry, and how the engine runs sync and async criteria."""

from __future__ import annotations

import asyncio

import pytest

from tests.support.imports import modules_loaded_by
from tracegrade.criteria import (
    CRITERIA_REGISTRY,
    BaseCriterion,
    CompositeCriterion,
    ContainsKeywordsCriterion,
    ExactMatchCriterion,
    NodeOrderMatchCriterion,
    RougeMatchCriterion,
    SyncCriterion,
    ToolNameMatchCriterion,
    TrajectoryMatchCriterion,
    WeightedCriterion,
    build_criteria,
)
from tracegrade.evaluation.engine import CriteriaGrader
from tracegrade.models import (
    CriteriaConfig,
    CriterionConfig,
    CriterionResult,
    EvalCase,
    ExecutionResult,
    TokenUsage,
    ToolCall,
)

CASE = EvalCase.single_turn("c", "q", "refund in 7 days", expected_tools=[ToolCall(name="refund")])


class Fixed(SyncCriterion):
    """Scores whatever it was built with (a test double of a criterion, not of our components)."""

    name = "fixed"

    def __init__(self, score: float, tokens: int = 0, name: str = "fixed") -> None:
        super().__init__()
        self.score, self.tokens, self.label = score, tokens, name

    def evaluate_sync(self, actual, expected):
        result = self._result(self.score, token_usage=TokenUsage(input_tokens=self.tokens, calls=1))
        result.criterion = self.label
        return result


class Broken(SyncCriterion):
    name = "broken"

    def evaluate_sync(self, actual, expected):
        raise RuntimeError("boom")


class Skipping(SyncCriterion):
    name = "skipping"

    def evaluate_sync(self, actual, expected):
        return self._skipped("no reference")


def run(criterion: BaseCriterion, execution: ExecutionResult | None = None) -> CriterionResult:
    return asyncio.run(criterion.evaluate(execution or ExecutionResult(), CASE))


# --- CompositeCriterion ---------------------------------------------------------------------------------


def test_composite_and_takes_minimum_or_takes_maximum():
    subs = [Fixed(0.4), Fixed(0.9)]
    assert run(CompositeCriterion(subs, require_all=True)).score == 0.4
    assert run(CompositeCriterion(subs, require_all=False)).score == 0.9


def test_composite_threshold_is_its_own():
    result = run(CompositeCriterion([Fixed(0.85)], config=CriterionConfig(threshold=0.9)))
    assert result.threshold == 0.9 and not result.passed
    assert run(CompositeCriterion([Fixed(0.85)])).passed  # default threshold 0.8


def test_composite_with_no_sub_criteria_scores_zero():
    result = run(CompositeCriterion([]))
    assert result.score == 0.0 and not result.passed


def test_composite_details_and_token_usage_are_summed():
    result = run(CompositeCriterion([Fixed(1.0, tokens=5, name="a"), Fixed(0.5, tokens=7, name="b")]))
    assert result.criterion == "composite_criterion"
    assert result.details["require_all"] is True
    assert [s["criterion"] for s in result.details["sub_results"]] == ["a", "b"]
    assert result.details["sub_results"][1]["score"] == 0.5
    assert result.token_usage.input_tokens == 12 and result.token_usage.calls == 2


def test_a_raising_sub_criterion_becomes_an_error_sub_result():
    result = run(CompositeCriterion([Fixed(1.0), Broken()], require_all=False))
    assert result.score == 1.0
    broken = result.details["sub_results"][1]
    assert broken["criterion"] == "broken" and broken["error"] == "RuntimeError: boom" and broken["score"] == 0.0
    assert result.warnings == ["sub-criterion broken failed: RuntimeError: boom"]
    assert run(CompositeCriterion([Fixed(1.0), Broken()], require_all=True)).score == 0.0


def test_skipped_sub_results_do_not_count():
    assert run(CompositeCriterion([Skipping(), Fixed(0.7)])).score == 0.7
    assert run(CompositeCriterion([Skipping()])).skipped


def test_composite_with_real_criteria_from_the_seed_page():
    criterion = CompositeCriterion(
        criteria=[ToolNameMatchCriterion(), ContainsKeywordsCriterion(keywords=["refund"])],
        require_all=True,
        config=CriterionConfig(threshold=1.0),
    )
    good = ExecutionResult(tool_calls=[ToolCall(name="refund")], actual_response="Your refund is on its way.")
    bad = ExecutionResult(tool_calls=[ToolCall(name="refund")], actual_response="Sorry.")
    assert run(criterion, good).passed
    assert run(criterion, bad).score == 0.0


def test_requires_reference_follows_the_sub_criteria():
    assert not CompositeCriterion([ContainsKeywordsCriterion()]).requires_reference
    assert CompositeCriterion([ContainsKeywordsCriterion(), RougeMatchCriterion()]).requires_reference
    assert not WeightedCriterion([(ContainsKeywordsCriterion(), 1.0)]).requires_reference
    assert WeightedCriterion([(ToolNameMatchCriterion(), 1.0)]).requires_reference


def test_validate_config_includes_sub_criteria():
    bad = Fixed(1.0)
    bad.config = CriterionConfig.model_construct(threshold=1.5)
    problems = CompositeCriterion([bad]).validate_config()
    assert problems == ["sub-criterion fixed: threshold must be between 0 and 1, got 1.5"]
    problems = WeightedCriterion([(Fixed(1.0), -1.0)]).validate_config()
    assert problems == ["weight of fixed must not be negative, got -1.0"]


# --- WeightedCriterion ----------------------------------------------------------------------------------


def test_weighted_mean():
    result = run(WeightedCriterion([(Fixed(1.0, name="a"), 0.3), (Fixed(0.5, name="b"), 0.7)]))
    assert result.score == pytest.approx(0.65)
    assert result.criterion == "weighted_criterion"
    assert result.details["sub_results"] == [
        {"criterion": "a", "score": 1.0, "weight": 0.3},
        {"criterion": "b", "score": 0.5, "weight": 0.7},
    ]


def test_weights_need_not_sum_to_one():
    assert run(WeightedCriterion([(Fixed(1.0), 2), (Fixed(0.0), 2)])).score == 0.5


@pytest.mark.parametrize("pairs", [[], [(Fixed(1.0), 0.0)]])
def test_weighted_empty_or_zero_weight_scores_zero(pairs):
    assert run(WeightedCriterion(pairs)).score == 0.0


def test_weighted_sums_tokens_and_reports_errors():
    result = run(WeightedCriterion([(Fixed(1.0, tokens=3), 1.0), (Broken(), 1.0)]))
    assert result.score == 0.5
    assert result.token_usage.input_tokens == 3
    assert result.details["sub_results"][1]["error"] == "RuntimeError: boom"


# --- registry -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "cls"),
    [
        ("tool_trajectory_avg_score", TrajectoryMatchCriterion),
        ("trajectory", TrajectoryMatchCriterion),
        ("trajectory_match", TrajectoryMatchCriterion),
        ("tool_name_match_score", ToolNameMatchCriterion),
        ("tool_name_match", ToolNameMatchCriterion),
        ("node_order_score", NodeOrderMatchCriterion),
        ("node_order", NodeOrderMatchCriterion),
        ("rouge_match", RougeMatchCriterion),
        ("contains_keywords", ContainsKeywordsCriterion),
        ("exact_match", ExactMatchCriterion),
    ],
)
def test_registry_keys(key, cls):
    assert CRITERIA_REGISTRY[key] is cls


def test_build_criteria_from_slots_in_slot_order():
    criteria = build_criteria(
        CriteriaConfig(
            contains_keywords=CriterionConfig.contains_keywords(["x"]),
            tool_name_match=CriterionConfig.tool_name_match(),
            node_order=CriterionConfig.node_order(),
        )
    )
    assert [type(c) for c in criteria] == [ToolNameMatchCriterion, NodeOrderMatchCriterion, ContainsKeywordsCriterion]
    assert criteria[2].keywords == ["x"]


def test_importing_criteria_does_not_import_litellm():
    assert modules_loaded_by("import tracegrade.criteria", ["litellm"]) == []


# --- the engine: inline sync criteria, concurrent async ones ----------------------------------------------


class Rendezvous(BaseCriterion):
    """Completes only if its partner runs at the same time (proves concurrency without timing)."""

    def __init__(self, name: str, mine: asyncio.Event, theirs: asyncio.Event) -> None:
        super().__init__()
        self.label, self.mine, self.theirs = name, mine, theirs

    async def evaluate(self, actual, expected):
        self.mine.set()
        await asyncio.wait_for(self.theirs.wait(), timeout=5)
        result = self._result(1.0)
        result.criterion = self.label
        return result


def test_grader_keeps_order_runs_async_concurrently_and_contains_errors():
    async def main():
        first, second = asyncio.Event(), asyncio.Event()
        grader = CriteriaGrader(
            [Fixed(0.5, name="s1"), Rendezvous("a1", first, second), Broken(), Rendezvous("a2", second, first)]
        )
        return await grader.grade(ExecutionResult(), CASE)

    results = asyncio.run(main())
    assert [r.criterion for r in results] == ["s1", "a1", "broken", "a2"]
    assert results[2].error == "RuntimeError: boom" and results[2].threshold == 0.8
    assert results[1].score == results[3].score == 1.0
