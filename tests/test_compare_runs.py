"""``compare_runs`` on synthetic runs whose truth is known: regressions fail, noise passes, too little is
inconclusive."""

from __future__ import annotations

import random

import pytest

from tracegrade.evaluation.compare import CASES, compare_runs
from tracegrade.models import ToolCall
from tracegrade.models.results import CriterionResult, EvalCaseResult, EvalReport

CASE_COUNT = 40


def _truth(seed: int = 7, count: int = CASE_COUNT) -> list[tuple[float, float]]:
    """Per case: the chance the agent calls the right tool, and its answer's typical quality."""
    rng = random.Random(seed)
    return [(rng.uniform(0.3, 0.95), rng.uniform(0.35, 0.9)) for _ in range(count)]


def noisy_agent_run(seed: int, truth: list[tuple[float, float]], tool_drop: float = 0.0, quality_drop: float = 0.0):
    """One run of a seeded noisy agent: each case's verdicts drawn afresh around its truth."""
    rng = random.Random(seed)
    results = []
    for i, (p_tool, quality) in enumerate(truth):
        right_tool = rng.random() < p_tool - tool_drop
        score = min(1.0, max(0.0, rng.gauss(quality - quality_drop, 0.15)))
        criteria = [
            CriterionResult.success("tool_name_match", 1.0 if right_tool else 0.0, 1.0),
            CriterionResult.success("response_quality", score, 0.5),
        ]
        call = ToolCall(name="search", args={"q": "a" if right_tool else "b"})
        results.append(EvalCaseResult.success(f"case-{i}", criteria, name=f"case {i}", actual_tool_calls=[call]))
    return EvalReport.create("synthetic", results)


def test_a_real_regression_fails_the_gate() -> None:
    truth = _truth()
    result = compare_runs(noisy_agent_run(1, truth), noisy_agent_run(2, truth, tool_drop=0.35, quality_drop=0.2))
    assert result.verdict == "fail"
    assert result.cases.significant_regression
    assert result.cases.pass_to_fail > result.cases.fail_to_pass
    quality = next(m for m in result.criteria if m.name == "response_quality")
    assert quality.significant_regression and quality.high < 0
    assert quality.permutation_p_adjusted is not None and quality.permutation_p_adjusted < 0.05
    assert any("regressed significantly" in r for r in result.reasons)
    flipped = [f for f in result.flips if f.direction == "pass->fail"]
    assert flipped and all(f.divergence for f in flipped if "tool_name_match" in f.criteria)


def test_two_runs_of_one_seeded_noisy_agent_pass_the_gate_95_times_in_100() -> None:
    truth = _truth()
    verdicts = [
        compare_runs(noisy_agent_run(2 * t, truth), noisy_agent_run(2 * t + 1, truth), alpha=0.05).verdict
        for t in range(100)
    ]
    assert "inconclusive" not in verdicts  # 40 cases are enough to conclude
    assert verdicts.count("fail") <= 5, verdicts.count("fail")


def test_the_noise_test_could_fail_without_the_multiple_testing_correction() -> None:
    # The same runs judged on raw p-values give more false alarms: the Holm adjustment is doing work.
    truth = _truth()
    raw = adjusted = 0
    for t in range(100):
        result = compare_runs(noisy_agent_run(2 * t, truth), noisy_agent_run(2 * t + 1, truth))
        adjusted += result.verdict == "fail"
        raw += any(
            (m.mcnemar_p < 0.05 and m.pass_to_fail > m.fail_to_pass)
            or (m.permutation_p is not None and m.permutation_p < 0.05 and m.delta < 0)
            for m in result.metrics
        )
    assert raw > adjusted


def test_too_few_cases_is_inconclusive_and_says_why() -> None:
    truth = _truth(count=4)
    result = compare_runs(noisy_agent_run(1, truth), noisy_agent_run(2, truth, tool_drop=0.9))
    assert result.verdict == "inconclusive"
    (reason,) = result.reasons
    assert "only 4 case(s)" in reason and "Holm-adjusted over 4 tests" in reason and "at least 8 paired cases" in reason


def test_no_shared_cases_is_inconclusive() -> None:
    a = EvalReport.create("x", [EvalCaseResult.success("a", [CriterionResult.success("c", 1.0, 0.5)])])
    b = EvalReport.create("x", [EvalCaseResult.success("b", [CriterionResult.success("c", 1.0, 0.5)])])
    result = compare_runs(a, b)
    assert result.verdict == "inconclusive"
    assert "no case was graded in both runs" in result.reasons[0]
    assert (result.only_baseline, result.only_candidate) == (["a"], ["b"])


def test_max_drop_fails_an_observed_drop_even_when_not_significant() -> None:
    truth = _truth(count=8)
    base = noisy_agent_run(1, truth)
    cand = EvalReport.create(
        "synthetic",
        [
            r
            if i
            else r.model_copy(update={"passed": False, "criterion_results": [CriterionResult.success("x", 0.0, 1.0)]})
            for i, r in enumerate(base.results)
        ],
    )
    if not base.results[0].passed:  # make sure exactly one case went from pass to fail
        base.results[0] = base.results[0].model_copy(update={"passed": True})
    loose = compare_runs(base, cand)
    assert loose.verdict == "pass" and loose.flips[0].direction == "pass->fail"
    tight = compare_runs(base, cand, max_drop=0.1)
    assert tight.verdict == "fail" and tight.cases.exceeds_max_drop
    assert any("more than --max-drop 0.1" in r for r in tight.reasons)
    assert compare_runs(base, cand, strict=True).verdict == "fail"


def test_flips_name_the_criteria_and_the_call_where_trajectories_part() -> None:
    def case(passed: bool, query: str) -> EvalCaseResult:
        calls = [ToolCall(name="plan", args={}), ToolCall(name="search", args={"q": query, "k": 3})]
        return EvalCaseResult.success(
            "c1", [CriterionResult.success("trajectory", 1.0 if passed else 0.0, 1.0)], actual_tool_calls=calls
        )

    result = compare_runs(EvalReport.create("x", [case(True, "a")]), EvalReport.create("x", [case(False, "b")]))
    (flip,) = result.flips
    assert flip.direction == "pass->fail" and flip.criteria == ["trajectory"]
    assert flip.divergence == "call 2: search(q=a, k=3) became search(q=b, k=3)"


def test_the_comparison_renders_as_markdown_and_a_dict() -> None:
    truth = _truth()
    result = compare_runs(noisy_agent_run(1, truth), noisy_agent_run(2, truth, tool_drop=0.35), alpha=0.1)
    text = result.to_markdown()
    assert text.startswith("### ❌ tracegrade gate: fail")
    assert "| cases |" in text and "| tool_name_match |" in text and "90% interval" in text
    data = result.to_dict()
    assert data["verdict"] == "fail" and data["metrics"][0]["name"] == CASES
    assert data["metrics"][0]["pass_rate_delta"] == pytest.approx(result.cases.pass_rate_delta)


def test_bad_arguments_are_refused() -> None:
    report = EvalReport.create("x", [])
    with pytest.raises(ValueError, match="alpha"):
        compare_runs(report, report, alpha=1.5)
    with pytest.raises(ValueError, match="max_drop"):
        compare_runs(report, report, max_drop=-0.1)
