"""Which convention is asked first, for what (span-conventions.md §9).

Each tuple below is a precedence chain: the first reader that finds its source wins. Classification
runs once per span; content is read per span through these chains, so a span carrying several
conventions (pydantic-ai with the OpenInference processor, Traceloop 0.62 with GenAI keys) is read from
its richest source.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from tracegrade.trajectory import adk, genai, langgraph, mlflow, native, openinference, traceloop
from tracegrade.trajectory.readers import Chain
from tracegrade.trajectory.tree import Role, SpanNode

Reader = Callable[[SpanNode], Any]

CLASSIFIERS = Chain(
    native.classify,
    adk.classify_merged_tools,
    genai.classify,
    openinference.classify,
    traceloop.classify,
    mlflow.classify,
    adk.classify,
    genai.classify_by_name,
)
LLM_INPUT = Chain(
    genai.input_messages,
    openinference.input_messages,
    traceloop.prompt_messages,
    genai.event_input,
    genai.pydantic_event_input,
    adk.request_messages,
    mlflow.input_messages,
    openinference.io_input_messages,
)
LLM_OUTPUT = Chain(
    genai.output_messages,
    openinference.output_messages,
    traceloop.completion_messages,
    genai.event_output,
    genai.pydantic_event_output,
    adk.response_messages,
    mlflow.output_messages,
    openinference.io_output_messages,
)
MODEL = Chain(genai.model, openinference.model, mlflow.model)
PROVIDER = Chain(genai.provider, openinference.provider, mlflow.provider)
USAGE = Chain(adk.usage, genai.usage, openinference.usage, mlflow.usage)
FINISH_REASON = Chain(
    genai.finish_reason,
    openinference.finish_reason,
    traceloop.finish_reason,
    adk.finish_reason,
)
TOOL_NAME = Chain(
    native.tool_name,
    genai.tool_name,
    openinference.tool_name,
    traceloop.tool_name,
    mlflow.tool_name,
)
TOOL_ARGS = Chain(
    native.tool_args,
    genai.tool_args,
    genai.event_tool_args,
    adk.tool_args,
    traceloop.tool_args,
    mlflow.tool_args,
    openinference.tool_args,
)
TOOL_RESULT = Chain(
    native.tool_result,
    genai.tool_result,
    genai.event_tool_result,
    adk.tool_result,
    traceloop.tool_result,
    mlflow.tool_result,
    openinference.tool_result,
)
TOOL_CALL_ID = Chain(
    native.tool_call_id,
    genai.tool_call_id,
    openinference.tool_call_id,
    traceloop.tool_call_id,
)
AGENT_NAME = Chain(
    native.node_name,
    genai.agent_name,
    openinference.agent_name,
    traceloop.agent_name,
    adk.agent_name,
)
RUN_QUERY = Chain(genai.run_query, openinference.run_query, traceloop.run_query, mlflow.run_query)
RUN_ANSWER = Chain(genai.run_answer, openinference.run_answer, traceloop.run_answer, mlflow.run_answer)
CONVERSATION_ID = Chain(
    genai.conversation_id,
    openinference.conversation_id,
    traceloop.conversation_id,
    adk.conversation_id,
    native.conversation_id,
)
ROUTING_OUTPUT = Chain(traceloop.routing_output, openinference.routing_output)

# trace-level convention ids, in the order that breaks ties
CONVENTIONS = ("tracegrade", "genai", "openinference", "traceloop", "adk", "mlflow")
_COUNTED_ROLES = frozenset({Role.LLM, Role.TOOL, Role.AGENT, Role.NODE})


def first(chain: Chain, node: SpanNode) -> Any:
    """The first non-None answer of the ``chain``'s readers for ``node``.

    A reader that fails on a malformed span is noted as a mapping issue and skipped, so one bad attribute
    costs only what it holds.
    """
    for reader in chain.readers:
        try:
            value = reader(node)
        except Exception as exc:
            node.note(f"{_reader_name(reader)} could not be read ({type(exc).__name__}: {exc})")
            continue
        if value is not None:
            return value
    return None


def _reader_name(reader: Reader) -> str:
    return f"{reader.__module__.rsplit('.', 1)[-1]}.{getattr(reader, '__name__', 'reader')}"


def first_of(chain: Chain, nodes: Iterable[SpanNode]) -> Any:
    """The first non-None answer over ``nodes`` (in order), each asked the whole chain."""
    for node in nodes:
        value = first(chain, node)
        if value is not None:
            return value
    return None


def node_name(node: SpanNode) -> str:
    if node.task is not None and node.role == Role.NODE:
        return node.task.node
    return first(AGENT_NAME, node) or node.name


def _convention(node: SpanNode) -> str | None:
    attrs = node.attrs
    if "tracegrade.span.kind" in attrs or (node.role == Role.WORKFLOW and native.is_turn(node)):
        return "tracegrade"
    if traceloop.is_traceloop(node):
        return "traceloop"
    if adk.is_adk(node):
        return "adk"
    if "mlflow.spanType" in attrs:
        return "mlflow"
    if "gen_ai.operation.name" in attrs:
        return "genai"
    if "openinference.span.kind" in attrs:
        return "openinference"
    return "genai" if node.role != Role.OTHER else None


def classify_all(nodes: list[SpanNode]) -> dict[int, str]:
    """Give every span its role, convention and LangGraph task; returns the routing spans' chosen branches."""
    destinations: set[str] = set()
    for node in nodes:
        node.role = first(CLASSIFIERS, node) or Role.OTHER
        node.convention = _convention(node)
        node.task = openinference.task(node) or traceloop.task(node)
        if "gen_ai.workflow.nodes" in node.attrs:
            destinations |= traceloop.workflow_nodes(node)
    for node in nodes:
        if node.role == Role.AGENT:
            _collapse_workflow_twin(node)
            _unwrap_anonymous_root_agent(node)
    return langgraph.resolve_graph_roles(nodes, lambda n: first(ROUTING_OUTPUT, n), destinations)


def _collapse_workflow_twin(node: SpanNode) -> None:
    """Traceloop 0.62 ``invoke_agent X`` -> ``X.workflow``: keep the outer span, as the graph-run wrapper."""
    if not node.shared.may_carry(traceloop.WORKFLOW_KIND_KEY):
        return
    for child in node.children:
        if traceloop.is_workflow_twin(node, child):
            node.role = Role.WORKFLOW
            child.role = Role.OTHER
            return


def _unwrap_anonymous_root_agent(node: SpanNode) -> None:
    """OpenAI Agents SDK: the root AGENT span (named after the workflow, no attributes) wraps the agents."""
    if node.parent is not None or node.convention != "openinference" or openinference.has_agent_identity(node):
        return
    stack = list(node.children)
    while stack:
        child = stack.pop()
        if child.role == Role.AGENT:
            node.role = Role.WORKFLOW
            return
        stack.extend(child.children)


def _convention_counts(nodes: list[SpanNode]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for node in nodes:
        if node.convention:
            counts[node.convention] = counts.get(node.convention, 0) + 1
    return counts


def trace_convention(nodes: list[SpanNode]) -> str | None:
    counts = _convention_counts([n for n in nodes if n.role in _COUNTED_ROLES]) or _convention_counts(nodes)
    if not counts:
        return None
    best = max(counts.values())
    return next(c for c in CONVENTIONS if counts.get(c) == best)
