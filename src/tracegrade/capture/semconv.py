"""tracegrade's own span attribute names (INTERFACES §2): written by capture, read by the mapper."""

from __future__ import annotations

__all__ = [
    "CASE_ID",
    "EVAL_SET_ID",
    "NODE_INPUT",
    "NODE_NAME",
    "NODE_OUTPUT",
    "RUN_ID",
    "SPAN_KIND",
    "THREAD_ID",
    "TOOL_ARGUMENTS",
    "TOOL_CALL_ID",
    "TOOL_NAME",
    "TOOL_RESULT",
    "TURN_INDEX",
    "TURN_INPUT",
    "TURN_OUTPUT",
    "TURN_SPAN_PREFIX",
]

# root span of one live eval-case turn: "tracegrade.turn {case_id}"
TURN_SPAN_PREFIX = "tracegrade.turn"
EVAL_SET_ID = "tracegrade.eval_set.id"
CASE_ID = "tracegrade.case.id"
TURN_INDEX = "tracegrade.turn.index"
RUN_ID = "tracegrade.run.id"
TURN_INPUT = "tracegrade.turn.input"
TURN_OUTPUT = "tracegrade.turn.output"
THREAD_ID = "tracegrade.thread_id"

# spans written by trace_node / trace_tool
SPAN_KIND = "tracegrade.span.kind"  # "node" | "tool" | "llm"
NODE_NAME = "tracegrade.node.name"
NODE_INPUT = "tracegrade.node.input"
NODE_OUTPUT = "tracegrade.node.output"
TOOL_NAME = "tracegrade.tool.name"
TOOL_CALL_ID = "tracegrade.tool.call_id"
TOOL_ARGUMENTS = "tracegrade.tool.arguments"
TOOL_RESULT = "tracegrade.tool.result"
