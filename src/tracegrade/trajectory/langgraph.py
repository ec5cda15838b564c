"""LangGraph task metadata (shared by OpenInference and Traceloop): node visits, routing steps, super-steps.

Both instrumentations stamp the same run metadata on every span of a node's task: ``langgraph_node``,
``langgraph_step``, ``langgraph_checkpoint_ns`` (unique per task, ``|``-nested in subgraphs),
``langgraph_triggers``. Child spans inherit their node's metadata, so among the spans sharing one
checkpoint namespace only the outermost is the visit; an inner span with the node's own name is the
subgraph's second span; an inner span that returns a node name (or ``__end__``) is a routing function.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tracegrade.trajectory.tree import Role, SpanNode
from tracegrade.trajectory.values import as_int

__all__ = ["END_NODES", "GraphTask", "graph_task", "resolve_graph_roles"]

END_NODES = frozenset({"__end__", "END"})
_INTERNAL_NODES = frozenset({"__start__", "__end__"})


@dataclass(slots=True)
class GraphTask:
    node: str
    step: int | None
    checkpoint_ns: str


def graph_task(metadata: Any) -> GraphTask | None:
    """The task identity from a LangGraph metadata mapping (None when the span is not inside a node)."""
    if not isinstance(metadata, dict):
        return None
    node = metadata.get("langgraph_node")
    if not isinstance(node, str) or not node:
        return None
    namespace = metadata.get("langgraph_checkpoint_ns") or metadata.get("checkpoint_ns") or ""
    return GraphTask(node, as_int(metadata.get("langgraph_step")), str(namespace))


def _chosen_branch(value: Any, destinations: set[str]) -> str | None:
    if isinstance(value, str) and value in destinations:
        return value
    if isinstance(value, list) and value and all(isinstance(v, str) and v in destinations for v in value):
        return ",".join(value)
    return None


def resolve_graph_roles(
    nodes: list[SpanNode],
    routing_output: Callable[[SpanNode], Any],
    extra_destinations: set[str],
) -> dict[int, str]:
    """Re-classify spans that carry LangGraph task metadata; returns chosen branches of routing spans.

    LLM and tool spans keep their role. Of the other spans sharing a checkpoint namespace, the
    outermost becomes a ``NODE`` visit and the rest are transparent, except routing functions
    (``ROUTER``, with the chosen branch in the returned ``{span index: branch}``).
    """
    tasks = [n for n in nodes if n.task is not None and n.role not in (Role.LLM, Role.TOOL)]
    if not tasks:
        return {}
    destinations = {n.task.node for n in tasks if n.task} | END_NODES | extra_destinations
    branches: dict[int, str] = {}
    for node in tasks:
        task = node.task
        assert task is not None
        outer = next(
            (a for a in node.ancestors() if a.task is not None and a.task.checkpoint_ns == task.checkpoint_ns),
            None,
        )
        if outer is None:
            node.role = Role.OTHER if task.node in _INTERNAL_NODES else Role.NODE
            continue
        node.role = Role.CHAIN
        if node.name != task.node and not node.name.endswith(f" {task.node}"):
            branch = _chosen_branch(routing_output(node), destinations)
            if branch is not None:
                node.role = Role.ROUTER
                branches[node.index] = branch
    return branches
