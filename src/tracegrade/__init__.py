"""tracegrade: an OpenTelemetry-native evaluator for LLM agents.

The public API mirrors the reference evaluation API (same class names, fields, defaults and criterion
names). Names load lazily, so ``import tracegrade`` stays fast and pulls in heavy dependencies
(litellm, grpc, duckdb) only when a part that needs them is used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tracegrade._lazy import lazy_exports

# The names __getattr__ loads, spelled out for type checkers (``X as X`` re-exports them under --strict
# too). tests/test_typing_public_api.py checks that this block and _EXPORTS name the same things.
if TYPE_CHECKING:
    from tracegrade.capture.collector import TrajectoryCollector as TrajectoryCollector
    from tracegrade.capture.collector import make_trajectory_callback as make_trajectory_callback
    from tracegrade.capture.helpers import trace_node as trace_node
    from tracegrade.capture.helpers import trace_tool as trace_tool
    from tracegrade.criteria.base import BaseCriterion as BaseCriterion
    from tracegrade.criteria.base import SyncCriterion as SyncCriterion
    from tracegrade.criteria.budget import BudgetCriterion as BudgetCriterion
    from tracegrade.criteria.composite import CompositeCriterion as CompositeCriterion
    from tracegrade.criteria.composite import WeightedCriterion as WeightedCriterion
    from tracegrade.criteria.llm import FactualAccuracyCriterion as FactualAccuracyCriterion
    from tracegrade.criteria.llm import HallucinationCriterion as HallucinationCriterion
    from tracegrade.criteria.llm import LLMJudgeCriterion as LLMJudgeCriterion
    from tracegrade.criteria.llm import ResponseMatchCriterion as ResponseMatchCriterion
    from tracegrade.criteria.llm import RubricBasedCriterion as RubricBasedCriterion
    from tracegrade.criteria.llm import SafetyCriterion as SafetyCriterion
    from tracegrade.criteria.llm import SimulationGoalsCriterion as SimulationGoalsCriterion
    from tracegrade.criteria.registry import CRITERIA_REGISTRY as CRITERIA_REGISTRY
    from tracegrade.criteria.registry import register_criterion as register_criterion
    from tracegrade.criteria.sql_assertion import SqlAssertionCriterion as SqlAssertionCriterion
    from tracegrade.criteria.text import ContainsKeywordsCriterion as ContainsKeywordsCriterion
    from tracegrade.criteria.text import ExactMatchCriterion as ExactMatchCriterion
    from tracegrade.criteria.text import RougeMatchCriterion as RougeMatchCriterion
    from tracegrade.criteria.tool_schema import ToolSchemaCriterion as ToolSchemaCriterion
    from tracegrade.criteria.trajectory_match import NodeOrderMatchCriterion as NodeOrderMatchCriterion
    from tracegrade.criteria.trajectory_match import ToolNameMatchCriterion as ToolNameMatchCriterion
    from tracegrade.criteria.trajectory_match import TrajectoryMatchCriterion as TrajectoryMatchCriterion
    from tracegrade.errors import ConfigError as ConfigError
    from tracegrade.errors import EvalSetError as EvalSetError
    from tracegrade.errors import FileFormatError as FileFormatError
    from tracegrade.errors import NoCriteriaError as NoCriteriaError
    from tracegrade.errors import StoreError as StoreError
    from tracegrade.errors import TracegradeError as TracegradeError
    from tracegrade.evaluation.batch_simulator import BatchSimulator as BatchSimulator
    from tracegrade.evaluation.compare import RunComparison as RunComparison
    from tracegrade.evaluation.compare import compare_runs as compare_runs
    from tracegrade.evaluation.engine import CriteriaGrader as CriteriaGrader
    from tracegrade.evaluation.engine import EvaluatorFactory as EvaluatorFactory
    from tracegrade.evaluation.engine import Grader as Grader
    from tracegrade.evaluation.evaluator import AgentEvaluator as AgentEvaluator
    from tracegrade.evaluation.evaluator import create_eval_app as create_eval_app
    from tracegrade.evaluation.harness import EvaluationRunner as EvaluationRunner
    from tracegrade.evaluation.offline import TraceGrader as TraceGrader
    from tracegrade.evaluation.presets import EvalPresets as EvalPresets
    from tracegrade.evaluation.quick_eval import QuickEval as QuickEval
    from tracegrade.evaluation.simulator import ConversationScenario as ConversationScenario
    from tracegrade.evaluation.simulator import SimulationResult as SimulationResult
    from tracegrade.evaluation.simulator import UserSimulator as UserSimulator
    from tracegrade.models.builder import EvalSetBuilder as EvalSetBuilder
    from tracegrade.models.config import DEFAULT_JUDGE_MODEL as DEFAULT_JUDGE_MODEL
    from tracegrade.models.config import ArgMatchMode as ArgMatchMode
    from tracegrade.models.config import CriteriaConfig as CriteriaConfig
    from tracegrade.models.config import CriterionConfig as CriterionConfig
    from tracegrade.models.config import EvalConfig as EvalConfig
    from tracegrade.models.config import MatchType as MatchType
    from tracegrade.models.config import ReporterConfig as ReporterConfig
    from tracegrade.models.config import Rubric as Rubric
    from tracegrade.models.config import ToolArgsRule as ToolArgsRule
    from tracegrade.models.config import UserSimulatorConfig as UserSimulatorConfig
    from tracegrade.models.dataset import EvalCase as EvalCase
    from tracegrade.models.dataset import EvalSet as EvalSet
    from tracegrade.models.dataset import Invocation as Invocation
    from tracegrade.models.dataset import MessageContent as MessageContent
    from tracegrade.models.dataset import SessionInput as SessionInput
    from tracegrade.models.dataset import StepType as StepType
    from tracegrade.models.dataset import ToolCall as ToolCall
    from tracegrade.models.dataset import TrajectoryStep as TrajectoryStep
    from tracegrade.models.execution import ExecutionResult as ExecutionResult
    from tracegrade.models.execution import LLMCall as LLMCall
    from tracegrade.models.execution import NodeResponseData as NodeResponseData
    from tracegrade.models.execution import NodeVisit as NodeVisit
    from tracegrade.models.results import CriterionResult as CriterionResult
    from tracegrade.models.results import EvalCaseResult as EvalCaseResult
    from tracegrade.models.results import EvalReport as EvalReport
    from tracegrade.models.results import EvalSummary as EvalSummary
    from tracegrade.models.results import NodeDetail as NodeDetail
    from tracegrade.models.results import TokenUsage as TokenUsage
    from tracegrade.models.span import SpanRecord as SpanRecord
    from tracegrade.reporters import BaseReporter as BaseReporter
    from tracegrade.reporters import ConsoleReporter as ConsoleReporter
    from tracegrade.reporters import HTMLReporter as HTMLReporter
    from tracegrade.reporters import JSONReporter as JSONReporter
    from tracegrade.reporters import JUnitXMLReporter as JUnitXMLReporter
    from tracegrade.reporters import ReporterManager as ReporterManager
    from tracegrade.reporters import ReporterOutput as ReporterOutput
    from tracegrade.reporters import print_report as print_report
    from tracegrade.reporters.colors import Colors as Colors
    from tracegrade.store import TraceStore as TraceStore
    from tracegrade.testing.assertions import assert_criterion_passed as assert_criterion_passed
    from tracegrade.testing.assertions import assert_eval_passed as assert_eval_passed
    from tracegrade.testing.cases import EvalTestCase as EvalTestCase
    from tracegrade.testing.cases import create_simple_eval_set as create_simple_eval_set
    from tracegrade.testing.cases import parametrize_eval_cases as parametrize_eval_cases
    from tracegrade.testing.running import eval_test as eval_test
    from tracegrade.testing.running import run_eval as run_eval
    from tracegrade.testing.running import run_eval_sync as run_eval_sync
    from tracegrade.trajectory import map_spans as map_spans

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
    # comparing runs (what `tracegrade gate` decides on)
    "compare_runs": "tracegrade.evaluation.compare",
    "RunComparison": "tracegrade.evaluation.compare",
    # errors
    "TracegradeError": "tracegrade.errors",
    "FileFormatError": "tracegrade.errors",
    "EvalSetError": "tracegrade.errors",
    "ConfigError": "tracegrade.errors",
    "NoCriteriaError": "tracegrade.errors",
    "StoreError": "tracegrade.errors",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
