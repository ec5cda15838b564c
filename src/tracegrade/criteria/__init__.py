"""Criteria: the rules that score one execution against one eval case.

Importing this package registers every built-in criterion in ``CRITERIA_REGISTRY`` under its reported
``name``, its ``CriteriaConfig`` slot name and the reference API's legacy aliases. It never imports an
LLM client library: the judge criteria load theirs on first use.
"""

# --- LLM-judged criteria ------------------------------------------------------------------------------
# The judge criteria live in tracegrade.criteria.llm (owned by the judges work); that package imports
# and registers them here with `from tracegrade.criteria import llm` plus its re-exports.
# ------------------------------------------------------------------------------------------------------
from tracegrade.criteria import llm as _llm  # noqa: F401  (registers the LLM criteria)
from tracegrade.criteria.base import BaseCriterion, SyncCriterion
from tracegrade.criteria.budget import BudgetCriterion
from tracegrade.criteria.composite import CompositeCriterion, WeightedCriterion
from tracegrade.criteria.registry import CRITERIA_REGISTRY, build_criteria, register_criterion
from tracegrade.criteria.sql_assertion import SqlAssertionCriterion
from tracegrade.criteria.text import ContainsKeywordsCriterion, ExactMatchCriterion, RougeMatchCriterion
from tracegrade.criteria.tool_schema import ToolSchemaCriterion
from tracegrade.criteria.trajectory_match import (
    NodeOrderMatchCriterion,
    ToolNameMatchCriterion,
    TrajectoryMatchCriterion,
)

__all__ = [
    "CRITERIA_REGISTRY",
    "BaseCriterion",
    "BudgetCriterion",
    "CompositeCriterion",
    "ContainsKeywordsCriterion",
    "ExactMatchCriterion",
    "NodeOrderMatchCriterion",
    "RougeMatchCriterion",
    "SqlAssertionCriterion",
    "SyncCriterion",
    "ToolNameMatchCriterion",
    "ToolSchemaCriterion",
    "TrajectoryMatchCriterion",
    "WeightedCriterion",
    "build_criteria",
    "register_criterion",
]
