"""Turning stored traces into an eval set: the quickest way to a golden set from real traffic."""

from __future__ import annotations

from collections.abc import Callable

from tracegrade.evaluation.selection import QueryableStore, TraceSelection, iter_executions, selected_trace_ids
from tracegrade.models.dataset import EvalCase, EvalSet, Invocation, MessageContent, ToolCall

__all__ = ["cases_from_traces"]


def cases_from_traces(
    store: QueryableStore,
    selection: TraceSelection,
    name: str = "exported",
    progress: Callable[[int, int], None] | None = None,
) -> EvalSet:
    """One single-turn case per selected trace, expecting exactly what the trace did.

    Each case carries ``metadata.selector.trace_id`` so that grading the exported set against the same
    store finds its trace directly. Tool calls whose arguments were not captured are exported with
    ``args={}`` (any arguments accepted) and flagged in the case metadata. ``progress(done, total)`` is
    told how many traces are read.
    """
    cases = []
    trace_ids = selected_trace_ids(store, selection)
    read = ("tool_calls", "user_query", "node_visits", "actual_response", "response_captured")
    for done, (tid, ex, _, _) in enumerate(iter_executions(store, trace_ids, fields=read)):
        if progress is not None:
            progress(done, len(trace_ids))
        if ex is None:
            continue
        uncaptured = [tc.name for tc in ex.tool_calls if not tc.args_captured]
        invocation = Invocation(
            user_content=MessageContent.user(ex.user_query or ""),
            expected_tool_trajectory=[
                ToolCall(name=tc.name, args=tc.args if tc.args_captured else {}) for tc in ex.tool_calls
            ],
            expected_node_order=list(ex.node_visits),
            expected_final_response=(
                MessageContent.assistant(ex.actual_response) if ex.response_captured and ex.actual_response else None
            ),
        )
        metadata: dict[str, object] = {"selector": {"trace_id": tid}, "source_trace_id": tid}
        if uncaptured:
            metadata["arguments_not_captured"] = uncaptured
        cases.append(
            EvalCase(
                eval_id=f"trace-{tid}",  # the whole id: 64-bit ids padded to 128 bits share their first half
                name=(ex.user_query or f"trace {tid[:16]}")[:80],
                conversation=[invocation],
                tags=["exported"],
                metadata=metadata,
            )
        )
    return EvalSet(eval_set_id=name, name=name, eval_cases=cases, metadata={"exported_from": "tracegrade"})
