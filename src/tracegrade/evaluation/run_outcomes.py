"""What ``gate`` and ``diff`` read of a run: each case's verdict, criterion verdicts and trajectory, nothing else.

A saved report repeats for every case what each LLM call was given and returned (messages, node details, tool
results): most of its bytes, none of which a comparison reads. These models hold only the fields
:func:`~tracegrade.evaluation.compare.compare_runs` and :func:`~tracegrade.evaluation.run_diff.diff_reports` read,
each of the same type as in :class:`~tracegrade.models.results.EvalReport` (so a value they read is refused just as
the full models refuse it); other keys are skipped by the JSON parser without becoming Python objects. Validated
from JSON text (``model_validate_json``), a run of 100,000 cases loads in a fraction of the time and memory the
full report takes (bench/RESULTS.md). Both comparisons accept a full :class:`EvalReport` as well (:data:`Run`).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from tracegrade.cycle_pause import no_cycle_collection
from tracegrade.models.dataset import ToolCall
from tracegrade.models.results import (
    NO_RESPONSE_ERROR,
    CriterionResult,
    EvalCaseResult,
    EvalReport,
    ReportNumber,
    TrialStats,
)

__all__ = [
    "Call",
    "Case",
    "CaseOutcome",
    "Criterion",
    "CriterionOutcome",
    "Run",
    "RunOutcomes",
    "ToolCallOutcome",
    "case_outcomes",
    "run_outcomes",
]

_SKIP_OTHER_KEYS = ConfigDict(extra="ignore")


class CriterionOutcome(BaseModel):
    """A criterion's verdict on a case, as :class:`CriterionResult` holds it."""

    model_config = _SKIP_OTHER_KEYS

    criterion: str
    score: ReportNumber
    passed: bool
    skipped: bool = False
    error: str | None = None

    @property
    def is_grading_error(self) -> bool:
        """As :attr:`CriterionResult.is_grading_error`: an error of the grading, not a run without a response."""
        return self.error is not None and not self.error.startswith(NO_RESPONSE_ERROR)


class ToolCallOutcome(BaseModel):
    """A recorded tool call's name and arguments (a call written without arguments has none, as in ``ToolCall``)."""

    model_config = _SKIP_OTHER_KEYS

    name: str
    args: dict[str, Any] = Field(default_factory=dict)


class CaseOutcome(BaseModel):
    """One case's verdict, its criteria's verdicts and what its trajectory did, as :class:`EvalCaseResult` holds
    them."""

    model_config = _SKIP_OTHER_KEYS

    eval_id: str
    name: str = ""
    passed: bool
    criterion_results: list[CriterionOutcome] = Field(default_factory=list)
    actual_tool_calls: list[ToolCallOutcome] = Field(default_factory=list)
    actual_response: str = ""
    node_visits: list[str] = Field(default_factory=list)
    error: str | None = None
    trial_stats: TrialStats | None = None

    @property
    def is_error(self) -> bool:
        return self.error is not None

    def get_criterion_result(self, name: str) -> CriterionOutcome | None:
        return next((c for c in self.criterion_results if c.criterion == name), None)


class RunOutcomes(BaseModel):
    """A run's case outcomes and its metadata (which says whether the run was interrupted)."""

    model_config = _SKIP_OTHER_KEYS

    eval_set_id: str
    results: list[CaseOutcome] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)


_CASES = TypeAdapter(list[CaseOutcome])


def run_outcomes(text: bytes | str) -> RunOutcomes:
    """The outcomes of a report's JSON ``text`` (pydantic's ValidationError when they are not there as typed)."""
    with no_cycle_collection():  # its millions of objects hold no cycle
        return RunOutcomes.model_validate_json(text)


def case_outcomes(text: bytes | str) -> list[CaseOutcome]:
    """The outcomes of a JSON array of case results (pydantic's ValidationError when they are not there as typed)."""
    with no_cycle_collection():  # its millions of objects hold no cycle
        return _CASES.validate_json(text)


#: a run as the comparisons read it: a full report (in memory, or read from a file that only it accepts) or outcomes
Run = EvalReport | RunOutcomes
#: one case of a :data:`Run`
Case = EvalCaseResult | CaseOutcome
#: one criterion result of a :data:`Case`
Criterion = CriterionResult | CriterionOutcome
#: one tool call of a :data:`Case`
Call = ToolCall | ToolCallOutcome
