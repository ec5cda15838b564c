"""The seed pages' examples, run as written (imports from ``tracegrade`` instead of ``tenxgraph.qa.evaluation``).

Adapted only where the wiring differs: there is no compiled graph here, so the recorded execution an
agent would produce is written out as an ``ExecutionResult``, and the grading engine stands in for
``AgentEvaluator`` when a whole run is inspected.
"""

from __future__ import annotations

import asyncio

import pytest
from pydantic import ValidationError

from tracegrade import (
    CRITERIA_REGISTRY,
    BaseCriterion,
    CompositeCriterion,
    ContainsKeywordsCriterion,
    CriteriaConfig,
    CriterionConfig,
    CriterionResult,
    EvalCase,
    EvalCaseResult,
    EvalConfig,
    EvalReport,
    EvalSet,
    ExactMatchCriterion,
    ExecutionResult,
    MatchType,
    NodeOrderMatchCriterion,
    Rubric,
    StepType,
    SyncCriterion,
    ToolCall,
    ToolNameMatchCriterion,
    TrajectoryMatchCriterion,
    TrajectoryStep,
    WeightedCriterion,
    register_criterion,
)
from tracegrade.criteria.registry import build_criteria
from tracegrade.evaluation.engine import build_case_result, compile_criteria, create_grader

# --- construction (evaluation page) -----------------------------------------------------------------------


def weather_case() -> EvalCase:
    return EvalCase.single_turn(
        eval_id="weather-paris-001",
        user_query="What is the weather in Paris today?",
        expected_response="It is sunny in Paris.",
        expected_tools=[ToolCall(name="get_weather", args={"location": "Paris"})],
        expected_node_order=["MAIN", "TOOL", "MAIN"],
        name="Paris weather",
    )


def weather_execution(location: str = "Paris", response: str = "It is sunny in Paris.") -> ExecutionResult:
    """What the collector records for a run of the weather agent."""
    call = ToolCall(name="get_weather", args={"location": location}, call_id="c1", result={"sky": "sunny"})
    return ExecutionResult(
        tool_calls=[call],
        node_visits=["MAIN", "TOOL", "MAIN"],
        trajectory=[
            TrajectoryStep.node("MAIN"),
            TrajectoryStep.tool("get_weather", args=call.args, tool_call_id="c1"),
            TrajectoryStep.node("TOOL"),
            TrajectoryStep.node("MAIN"),
        ],
        actual_response=response,
    )


def test_construction_examples():
    case = weather_case()
    assert case.conversation[0].expected_tool_trajectory[0].args == {"location": "Paris"}

    multi = EvalCase.multi_turn(
        eval_id="multi-turn-001",
        conversation=[
            ("Hello", "Hi"),
            ("What can you do?", "I can answer questions"),
            ("Tell me about Python", "Python is a programming language"),
        ],
        expected_tools=[ToolCall(name="search_docs")],
    )
    assert [len(t.expected_tool_trajectory) for t in multi.conversation] == [1, 0, 0]

    tc = ToolCall(name="get_weather", args={"location": "Paris", "units": "celsius"}, call_id=None, result=None)
    assert tc.matches(ToolCall(name="get_weather"), check_args=True, check_call_id=False)

    node_step = TrajectoryStep.node("RESEARCH_NODE")
    tool_step = TrajectoryStep.tool("search", args={"query": "AI trends"})
    assert (node_step.step_type, tool_step.step_type) == (StepType.NODE, StepType.TOOL)

    eval_set = EvalSet(eval_set_id="capitals", name="Capitals", eval_cases=[case, multi])
    assert len(eval_set) == 2 and eval_set.get_case("multi-turn-001") is multi

    rubric = Rubric(rubric_id="accuracy", content="The response must contain the correct capital city.", weight=1.0)
    assert rubric.weight == 1.0


def test_configuration_examples():
    config = EvalConfig(
        criteria=CriteriaConfig(
            tool_name_match=CriterionConfig.tool_name_match(threshold=1.0),
            trajectory=CriterionConfig.trajectory(match_type=MatchType.IN_ORDER),
            llm_judge=CriterionConfig.llm_judge(),
        ),
        parallel=True,
        max_concurrency=4,
    )
    assert [slot for slot, _ in config.criteria.enabled_slots()] == ["tool_name_match", "trajectory", "llm_judge"]
    # The documented "common error": criteria given as a free-form dict with a legacy name.
    with pytest.raises(ValidationError, match="unknown criterion slot"):
        EvalConfig(criteria={"tool_name_match_score": {}})
    with pytest.raises(ValueError, match="Unknown criterion field: 'exact_match'"):
        EvalConfig().enable_criterion("exact_match")


# --- criteria page ---------------------------------------------------------------------------------------


def test_common_interface_example():
    criterion = TrajectoryMatchCriterion(config=CriterionConfig(threshold=0.9))
    result = asyncio.run(criterion.evaluate(weather_execution(), weather_case()))
    assert isinstance(result, CriterionResult) and result.score == 1.0 and result.threshold == 0.9
    assert criterion.is_enabled and criterion.validate_config() == []
    assert repr(criterion) == "TrajectoryMatchCriterion(name='tool_trajectory_avg_score', threshold=0.9)"


def test_string_criteria_examples():
    criterion = ExactMatchCriterion()
    result = asyncio.run(criterion.evaluate(weather_execution(), weather_case()))
    assert (result.score, result.details["match"]) == (1.0, True)

    keywords = ContainsKeywordsCriterion(
        config=CriterionConfig.contains_keywords(keywords=["refund", "7 days"], threshold=1.0),
    )
    refund = ExecutionResult(actual_response="Your refund arrives within 7 days.")
    assert asyncio.run(keywords.evaluate(refund, weather_case())).passed


def test_trajectory_criteria_examples():
    criterion = TrajectoryMatchCriterion(
        config=CriterionConfig.trajectory(threshold=1.0, match_type=MatchType.IN_ORDER, check_args=True),
    )
    assert asyncio.run(criterion.evaluate(weather_execution(), weather_case())).passed
    wrong_city = asyncio.run(criterion.evaluate(weather_execution(location="Lyon"), weather_case()))
    assert not wrong_city.passed
    assert wrong_city.details["missing"][0]["reason"] == (
        "called with different arguments: key 'location': expected 'Paris', got 'Lyon'"
    )

    nodes = NodeOrderMatchCriterion(config=CriterionConfig.node_order(threshold=1.0, match_type=MatchType.IN_ORDER))
    assert asyncio.run(nodes.evaluate(weather_execution(), weather_case())).passed


def test_composition_examples():
    criterion = CompositeCriterion(
        criteria=[ToolNameMatchCriterion(), ContainsKeywordsCriterion(keywords=["refund"])],
        require_all=True,
        config=CriterionConfig(threshold=1.0),
    )
    execution = weather_execution(response="No refund today, but it is sunny.")
    result = asyncio.run(criterion.evaluate(execution, weather_case()))
    assert result.passed and result.details["require_all"] is True and len(result.details["sub_results"]) == 2

    weighted = WeightedCriterion(
        criteria_weights=[(ToolNameMatchCriterion(), 0.3), (ContainsKeywordsCriterion(keywords=["storm"]), 0.7)],
        config=CriterionConfig(threshold=0.8),
    )
    result = asyncio.run(weighted.evaluate(weather_execution(), weather_case()))
    assert result.score == pytest.approx(0.3) and not result.passed


def test_weighted_example_with_the_llm_judge_builds_as_written():
    from tracegrade import ResponseMatchCriterion  # the judge criteria; nothing is called here

    criterion = WeightedCriterion(
        criteria_weights=[
            (ToolNameMatchCriterion(), 0.3),
            (ResponseMatchCriterion(), 0.7),
        ],
        config=CriterionConfig(threshold=0.8),
    )
    assert [(c.name, w) for c, w in criterion.criteria_weights] == [
        ("tool_name_match_score", 0.3),
        ("response_match_score", 0.7),
    ]
    assert criterion.requires_reference and criterion.threshold == 0.8


# --- writing your own criterion ----------------------------------------------------------------------------


class MaxLengthCriterion(SyncCriterion):
    name = "max_length"
    description = "Response must stay under 500 characters"

    def evaluate_sync(self, actual, expected):
        length = len(actual.actual_response)
        return self._result(
            1.0 if length <= 500 else 0.0,
            {"length": length},
        )


def test_custom_sync_criterion_registered_through_the_registry(monkeypatch):
    monkeypatch.setitem(CRITERIA_REGISTRY, "max_length", MaxLengthCriterion)
    assert CRITERIA_REGISTRY["max_length"] is MaxLengthCriterion

    # CriteriaConfig forbids unknown fields: attach the criterion to the run by hand...
    config = EvalConfig(criteria=CriteriaConfig(tool_name_match=CriterionConfig.tool_name_match()))
    grader = create_grader(config, extra_criteria=[CRITERIA_REGISTRY["max_length"]()])
    results = asyncio.run(grader.grade(weather_execution(response="x" * 501), weather_case()))
    assert [(r.criterion, r.passed) for r in results] == [("tool_name_match_score", True), ("max_length", False)]
    assert results[1].details == {"length": 501}

    # ...or map it onto an existing slot name.
    monkeypatch.setitem(CRITERIA_REGISTRY, "rouge_match", MaxLengthCriterion)
    built = build_criteria(CriteriaConfig(rouge_match=CriterionConfig(threshold=1.0)))
    assert isinstance(built[0], MaxLengthCriterion) and built[0].threshold == 1.0


def test_custom_criterion_with_the_decorator_and_an_async_base():
    @register_criterion("word_budget")
    class WordCountCriterion(BaseCriterion):
        name = "word_count"

        async def evaluate(self, actual, expected):
            await asyncio.sleep(0)
            words = len(actual.actual_response.split())
            return self._result(1.0 if words <= 5 else 0.0, {"words": words})

    try:
        assert CRITERIA_REGISTRY["word_count"] is CRITERIA_REGISTRY["word_budget"] is WordCountCriterion
        result = asyncio.run(WordCountCriterion().evaluate(weather_execution(), weather_case()))
        assert result.passed and result.details == {"words": 5}
    finally:
        CRITERIA_REGISTRY.pop("word_count")
        CRITERIA_REGISTRY.pop("word_budget")


def test_missing_abstract_method_is_a_type_error():
    class Incomplete(SyncCriterion):
        name = "incomplete"

    with pytest.raises(TypeError, match="abstract"):
        Incomplete()


# --- report inspection ---------------------------------------------------------------------------------------


def test_report_inspection_example():
    config = EvalConfig(
        criteria=CriteriaConfig(
            trajectory=CriterionConfig.trajectory(threshold=1.0, match_type=MatchType.IN_ORDER, check_args=True),
            rouge_match=CriterionConfig.rouge_match(threshold=0.8),
        ),
    )
    grader = create_grader(config)
    france = EvalCase.single_turn(
        eval_id="capitals-001",
        user_query="What is the capital of France?",
        expected_response="The capital of France is Paris.",
        expected_tools=[ToolCall(name="lookup_capital")],
    )
    germany = EvalCase.single_turn(
        eval_id="capitals-002",
        user_query="What is the capital of Germany?",
        expected_response="The capital of Germany is Berlin.",
        expected_tools=[ToolCall(name="lookup_capital")],
    )
    runs = {
        "capitals-001": ExecutionResult(
            tool_calls=[ToolCall(name="lookup_capital", args={"country": "France"})],
            actual_response="The capital of France is Paris.",
        ),
        "capitals-002": ExecutionResult(tool_calls=[], actual_response="I think it is Munich."),
    }

    async def grade_all() -> list[EvalCaseResult]:
        results = []
        for case in (france, germany):
            scores = await grader.grade(runs[case.eval_id], case)
            results.append(build_case_result(case, runs[case.eval_id], scores, duration_seconds=0.1))
        return results

    report = EvalReport.create(
        "capitals", asyncio.run(grade_all()), eval_set_name="Capital cities", config_used=config.model_dump(mode="json")
    )

    summary = report.format_summary()
    assert summary.splitlines()[0] == "Evaluation Report: Capital cities"
    assert "Passed:      1 (50.0%)" in summary
    assert f"Pass rate: {report.summary.pass_rate:.0%}" == "Pass rate: 50%"
    failures = [
        f"{case.eval_id} · {cr.criterion}: {cr.score:.2f} < {cr.threshold}"
        for case in report.failed_cases
        for cr in case.failed_criteria
    ]
    assert failures[0] == "capitals-002 · tool_trajectory_avg_score: 0.00 < 1.0"
    assert failures[1].startswith("capitals-002 · rouge_match: 0.")
    case_result = report.get_case_result("capitals-001")
    assert case_result.passed and case_result.get_criterion_result("rouge_match").score == 1.0
    stats = report.summary.criterion_stats["tool_trajectory_avg_score"]
    assert (stats.total, stats.passed, stats.pass_rate) == (2, 1, 0.5)
    assert not report.passed and [c.eval_id for c in report.passed_cases] == ["capitals-001"]


def test_report_built_by_hand():
    results = [
        EvalCaseResult.success("a", [CriterionResult.success("tool_name_match_score", 1.0, 1.0)], name="A"),
        EvalCaseResult.failure("b", "agent raised ValueError", name="B"),
    ]
    report = EvalReport.create("set", results)
    assert report.summary.error_cases == 1 and report.summary.total_cases == 2
    assert report.get_case_result("b").is_error and report.get_case_result("nope") is None


def test_compile_criteria_refuses_an_empty_config():
    from tracegrade.errors import NoCriteriaError

    with pytest.raises(NoCriteriaError):
        compile_criteria(EvalConfig())
