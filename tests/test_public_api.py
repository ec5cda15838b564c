"""The curated public surface: every exported name resolves, and the list is pinned."""

import tracegrade
from tests.support.imports import modules_loaded_by

EXPECTED = {
    "AgentEvaluator",
    "ArgMatchMode",
    "BaseCriterion",
    "BudgetCriterion",
    "BaseReporter",
    "BatchSimulator",
    "CRITERIA_REGISTRY",
    "Colors",
    "CompositeCriterion",
    "ConfigError",
    "ConsoleReporter",
    "ContainsKeywordsCriterion",
    "ConversationScenario",
    "CriteriaConfig",
    "CriteriaGrader",
    "CriterionConfig",
    "CriterionResult",
    "DEFAULT_JUDGE_MODEL",
    "EvalCase",
    "EvalCaseResult",
    "EvalConfig",
    "EvalPresets",
    "EvalReport",
    "EvalSet",
    "EvalSetBuilder",
    "EvalSetError",
    "EvalSummary",
    "EvalTestCase",
    "EvaluationRunner",
    "EvaluatorFactory",
    "ExactMatchCriterion",
    "ExecutionResult",
    "FactualAccuracyCriterion",
    "FileFormatError",
    "Grader",
    "HTMLReporter",
    "HallucinationCriterion",
    "Invocation",
    "JSONReporter",
    "JUnitXMLReporter",
    "LLMCall",
    "LLMJudgeCriterion",
    "MatchType",
    "MessageContent",
    "NoCriteriaError",
    "NodeDetail",
    "NodeOrderMatchCriterion",
    "NodeResponseData",
    "NodeVisit",
    "QuickEval",
    "ReporterConfig",
    "ReporterManager",
    "ReporterOutput",
    "ResponseMatchCriterion",
    "RougeMatchCriterion",
    "Rubric",
    "RubricBasedCriterion",
    "SafetyCriterion",
    "SessionInput",
    "SimulationGoalsCriterion",
    "SimulationResult",
    "SpanRecord",
    "SqlAssertionCriterion",
    "StepType",
    "StoreError",
    "SyncCriterion",
    "TokenUsage",
    "ToolArgsRule",
    "ToolCall",
    "ToolNameMatchCriterion",
    "ToolSchemaCriterion",
    "TraceGrader",
    "RunComparison",
    "compare_runs",
    "TraceStore",
    "TracegradeError",
    "TrajectoryCollector",
    "TrajectoryMatchCriterion",
    "TrajectoryStep",
    "UserSimulator",
    "UserSimulatorConfig",
    "WeightedCriterion",
    "assert_criterion_passed",
    "assert_eval_passed",
    "create_simple_eval_set",
    "create_eval_app",
    "eval_test",
    "make_trajectory_callback",
    "map_spans",
    "parametrize_eval_cases",
    "print_report",
    "register_criterion",
    "run_eval",
    "run_eval_sync",
    "trace_node",
    "trace_tool",
}


def test_all_is_pinned() -> None:
    assert set(tracegrade.__all__) == EXPECTED


def test_every_exported_name_resolves() -> None:
    for name in tracegrade.__all__:
        assert getattr(tracegrade, name) is not None, name


def test_unknown_name_is_an_attribute_error() -> None:
    try:
        tracegrade.NoSuchThing  # noqa: B018
    except AttributeError as exc:
        assert "NoSuchThing" in str(exc)
    else:
        raise AssertionError("expected AttributeError")


def test_import_is_light() -> None:
    """Importing the package and the data model pulls in neither litellm nor grpc nor duckdb."""
    code = "import tracegrade; from tracegrade import EvalSet, EvalConfig, EvalCase"
    assert modules_loaded_by(code, ["litellm", "grpc", "duckdb", "aiohttp"]) == []


def test_every_name_the_store_package_exports_resolves() -> None:
    """``tracegrade.store`` loads its names on first use; each one listed in ``__all__`` must load."""
    import tracegrade.store as store

    for name in store.__all__:
        assert getattr(store, name) is not None, name


def test_compare_runs_is_exported_with_its_result_type() -> None:
    """``tracegrade.compare_runs`` is the gate's comparison: a clear regression over 30 cases fails it."""
    from tracegrade import CriterionResult, EvalCaseResult, EvalReport, RunComparison, compare_runs

    def report(passing: int) -> EvalReport:
        cases = [
            EvalCaseResult.success(f"c{i}", [CriterionResult.success("k", 1.0 if i < passing else 0.0, 0.5)])
            for i in range(30)
        ]
        return EvalReport.create("s", cases)

    result = compare_runs(report(30), report(10))
    assert isinstance(result, RunComparison) and result.paired_cases == 30 and result.verdict == "fail"
    assert compare_runs(report(30), report(30)).verdict == "pass"
