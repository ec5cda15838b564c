"""Each built-in criterion names the execution fields it reads (``reads``; offline grading loads no more of a
stored trace): graded on an execution that keeps only those fields, it gives the result it gives on the whole."""

from __future__ import annotations

import pytest

from tracegrade.criteria import (
    CRITERIA_REGISTRY,
    CompositeCriterion,
    ContainsKeywordsCriterion,
    ExactMatchCriterion,
    NodeOrderMatchCriterion,
    RougeMatchCriterion,
    ToolNameMatchCriterion,
    ToolSchemaCriterion,
    TrajectoryMatchCriterion,
    WeightedCriterion,
)
from tracegrade.criteria.adk_scoring import AdkResponseMatchCriterion, AdkTrajectoryCriterion
from tracegrade.criteria.base import BaseCriterion, fields_read
from tracegrade.models import EvalCase, ExecutionResult, Invocation, ToolCall
from tracegrade.models.config import CriterionConfig, MatchType, ToolSchemaConfig
from tracegrade.models.dataset import TrajectoryStep
from tracegrade.models.execution import LLMCall, NodeResponseData, NodeVisit, ToolDefinition, TurnRecord
from tracegrade.models.results import TokenUsage

CALLS = [
    ToolCall(name="lookup", args={"order": 7, "items": [1, 2]}, call_id="c1", result={"ok": True}),
    ToolCall(name="refund", args={"order": 7}, call_id="c2", error="declined", args_captured=True),
    ToolCall(name="notify", args={}, call_id="c3", args_captured=False),
]
# Every field set, and set differently from what the criteria read, so reading the wrong field shows.
WHOLE = ExecutionResult(
    tool_calls=CALLS,
    trajectory=[TrajectoryStep.node("planner"), TrajectoryStep.tool("search", {"q": "other"})],
    messages=[{"role": "assistant", "content": "a refund for order 7 was declined"}],
    actual_response="Your refund for order 7 was declined; we will notify you.",
    node_responses=[NodeResponseData(node_name="writer", response_text="refund approved", is_final=True)],
    node_visits=["planner", "tools", "writer"],
    duration_seconds=3.5,
    user_query="where is my refund",
    visits=[NodeVisit(name="other_node")],
    llm_calls=[LLMCall(model="m", output_text="refund approved", token_usage=TokenUsage(input_tokens=9))],
    tool_definitions=[
        ToolDefinition(name="lookup", parameters={"type": "object", "properties": {"order": {"type": "integer"}}}),
        ToolDefinition(name="refund", parameters={"type": "object", "properties": {"order": {"type": "string"}}}),
    ],
    turns=[TurnRecord(turn_index=0, user_input="q", agent_response="refund approved", tool_calls=CALLS[:1])],
    convention="native",
    trace_ids=["t1"],
    conversation_id="conv",
    status="ERROR",
    error="partial",
    mapping_issues=["one span unreadable"],
    metadata={"k": "v"},
)
CASE = EvalCase(
    eval_id="case",
    conversation=[
        Invocation.simple(
            "where is my refund",
            "Your refund for order 7 was approved.",
            [ToolCall(name="lookup", args={"order": 7, "items": [1, 2]}), ToolCall(name="refund", args={"order": 8})],
            ["planner", "writer"],
        )
    ],
)
CRITERIA: list[BaseCriterion] = [
    TrajectoryMatchCriterion(CriterionConfig.trajectory(check_args=True, match_type=MatchType.IN_ORDER)),
    TrajectoryMatchCriterion(CriterionConfig.trajectory(check_args=False)),
    NodeOrderMatchCriterion(CriterionConfig.node_order(match_type=MatchType.ANY_ORDER)),
    ToolNameMatchCriterion(CriterionConfig.tool_name_match()),
    ExactMatchCriterion(),
    RougeMatchCriterion(CriterionConfig.rouge_match()),
    ContainsKeywordsCriterion(["refund", "approved"]),
    ToolSchemaCriterion(ToolSchemaConfig()),
    AdkTrajectoryCriterion(CriterionConfig.trajectory(check_args=False)),
    AdkResponseMatchCriterion(CriterionConfig.rouge_match()),
]


UNCAPTURED = WHOLE.model_copy(update={"response_captured": False, "content_captured": False})


@pytest.mark.parametrize("whole", [WHOLE, UNCAPTURED], ids=["captured", "uncaptured"])
@pytest.mark.parametrize("criterion", CRITERIA, ids=lambda c: type(c).__name__)
def test_a_criterion_graded_on_the_fields_it_reads_gives_its_whole_result(
    criterion: BaseCriterion, whole: ExecutionResult
) -> None:
    reads = criterion.fields_read()
    assert reads is not None, "every built-in deterministic criterion declares what it reads"
    kept = ExecutionResult(**{name: getattr(whole, name) for name in reads})
    assert criterion.evaluate_sync(kept, CASE) == criterion.evaluate_sync(whole, CASE)  # type: ignore[attr-defined]


def test_declared_fields_are_execution_fields() -> None:
    for cls in set(CRITERIA_REGISTRY.values()):
        assert cls.reads is None or cls.reads <= ExecutionResult.model_fields.keys(), cls


def test_composites_read_what_their_parts_read() -> None:
    text, trajectory = RougeMatchCriterion(), TrajectoryMatchCriterion()
    assert CompositeCriterion([text, trajectory]).fields_read() == text.reads | trajectory.reads  # type: ignore[operator]
    assert WeightedCriterion([(text, 1.0)]).fields_read() == text.reads

    class Anything(ExactMatchCriterion):
        reads = None

    assert CompositeCriterion([text, Anything()]).fields_read() is None  # one part may read anything
    assert fields_read([]) == frozenset()
