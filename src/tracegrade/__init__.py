"""tracegrade: an OpenTelemetry-native evaluator for LLM agents.

The public API mirrors the reference evaluation API (same class names, fields, defaults and criterion
names). Names load lazily, so ``import tracegrade`` stays fast and pulls in heavy dependencies
(litellm, grpc, duckdb) only when a part that needs them is used.
"""

from __future__ import annotations

import importlib
from typing import Any

# public name -> defining module
_EXPORTS: dict[str, str] = {
    # data model
    "EvalSet": "tracegrade.models.dataset",
    "EvalCase": "tracegrade.models.dataset",
    "Invocation": "tracegrade.models.dataset",
    "MessageContent": "tracegrade.models.dataset",
    "SessionInput": "tracegrade.models.dataset",
    "ToolCall": "tracegrade.models.dataset",
    "TrajectoryStep": "tracegrade.models.dataset",
    "StepType": "tracegrade.models.dataset",
    "EvalSetBuilder": "tracegrade.models.builder",
    "ExecutionResult": "tracegrade.models.execution",
    "NodeResponseData": "tracegrade.models.execution",
    "NodeVisit": "tracegrade.models.execution",
    "LLMCall": "tracegrade.models.execution",
    "SpanRecord": "tracegrade.models.span",
    # configuration
    "EvalConfig": "tracegrade.models.config",
    "CriteriaConfig": "tracegrade.models.config",
    "CriterionConfig": "tracegrade.models.config",
    "MatchType": "tracegrade.models.config",
    "ArgMatchMode": "tracegrade.models.config",
    "ToolArgsRule": "tracegrade.models.config",
    "Rubric": "tracegrade.models.config",
    "ReporterConfig": "tracegrade.models.config",
    "UserSimulatorConfig": "tracegrade.models.config",
    "DEFAULT_JUDGE_MODEL": "tracegrade.models.config",
    # results
    "CriterionResult": "tracegrade.models.results",
    "EvalCaseResult": "tracegrade.models.results",
    "EvalSummary": "tracegrade.models.results",
    "EvalReport": "tracegrade.models.results",
    "TokenUsage": "tracegrade.models.results",
    "NodeDetail": "tracegrade.models.results",
    # criteria
    "BaseCriterion": "tracegrade.criteria.base",
    "SyncCriterion": "tracegrade.criteria.base",
    "CRITERIA_REGISTRY": "tracegrade.criteria.registry",
    "register_criterion": "tracegrade.criteria.registry",
    "ExactMatchCriterion": "tracegrade.criteria.text",
    "ContainsKeywordsCriterion": "tracegrade.criteria.text",
    "RougeMatchCriterion": "tracegrade.criteria.text",
    "TrajectoryMatchCriterion": "tracegrade.criteria.trajectory_match",
    "NodeOrderMatchCriterion": "tracegrade.criteria.trajectory_match",
    "ToolNameMatchCriterion": "tracegrade.criteria.trajectory_match",
    "SqlAssertionCriterion": "tracegrade.criteria.sql_assertion",
    "BudgetCriterion": "tracegrade.criteria.budget",
    "ToolSchemaCriterion": "tracegrade.criteria.tool_schema",
    "CompositeCriterion": "tracegrade.criteria.composite",
    "WeightedCriterion": "tracegrade.criteria.composite",
    "LLMJudgeCriterion": "tracegrade.criteria.llm",
    "ResponseMatchCriterion": "tracegrade.criteria.llm",
    "RubricBasedCriterion": "tracegrade.criteria.llm",
    "FactualAccuracyCriterion": "tracegrade.criteria.llm",
    "HallucinationCriterion": "tracegrade.criteria.llm",
    "SafetyCriterion": "tracegrade.criteria.llm",
    "SimulationGoalsCriterion": "tracegrade.criteria.llm",
    # reporters
    "BaseReporter": "tracegrade.reporters",
    "ConsoleReporter": "tracegrade.reporters",
    "JSONReporter": "tracegrade.reporters",
    "HTMLReporter": "tracegrade.reporters",
    "JUnitXMLReporter": "tracegrade.reporters",
    "ReporterManager": "tracegrade.reporters",
    "ReporterOutput": "tracegrade.reporters",
    "print_report": "tracegrade.reporters",
    # capture and live runs
    "TrajectoryCollector": "tracegrade.capture.collector",
    "make_trajectory_callback": "tracegrade.capture.collector",
    "trace_node": "tracegrade.capture.helpers",
    "trace_tool": "tracegrade.capture.helpers",
    "map_spans": "tracegrade.trajectory",
    "AgentEvaluator": "tracegrade.evaluation.evaluator",
    "create_eval_app": "tracegrade.evaluation.evaluator",
    # grading engine seam
    "EvaluatorFactory": "tracegrade.evaluation.engine",
    "Grader": "tracegrade.evaluation.engine",
    "CriteriaGrader": "tracegrade.evaluation.engine",
    # simulation
    "UserSimulator": "tracegrade.evaluation.simulator",
    "ConversationScenario": "tracegrade.evaluation.simulator",
    "SimulationResult": "tracegrade.evaluation.simulator",
    # harness and presets
    "EvaluationRunner": "tracegrade.evaluation.harness",
    "EvalPresets": "tracegrade.evaluation.presets",
    "QuickEval": "tracegrade.evaluation.quick_eval",
    "BatchSimulator": "tracegrade.evaluation.batch_simulator",
    "Colors": "tracegrade.reporters.colors",
    # testing helpers (the pytest plugin is tracegrade.pytest_plugin)
    "EvalTestCase": "tracegrade.testing.cases",
    "create_simple_eval_set": "tracegrade.testing.cases",
    "parametrize_eval_cases": "tracegrade.testing.cases",
    "assert_eval_passed": "tracegrade.testing.assertions",
    "assert_criterion_passed": "tracegrade.testing.assertions",
    "eval_test": "tracegrade.testing.running",
    "run_eval": "tracegrade.testing.running",
    "run_eval_sync": "tracegrade.testing.running",
    # store and offline grading
    "TraceStore": "tracegrade.store",
    "TraceGrader": "tracegrade.evaluation.offline",
    # errors
    "TracegradeError": "tracegrade.errors",
    "FileFormatError": "tracegrade.errors",
    "EvalSetError": "tracegrade.errors",
    "ConfigError": "tracegrade.errors",
    "NoCriteriaError": "tracegrade.errors",
    "StoreError": "tracegrade.errors",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'tracegrade' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
