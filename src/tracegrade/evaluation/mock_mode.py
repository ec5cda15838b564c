"""``EvalConfig.mock_mode``: grade an eval set without running the agent (a dry run of the set and config).

Each turn's execution is what the invocation expects: the expected final response as the agent's answer,
the expected tool trajectory as its tool calls, the expected node order as its node visits and the expected
intermediate responses as its intermediate model replies. Deterministic criteria then score what the
expectations allow (a case that fails here can never pass: an unreachable threshold, expectations that
contradict each other), and the reporters run on a real report. LLM judges still run if they are enabled.

A simulated case has no scripted turns to stand in for the agent, so it is refused before the run starts.
"""

from __future__ import annotations

from tracegrade.models.dataset import Invocation, TrajectoryStep
from tracegrade.models.execution import ExecutionResult, NodeResponseData

__all__ = ["MOCK_CONVENTION", "expected_execution"]

MOCK_CONVENTION = "mock"  # ExecutionResult.convention of a mocked turn


def expected_execution(invocation: Invocation) -> ExecutionResult:
    """The execution ``invocation`` expects, as if the agent had done exactly that."""
    expected = invocation.expected_final_response
    answer = expected.get_text() if expected is not None else None
    node_responses = [
        NodeResponseData(response_text=message.get_text()) for message in invocation.expected_intermediate_responses
    ]
    if answer is not None:
        node_responses.append(NodeResponseData(response_text=answer, is_final=True))
    steps = [TrajectoryStep.node(name) for name in invocation.expected_node_order]
    steps += [TrajectoryStep.tool(call.name, dict(call.args)) for call in invocation.expected_tool_trajectory]
    return ExecutionResult(
        tool_calls=[call.model_copy(deep=True) for call in invocation.expected_tool_trajectory],
        trajectory=steps,
        actual_response=answer or "",
        node_responses=node_responses,
        node_visits=list(invocation.expected_node_order),
        user_query=invocation.user_content.get_text(),
        response_captured=answer is not None,
        content_captured=True,
        convention=MOCK_CONVENTION,
        status="OK",
    )
