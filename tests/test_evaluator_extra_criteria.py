"""User criteria attached to AgentEvaluator runs with ``extra_criteria`` are graded beside the config's slots."""

from tracegrade import (
    AgentEvaluator,
    CriteriaConfig,
    CriterionConfig,
    EvalCase,
    EvalConfig,
    EvalSet,
    SyncCriterion,
)


class MaxLength(SyncCriterion):
    name = "max_length"
    requires_reference = False

    def evaluate_sync(self, actual, expected):
        length = len(actual.actual_response)
        return self._result(1.0 if length <= 5 else 0.0, {"length": length})


async def test_extra_criteria_run_after_the_config_slots() -> None:
    config = EvalConfig(criteria=CriteriaConfig(contains_keywords=CriterionConfig.contains_keywords(["hi"])))
    config.reporter.enabled = False
    evaluator = AgentEvaluator(lambda q: "hi there", config=config, extra_criteria=[MaxLength()])
    report = await evaluator.evaluate(EvalSet(eval_cases=[EvalCase.single_turn("a", "hello?")]))
    results = report.results[0].criterion_results
    assert [c.criterion for c in results] == ["contains_keywords", "max_length"]
    assert results[1].score == 0.0 and results[1].details == {"length": 8}
    assert not report.results[0].passed


async def test_extra_criteria_alone_are_enough_to_run() -> None:
    config = EvalConfig()
    config.reporter.enabled = False
    report = await AgentEvaluator(lambda q: "ok", config=config, extra_criteria=[MaxLength()]).evaluate(
        EvalSet(eval_cases=[EvalCase.single_turn("a", "q")])
    )
    assert report.passed
