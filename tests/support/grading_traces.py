"""Stored agent traces for the offline-grading tests: span records as ``trace_node``/``trace_tool`` and
``AgentEvaluator`` write them (INTERFACES §2), written into a real TraceStore and mapped by the real mapper."""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tracegrade.models.config import CriteriaConfig, CriterionConfig, EvalConfig
from tracegrade.models.span import SpanRecord
from tracegrade.store import TraceStore

__all__ = ["AgentRun", "fill_store", "keywords_config", "run_spans"]

BASE_NS = 1_767_225_600_000_000_000  # 2026-01-01T00:00:00Z
_span_numbers = itertools.count(1)


@dataclass
class AgentRun:
    """One agent turn: planner -> tools -> responder, the reply, and the tracegrade case stamps if any."""

    trace_no: int
    query: str
    response: str
    tools: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    nodes: tuple[str, ...] = ("planner", "responder")
    case_id: str | None = None
    run_id: str | None = None
    eval_set_id: str = "support"
    turn_index: int = 0
    thread_id: str | None = None
    start_offset_s: float = 0.0  # seconds after BASE_NS (orders traces in time)
    service: str = "support-bot"

    @property
    def trace_id(self) -> str:
        return f"{self.trace_no:032x}"


def run_spans(run: AgentRun) -> list[SpanRecord]:
    """The spans of one run; a root ``tracegrade.turn`` span when it is stamped with a case id, else an
    OpenInference AGENT span as root (production traffic) whose ``session.id`` is the conversation."""
    start = BASE_NS + int(run.start_offset_s * 1e9)
    resource = {"service.name": run.service}
    spans: list[SpanRecord] = []

    def span(name: str, parent: str | None, offset_ms: int, attrs: dict[str, Any]) -> str:
        span_id = f"{next(_span_numbers):016x}"
        begin = start + offset_ms * 1_000_000
        spans.append(
            SpanRecord(
                trace_id=run.trace_id,
                span_id=span_id,
                name=name,
                start_ns=begin,
                end_ns=begin + 900_000,
                parent_span_id=parent,
                attributes=attrs,
                resource=resource,
            )
        )
        return span_id

    if run.case_id is not None:
        root_attrs: dict[str, Any] = {
            "tracegrade.eval_set.id": run.eval_set_id,
            "tracegrade.case.id": run.case_id,
            "tracegrade.turn.index": run.turn_index,
            "tracegrade.run.id": run.run_id or "run-1",
            "tracegrade.turn.input": run.query,
            "tracegrade.turn.output": run.response,
        }
        if run.thread_id:
            root_attrs["tracegrade.thread_id"] = run.thread_id
        root = span(f"tracegrade.turn {run.case_id}", None, 0, root_attrs)
    else:
        attrs = {"openinference.span.kind": "AGENT", "input.value": run.query, "output.value": run.response}
        if run.thread_id:
            attrs["session.id"] = run.thread_id
        root = span("support-agent", None, 0, attrs)
    offset = 1
    first, *rest = run.nodes
    span(
        first,
        root,
        offset,
        {"tracegrade.span.kind": "node", "tracegrade.node.name": first, "tracegrade.node.input": run.query},
    )
    for i, (name, args) in enumerate(run.tools):
        offset += 1
        span(
            name,
            root,
            offset,
            {
                "tracegrade.span.kind": "tool",
                "tracegrade.tool.name": name,
                "tracegrade.tool.call_id": f"call-{run.trace_no}-{i}",
                "tracegrade.tool.arguments": json.dumps(args),
                "tracegrade.tool.result": json.dumps({"ok": True}),
            },
        )
    for name in rest:
        offset += 1
        span(
            name,
            root,
            offset,
            {"tracegrade.span.kind": "node", "tracegrade.node.name": name, "tracegrade.node.output": run.response},
        )
    return spans


def fill_store(path: Path | TraceStore, runs: list[AgentRun]) -> TraceStore:
    """A read-write store at ``path`` (or that store, a lake for instance) holding ``runs`` with their
    trajectories built (caller closes it)."""
    store = path if isinstance(path, TraceStore) else TraceStore(path)
    spans = [s for run in runs for s in run_spans(run)]
    result = store.write(spans)
    store.rebuild_trajectories(sorted(result.trace_ids))
    return store


def keywords_config(*words: str) -> EvalConfig:
    """A config with one criterion, reference-free: the response contains every one of ``words``."""
    return EvalConfig(criteria=CriteriaConfig(contains_keywords=CriterionConfig.contains_keywords(list(words))))
