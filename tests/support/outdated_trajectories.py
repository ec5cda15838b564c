"""Stored traces whose trajectories an older mapper built, for the tests of ``tracegrade rebuild``, and the checks
that a rebuild (finished, killed or failed) left each of them whole, on a file or a lake (a ``LakeStore`` is one).

The older build is told apart row by row: its node_visits, tool_calls and llm_calls rows carry
``duration_ms = -1``, which the mapper never derives, and its ``traces`` row has no mapper revision."""

from __future__ import annotations

import os
import subprocess
import sys

import pyarrow as pa

from tests.support.mapper_spans import SpanBuilder, js
from tracegrade.models.span import SpanRecord
from tracegrade.store.tenancy import DEFAULT_TENANT
from tracegrade.store.trace_store import TraceStore
from tracegrade.store.trajectories import TrajectoryRows, execution_rows
from tracegrade.trajectory import MAPPER_REVISION, map_spans

__all__ = ["current_count", "read_until", "rebuild_process", "store_outdated"]

OLD_BUILD = -1.0  # the duration_ms of every step row the older mapper built here
STEP_TABLES = ("node_visits", "tool_calls", "llm_calls")
STEPS_PER_TRACE = 1  # the agent run below makes one node visit, one tool call and one LLM call
LAUNCH = [sys.executable, "-c", "from tracegrade.cli.main import main; main()"]


def _agent_run(trace_id: str) -> list[SpanRecord]:
    """An ADK agent that asks its model, then calls a tool: a node visit, an LLM call and a tool call."""
    b = SpanBuilder(trace_id, scope="gcp.vertex.agent")
    model_call = {
        "gen_ai.request.model": "gemini-2.0-flash",
        "gen_ai.usage.input_tokens": 30,
        "gen_ai.usage.output_tokens": 5,
        "gcp.vertex.agent.llm_request": js(
            {"contents": [{"role": "user", "parts": [{"text": f"Bergen {trace_id}?"}]}]}
        ),
        "gcp.vertex.agent.llm_response": js({"content": {"role": "model", "parts": [{"text": "Rain."}]}}),
    }
    tool_call = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "lookup",
        "gen_ai.tool.call.id": f"call-{trace_id}",
        "gcp.vertex.agent.tool_call_args": js({"city": "Bergen"}),
        "gcp.vertex.agent.tool_response": js({"ok": True}),
    }
    with b.span("invocation"), b.span("invoke_agent router"):
        b.leaf("call_llm", model_call)
        b.leaf("execute_tool lookup", tool_call)
    return b.spans


def store_outdated(
    store: TraceStore, count: int, *, tenant: str = DEFAULT_TENANT, first: int = 1
) -> dict[str, set[str]]:
    """Store ``count`` agent runs of ``tenant``'s, trace ids numbered from ``first``, with trajectories an older
    mapper built (revision NULL, step rows marked ``OLD_BUILD``); each trace id with the ids of its spans."""
    runs = {f"{n:032x}": _agent_run(f"{n:032x}") for n in range(first, first + count)}
    store.write([span for spans in runs.values() for span in spans], tenant=tenant)
    rows = TrajectoryRows()
    stamp = store.stamp()
    for trace_id, spans in runs.items():
        execution_rows(trace_id, map_spans(spans), spans, stamp, rows)
    tables = rows.to_arrow()
    for name in STEP_TABLES:
        old = pa.array([OLD_BUILD] * tables[name].num_rows, tables[name].schema.field("duration_ms").type)
        tables[name] = tables[name].set_column(tables[name].schema.get_field_index("duration_ms"), "duration_ms", old)
    revision = tables["traces"].schema.get_field_index("mapper_revision")
    tables["traces"] = tables["traces"].set_column(
        revision, "mapper_revision", pa.nulls(len(runs), tables["traces"].schema.field(revision).type)
    )
    claim = store.builds.claim_traces([(tenant, trace_id) for trace_id in runs])
    store.replace_trajectories(tables, clear=list(runs), tenant=tenant)
    store.builds.finish(claim, built=True)
    return {trace_id: {span.span_id for span in spans} for trace_id, spans in runs.items()}


def current_count(store: TraceStore, spans_of: dict[str, set[str]]) -> int:
    """Check every trace of ``spans_of`` trace by trace (each span kept; one ``traces`` row; step rows all of
    that row's build and as many as it counts) and return how many are built by the current mapper."""
    stored: dict[str, set[str]] = {}
    for trace_id, span_id in store.query("SELECT trace_id, span_id FROM spans").rows:
        stored.setdefault(trace_id, set()).add(span_id)
    assert stored.keys() >= spans_of.keys()
    lost = {t: spans - stored[t] for t, spans in spans_of.items() if spans - stored[t]}
    assert not lost, f"spans lost: {dict(list(lost.items())[:5])}"
    builds: dict[str, list[object]] = {}
    for trace_id, revision in store.query("SELECT trace_id, mapper_revision FROM traces").rows:
        builds.setdefault(trace_id, []).append(revision)
    twice = {t: revisions for t, revisions in builds.items() if len(revisions) != 1}
    assert not twice, f"traces without exactly one trajectory: {dict(list(twice.items())[:5])}"
    assert builds.keys() >= spans_of.keys()
    current = {t for t in spans_of if builds[t] == [MAPPER_REVISION]}
    assert {t for t in spans_of if builds[t] == [None]} == spans_of.keys() - current, "a revision neither old nor new"
    for table in STEP_TABLES:
        steps = {
            trace_id: (rows, old)
            for trace_id, rows, old in store.query(
                f"SELECT trace_id, count(*), count(*) FILTER (WHERE duration_ms = {OLD_BUILD}) FROM {table} "
                "GROUP BY trace_id"
            ).rows
        }
        expected = {t: (STEPS_PER_TRACE, 0 if t in current else STEPS_PER_TRACE) for t in spans_of}
        wrong = {t: steps.get(t) for t in spans_of if steps.get(t) != expected[t]}
        assert not wrong, f"{table}: (rows, rows of the older build) wrong for {dict(list(wrong.items())[:5])}"
    return len(current)


def rebuild_process(*args: str) -> subprocess.Popen[str]:
    """``tracegrade rebuild ARGS`` in a child process, its progress lines read as they come."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRACEGRADE_")}
    command = [*LAUNCH, "rebuild", *args]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def read_until(child: subprocess.Popen[str], line: str) -> list[str]:
    """The lines the child printed up to and including ``line`` (fails if it ends first)."""
    assert child.stdout is not None
    lines: list[str] = []
    while not lines or lines[-1] != line:
        printed = child.stdout.readline()
        assert printed, f"the rebuild ended before printing {line!r}: {lines}, {child.communicate()[1]}"
        lines.append(printed.rstrip("\n"))
    return lines
