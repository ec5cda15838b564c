"""The span tree of one trace (or case): de-duplication, parent links, cycles, orphans, times and ordering.

Everything broken is repaired to the best usable shape and described in ``Issues``; nothing raises.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Final

from tracegrade.models.span import LogRecordData, SpanRecord
from tracegrade.trajectory.values import Issues, SharedWork, index_families

if TYPE_CHECKING:
    from tracegrade.trajectory.langgraph import GraphTask

__all__ = ["Forest", "Role", "SpanNode", "build_forest", "preorder"]


class Role:
    """What a span is to the trajectory (decided once per span, see ``sources.classify``)."""

    LLM: Final = "llm"
    TOOL: Final = "tool"
    AGENT: Final = "agent"  # an agent visit
    NODE: Final = "node"  # a graph node / task visit
    WORKFLOW: Final = "workflow"  # a wrapper around a whole run (not a visit)
    ROUTER: Final = "router"  # a routing function (conditional edge)
    CHAIN: Final = "chain"  # some other step, transparent
    OTHER: Final = "other"

    VISITS: Final = frozenset({AGENT, NODE})


class SpanNode:
    """One span in the tree, with its classification and a per-span memo of values read from it."""

    __slots__ = (
        "_memo",
        "attrs",
        "children",
        "convention",
        "end",
        "index",
        "logs",
        "name",
        "parent",
        "role",
        "shared",
        "span",
        "span_id",
        "start",
        "task",
    )

    def __init__(self, span: SpanRecord, index: int, shared: SharedWork) -> None:
        self.span = span
        self.name = span.name
        self.span_id = span.span_id
        self.attrs: dict[str, Any] = span.attributes if isinstance(span.attributes, dict) else {}
        self.index = index
        self.shared = shared
        self.parent: SpanNode | None = None
        self.children: list[SpanNode] = _NO_CHILDREN  # replaced by a list of its own when a child joins
        self.role = Role.OTHER
        self.convention: str | None = None
        self.task: GraphTask | None = None
        self.logs: list[LogRecordData] = _NO_LOGS  # replaced by a list of its own when a log record joins
        self._memo: dict[str, Any] | None = None
        self.start = span.start_ns
        self.end = span.end_ns

    @property
    def label(self) -> str:
        return f"span {self.span.span_id} ({self.span.name!r})"

    def parsed(self, key: str, expect_json: bool = False) -> Any:
        """Attribute ``key`` with JSON text decoded (None when absent; each distinct text decoded once).

        Structured values (OTLP kvlist/array) come back as they are. Text that should be JSON but is
        not (truncated, or plain text) comes back raw and is recorded as a mapping issue. Decoded values
        may be shared with other spans: never modify them.
        """
        value = self.attrs.get(key)
        if not isinstance(value, str):
            return value
        value, problem = self.shared.decode(value, expect_json)
        if problem:
            self.note(f"attribute {key} {problem}")
        return value

    def first_text(self, *keys: str) -> str | None:
        """The value of the first of ``keys`` that holds a non-empty string (None when none does)."""
        attrs = self.attrs
        for key in keys:
            value = attrs.get(key)
            if isinstance(value, str) and value:
                return value
        return None

    def carries(self, keys: tuple[str, ...]) -> bool:
        """Does the span have at least one of ``keys``? (Looks up each of ``keys``, however many attributes.)"""
        return not self.attrs.keys().isdisjoint(keys)

    def indexed(self, prefix: str) -> dict[int, dict[str, Any]] | None:
        """The flattened list family ``prefix`` (one of ``INDEXED_FAMILIES``) as ``{i: {rest: value}}``."""
        return self.memo("#indexed", _index_families).get(prefix)

    def memo(self, key: str, compute: Callable[[SpanNode], Any]) -> Any:
        """``compute(self)`` once per span (cached under ``key``)."""
        cache = self._memo
        if cache is None:
            cache = self._memo = {}
        elif key in cache:
            return cache[key]
        value = cache[key] = compute(self)
        return value

    def note(self, message: str) -> None:
        self.shared.issues.add(f"{self.label}: {message}")

    def ancestors(self) -> Iterator[SpanNode]:
        node = self.parent
        while node is not None:
            yield node
            node = node.parent


_NO_LOGS: list[LogRecordData] = []  # shared by every span without log records: never appended to
_NO_CHILDREN: list[SpanNode] = []  # shared by every leaf span: never appended to


def _index_families(node: SpanNode) -> dict[str, dict[int, dict[str, Any]]]:
    return index_families(node.attrs)


class Forest:
    """All spans of the input, linked into trees; ``roots`` ordered by start time."""

    __slots__ = ("nodes", "roots", "trace_ids")

    def __init__(self, nodes: list[SpanNode], roots: list[SpanNode], trace_ids: list[str]) -> None:
        self.nodes = nodes
        self.roots = roots
        self.trace_ids = trace_ids

    def release(self) -> None:
        """Unlink parents and children once the mapping is done: the tree is a web of reference cycles, and
        unlinked its spans (with everything read from them) are freed at once instead of piling up for
        the cyclic garbage collector, which then has to walk them again and again."""
        for node in self.nodes:
            node.parent = None
            node.children = _NO_CHILDREN


def build_forest(spans: Iterable[SpanRecord], logs: Iterable[LogRecordData], issues: Issues) -> Forest:
    shared = SharedWork(issues)
    nodes, by_key = _unique_nodes(spans, shared)
    _link_parents(nodes, by_key)
    _break_cycles(nodes)
    roots: list[SpanNode] = []
    for node in nodes:
        parent = node.parent
        if parent is None:
            roots.append(node)
        elif parent.children is _NO_CHILDREN:
            parent.children = [node]
        else:
            parent.children.append(node)
    _repair_times(nodes, roots)
    roots.sort(key=_start_key)
    _attach_logs(by_key, logs)
    shared.trace_keys = frozenset().union(*[n.attrs for n in nodes])
    trace_ids = list(dict.fromkeys([n.span.trace_id for n in roots] + [n.span.trace_id for n in nodes]))
    return Forest(nodes, roots, trace_ids)


def _unique_nodes(
    spans: Iterable[SpanRecord], shared: SharedWork
) -> tuple[list[SpanNode], dict[tuple[str, str], SpanNode]]:
    nodes: list[SpanNode] = []
    by_key: dict[tuple[str, str], SpanNode] = {}
    copies: dict[tuple[str, str], int] = {}
    for span in spans:
        key = (span.trace_id, span.span_id)
        if key in by_key:
            copies[key] = copies.get(key, 1) + 1
            continue
        node = SpanNode(span, len(nodes), shared)
        by_key[key] = node
        nodes.append(node)
        if span.dropped_attributes_count:
            node.note(
                f"dropped {span.dropped_attributes_count} attributes (attribute count limit); "
                "the oldest ones, such as early messages, may be missing"
            )
        if span.dropped_events_count:
            node.note(f"dropped {span.dropped_events_count} events")
    for key, count in copies.items():
        by_key[key].note(f"appears {count} times with the same span id; kept the first copy")
    return nodes, by_key


def _link_parents(nodes: list[SpanNode], by_key: dict[tuple[str, str], SpanNode]) -> None:
    for node in nodes:
        parent_id = node.span.parent_span_id
        if not parent_id:
            continue
        parent = by_key.get((node.span.trace_id, parent_id))
        if parent is None:
            node.note(f"its parent span {parent_id} is not among the spans; treated as a root")
        else:
            node.parent = parent


def _break_cycles(nodes: list[SpanNode]) -> None:
    state = [_UNSEEN] * len(nodes)
    for node in nodes:
        if state[node.index] == _DONE:
            continue
        path: list[SpanNode] = []
        current: SpanNode | None = node
        while current is not None and state[current.index] == _UNSEEN:
            state[current.index] = _ON_PATH
            path.append(current)
            current = current.parent
        if current is not None and state[current.index] == _ON_PATH:
            cycle = path[path.index(current) :]
            names = ", ".join(n.span_id for n in cycle)
            current.note(f"parent links form a cycle ({names}); treated this span as a root")
            current.parent = None
        for walked in path:
            state[walked.index] = _DONE


_UNSEEN, _ON_PATH, _DONE = 0, 1, 2  # _break_cycles: where each span is in the walk up its parents


def _repair_times(nodes: list[SpanNode], roots: list[SpanNode]) -> None:
    """Give spans without times a usable position (their parent's start) and note it."""
    for node in nodes:
        if node.start <= 0 or node.end < node.start:
            break
    else:
        return  # every span has a start and ends after it (the usual case): nothing to repair
    stack = [(root, 0) for root in roots]
    while stack:
        node, parent_start = stack.pop()
        span = node.span
        if span.start_ns <= 0:
            node.start = parent_start
            node.note("has no start time; ordered by its parent and position")
        if span.end_ns <= 0:
            node.end = node.start
            node.note("has no end time; duration unknown")
        elif span.end_ns < node.start:
            node.end = node.start
            node.note("ends before it starts; duration unknown")
        stack.extend((child, node.start) for child in node.children)


def _attach_logs(by_key: dict[tuple[str, str], SpanNode], logs: Iterable[LogRecordData]) -> None:
    for record in logs:
        if record.trace_id and record.span_id:
            node = by_key.get((record.trace_id, record.span_id))
            if node is not None:
                if node.logs is _NO_LOGS:
                    node.logs = []
                node.logs.append(record)


_start_key = attrgetter("start", "index")  # (start, index): execution order of siblings and roots


def _ordered(children: list[SpanNode]) -> list[SpanNode]:
    """Siblings in execution order: LangGraph super-step first when every sibling has one, then start."""
    if len(children) < 2:
        return children
    if all(c.task is not None and c.task.step is not None for c in children):
        return sorted(children, key=lambda c: (c.task.step, c.start, c.index))  # type: ignore[union-attr]
    return sorted(children, key=_start_key)


def preorder(forest: Forest) -> list[SpanNode]:
    """Every span once, parents before children, siblings in execution order."""
    out: list[SpanNode] = []
    stack = list(reversed(forest.roots))
    while stack:
        node = stack.pop()
        out.append(node)
        if node.children:
            stack.extend(reversed(_ordered(node.children)))
    return out
