"""What an agent actually did in one case: the execution record every criterion grades.

The trajectory mapper fills it from spans (live capture and stored traces alike); criteria only read it.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from tracegrade.models.dataset import ToolCall, TrajectoryStep
from tracegrade.models.results import TokenUsage

__all__ = ["ExecutionResult", "LLMCall", "NodeResponseData", "NodeVisit", "TurnRecord"]


class NodeResponseData(BaseModel):
    """Input/output snapshot of one node visit (LLM output of that node, when it had one)."""

    node_name: str = ""
    input_messages: list[dict[str, Any]] = Field(default_factory=list)
    response_text: str = ""
    has_tool_calls: bool = False
    tool_call_names: list[str] = Field(default_factory=list)
    is_final: bool = False
    timestamp: float = 0.0
    token_usage: TokenUsage = Field(default_factory=TokenUsage)


class NodeVisit(BaseModel):
    """One node/agent visit. Visits with the same ``parallel_group`` ran side by side (one super-step)."""

    name: str
    span_id: str | None = None
    parent_name: str | None = None
    start_ns: int = 0
    end_ns: int = 0
    parallel_group: int | None = None
    step: int | None = None
    status: str = "UNSET"


class LLMCall(BaseModel):
    """One model call (a wrapper span around a model span counts once)."""

    model: str | None = None
    provider: str | None = None
    node: str | None = None
    input_messages: list[dict[str, Any]] = Field(default_factory=list)
    output_messages: list[dict[str, Any]] = Field(default_factory=list)
    output_text: str | None = None
    tool_call_requests: list[ToolCall] = Field(default_factory=list)
    token_usage: TokenUsage = Field(default_factory=TokenUsage)
    content_captured: bool = True
    span_id: str | None = None
    start_ns: int = 0
    end_ns: int = 0
    finish_reason: str | None = None
    error: str | None = None


class TurnRecord(BaseModel):
    """Per-turn data of a multi-turn run."""

    turn_index: int
    user_input: str = ""
    agent_response: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    node_visits: list[str] = Field(default_factory=list)
    trace_id: str | None = None
    duration_seconds: float = 0.0
    token_usage: TokenUsage = Field(default_factory=TokenUsage)


class ExecutionResult(BaseModel):
    """The actual execution of one case (all turns accumulated).

    ``content_captured`` is False when the instrumentation recorded no message or tool content; the
    ``user_query``/``actual_response`` are then unknown rather than empty. ``mapping_issues`` lists what
    the mapper could not read (broken spans, truncated JSON, dropped attributes).
    """

    tool_calls: list[ToolCall] = Field(default_factory=list)
    trajectory: list[TrajectoryStep] = Field(default_factory=list)
    messages: list[dict[str, Any]] = Field(default_factory=list)
    actual_response: str = ""
    node_responses: list[NodeResponseData] = Field(default_factory=list)
    node_visits: list[str] = Field(default_factory=list)
    duration_seconds: float = 0.0
    user_query: str | None = None
    response_captured: bool = True
    content_captured: bool = True
    visits: list[NodeVisit] = Field(default_factory=list)
    llm_calls: list[LLMCall] = Field(default_factory=list)
    turns: list[TurnRecord] = Field(default_factory=list)
    convention: str | None = None
    trace_ids: list[str] = Field(default_factory=list)
    conversation_id: str | None = None
    status: str = "UNSET"
    error: str | None = None
    mapping_issues: list[str] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @property
    def token_usage(self) -> TokenUsage:
        """Agent token usage: the sum over LLM calls (never agent/workflow span totals)."""
        return sum((c.token_usage for c in self.llm_calls), TokenUsage())

    @property
    def tool_trajectory(self) -> list[TrajectoryStep]:
        return [s for s in self.trajectory if s.step_type == "tool"]

    def get_tool_names(self) -> list[str]:
        return [tc.name for tc in self.tool_calls]

    @classmethod
    def merge_turns(cls, executions: list[ExecutionResult]) -> ExecutionResult:
        """Accumulate per-turn executions into one (what criteria grade for a multi-turn case)."""
        if len(executions) == 1:
            return executions[0]
        merged = cls()
        for i, ex in enumerate(executions):
            merged.tool_calls += ex.tool_calls
            merged.trajectory += ex.trajectory
            merged.node_responses += ex.node_responses
            merged.node_visits += ex.node_visits
            merged.visits += ex.visits
            merged.llm_calls += ex.llm_calls
            merged.trace_ids += ex.trace_ids
            merged.mapping_issues += ex.mapping_issues
            merged.duration_seconds += ex.duration_seconds
            merged.turns += ex.turns or [
                TurnRecord(
                    turn_index=i,
                    user_input=ex.user_query or "",
                    agent_response=ex.actual_response,
                    tool_calls=ex.tool_calls,
                    node_visits=ex.node_visits,
                    trace_id=ex.trace_ids[0] if ex.trace_ids else None,
                    duration_seconds=ex.duration_seconds,
                    token_usage=ex.token_usage,
                )
            ]
            # A turn's messages usually repeat the conversation so far as their prefix: keep only what is new.
            seen = len(merged.messages)
            repeats_history = ex.messages[:seen] == merged.messages
            merged.messages += ex.messages[seen:] if repeats_history else ex.messages
        first, last = executions[0], executions[-1]
        merged.user_query = first.user_query
        merged.actual_response = last.actual_response
        merged.response_captured = last.response_captured
        merged.content_captured = all(e.content_captured for e in executions)
        merged.convention = first.convention
        merged.conversation_id = first.conversation_id
        merged.status = "ERROR" if any(e.status == "ERROR" for e in executions) else last.status
        merged.error = next((e.error for e in executions if e.error), None)
        return merged
