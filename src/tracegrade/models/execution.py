"""What an agent actually did in one case: the execution record every criterion grades.

The trajectory mapper fills it from spans (live capture and stored traces alike); criteria only read it.
Besides its fields, an execution knows where it came from (never serialized): the spans it was mapped
from (live capture) or the store it was read from (offline grading). Criteria that query the trace
itself (SQL assertions) build their tables from that source.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, PrivateAttr

from tracegrade.models.dataset import ToolCall, TrajectoryStep
from tracegrade.models.results import TokenUsage, no_tokens
from tracegrade.models.span import SpanRecord

__all__ = [
    "LLM_CONTENT_FIELDS",
    "ExecutionResult",
    "LLMCall",
    "LeanExecution",
    "NodeResponseData",
    "NodeVisit",
    "ToolDefinition",
    "TurnRecord",
]


class NodeResponseData(BaseModel):
    """Input/output snapshot of one node visit (LLM output of that node, when it had one)."""

    node_name: str = ""
    input_messages: list[dict[str, Any]] = Field(default_factory=list)
    response_text: str = ""
    has_tool_calls: bool = False
    tool_call_names: list[str] = Field(default_factory=list)
    is_final: bool = False
    timestamp: float = 0.0
    token_usage: TokenUsage = Field(default_factory=no_tokens)


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
    token_usage: TokenUsage = Field(default_factory=no_tokens)
    content_captured: bool = True
    span_id: str | None = None
    start_ns: int = 0
    end_ns: int = 0
    finish_reason: str | None = None
    error: str | None = None


class ToolDefinition(BaseModel):
    """A tool the model was offered, as the trace recorded it; ``parameters`` is its arguments' JSON Schema."""

    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None


class TurnRecord(BaseModel):
    """Per-turn data of a multi-turn run."""

    turn_index: int
    user_input: str = ""
    agent_response: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    node_visits: list[str] = Field(default_factory=list)
    trace_id: str | None = None
    duration_seconds: float = 0.0
    token_usage: TokenUsage = Field(default_factory=no_tokens)


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
    tool_definitions: list[ToolDefinition] = Field(default_factory=list)
    turns: list[TurnRecord] = Field(default_factory=list)
    convention: str | None = None
    trace_ids: list[str] = Field(default_factory=list)
    conversation_id: str | None = None
    status: str = "UNSET"
    error: str | None = None
    mapping_issues: list[str] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)
    _source_spans: list[SpanRecord] = PrivateAttr(default_factory=list)
    _source_store: Any = PrivateAttr(default=None)

    @property
    def source_spans(self) -> list[SpanRecord]:
        """The spans this execution was mapped from (empty when it was read from a store or built by hand)."""
        return self._source_spans

    @property
    def source_store(self) -> Any:
        """The trace store (``query_arrow``) this execution was read from, for offline grading; else None."""
        return self._source_store

    def attach_spans(self, spans: list[SpanRecord]) -> None:
        """Record the spans this execution was mapped from."""
        self._source_spans = spans

    def attach_store(self, store: Any) -> None:
        """Record the store this execution was read from (its ``trace_ids`` are rows of that store)."""
        self._source_store = store

    def tool_definition(self, name: str) -> ToolDefinition | None:
        """The captured definition of tool ``name`` (the last one recorded wins), if any."""
        return next((d for d in reversed(self.tool_definitions) if d.name == name), None)

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
            merged.tool_definitions += ex.tool_definitions
            merged._source_spans += ex.source_spans
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
        stores = {id(e.source_store): e.source_store for e in executions}
        if len(stores) == 1:  # turns read from one store can be queried there together
            merged._source_store = first.source_store
        return merged


#: The ``ExecutionResult`` fields that hold the LLM calls (their prompts and replies) and the per-turn records:
#: most of a stored execution. Offline grading reads a trace's ``LeanExecution`` instead of its whole execution
#: unless a criterion reads one of these (``BaseCriterion.reads``).
LLM_CONTENT_FIELDS: frozenset[str] = frozenset({"messages", "node_responses", "llm_calls", "turns"})
_LEAN_EXCLUDE = {"execution": set(LLM_CONTENT_FIELDS)}


class LeanExecution(BaseModel):
    """A stored execution without its ``LLM_CONTENT_FIELDS`` (they are empty), and the agent's token usage that
    its LLM calls add up to (``traces.lean_execution`` in the store)."""

    execution: ExecutionResult
    token_usage: TokenUsage = Field(default_factory=no_tokens)

    @staticmethod
    def dump_json(execution: ExecutionResult) -> str:
        """The JSON of ``execution``'s lean form."""
        lean = LeanExecution(execution=execution, token_usage=execution.token_usage)
        return lean.model_dump_json(exclude=_LEAN_EXCLUDE)  # type: ignore[arg-type]
