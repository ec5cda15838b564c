"""A large, realistic EvalReport (one graded agent trace per case) for the size and speed checks of reporters."""

from __future__ import annotations

from tracegrade.models.dataset import ToolCall, TrajectoryStep
from tracegrade.models.results import CriterionResult, EvalCaseResult, EvalReport, TokenUsage

__all__ = ["large_report"]


def _case(i: int, failing_every: int) -> EvalCaseResult:
    fails = i % failing_every == 0
    calls = [
        ToolCall(name="lookup_order", args={"order_id": 10_000 + i}, result={"status": "shipped", "eta_days": i % 5}),
        ToolCall(name="notify_customer", args={"order_id": 10_000 + i, "channel": "email"}, result="queued"),
    ]
    steps = [
        TrajectoryStep(step_type="node", name="planner"),
        TrajectoryStep(step_type="tool", name="lookup_order", args={"order_id": 10_000 + i}),
        TrajectoryStep(step_type="tool", name="notify_customer", args={"order_id": 10_000 + i}),
        TrajectoryStep(step_type="node", name="responder"),
    ]
    criteria = [
        CriterionResult.success(
            "tool_trajectory_avg_score",
            0.5 if fails else 1.0,
            0.8,
            {"reason": "1 of 2 expected tools called" if fails else "every expected tool called"},
        ),
        CriterionResult.success("contains_keywords", 1.0, 0.5, {"reason": "found: order"}),
        CriterionResult.success("node_order_match", 1.0, 0.8, {}),
    ]
    return EvalCaseResult.success(
        f"case-{i:06d}",
        criteria,
        name=f"Where is my order {10_000 + i}?",
        actual_response=f"Your order {10_000 + i} has shipped and should arrive in {i % 5} days. "
        "We have emailed you the tracking link.",
        actual_tool_calls=calls,
        actual_trajectory=steps,
        node_visits=["planner", "tools", "responder"],
        duration_seconds=0.8 + (i % 7) / 10,
        agent_token_usage=TokenUsage(input_tokens=900 + i % 50, output_tokens=60, calls=2),
        trace_ids=[f"{i:032x}"],
    )


def large_report(cases: int, failing_every: int = 20) -> EvalReport:
    """``cases`` graded cases, one in ``failing_every`` failing its trajectory check."""
    return EvalReport.create("orders", [_case(i, failing_every) for i in range(1, cases + 1)], "Order support")
