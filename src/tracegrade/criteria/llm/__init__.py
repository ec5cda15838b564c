"""LLM-judged criteria (importing this package registers them; litellm loads only on the first call)."""

from tracegrade.criteria.llm.base import SampleVerdict, TemplatedLLMCriterion
from tracegrade.criteria.llm.goals import SimulationGoalsCriterion
from tracegrade.criteria.llm.grounding import FactualAccuracyCriterion, HallucinationCriterion
from tracegrade.criteria.llm.response import LLMJudgeCriterion, ResponseMatchCriterion
from tracegrade.criteria.llm.rubric import RubricBasedCriterion
from tracegrade.criteria.llm.safety import SafetyCriterion

__all__ = [
    "FactualAccuracyCriterion",
    "HallucinationCriterion",
    "LLMJudgeCriterion",
    "ResponseMatchCriterion",
    "RubricBasedCriterion",
    "SafetyCriterion",
    "SampleVerdict",
    "SimulationGoalsCriterion",
    "TemplatedLLMCriterion",
]
