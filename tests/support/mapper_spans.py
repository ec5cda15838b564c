"""Build span sets in code for mapper tests: nested ``with`` blocks give parents and increasing times."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tracegrade.models.span import SpanEvent, SpanRecord

TRACE_ID = "0af7651916cd43dd8448eb211c80319c"


def js(value: Any) -> str:
    """JSON text, as instrumentations put structured values on spans."""
    return json.dumps(value)


class SpanBuilder:
    """Records spans; ``with b.span(...)`` nests them (parent = enclosing block) and times them in order."""

    def __init__(self, trace_id: str = TRACE_ID, scope: str = "") -> None:
        self.trace_id = trace_id
        self.scope = scope
        self.spans: list[SpanRecord] = []
        self._stack: list[SpanRecord] = []
        self._clock = 1_700_000_000_000_000_000

    def tick(self) -> int:
        self._clock += 1_000_000
        return self._clock

    def new_id(self) -> str:
        return f"{len(self.spans) + 1:016x}"

    @contextmanager
    def span(
        self,
        name: str,
        attrs: dict[str, Any] | None = None,
        *,
        events: list[SpanEvent] | None = None,
        status: str = "UNSET",
        status_message: str = "",
        scope: str | None = None,
    ) -> Iterator[SpanRecord]:
        record = SpanRecord(
            trace_id=self.trace_id,
            span_id=self.new_id(),
            name=name,
            start_ns=self.tick(),
            end_ns=0,
            parent_span_id=self._stack[-1].span_id if self._stack else None,
            attributes=dict(attrs or {}),
            events=list(events or []),
            status_code=status,
            status_message=status_message,
            scope_name=self.scope if scope is None else scope,
        )
        self.spans.append(record)
        self._stack.append(record)
        try:
            yield record
        finally:
            self._stack.pop()
            record.end_ns = self.tick()

    def leaf(self, name: str, attrs: dict[str, Any] | None = None, **options: Any) -> SpanRecord:
        with self.span(name, attrs, **options) as record:
            return record

    def add(
        self,
        name: str,
        attrs: dict[str, Any] | None = None,
        *,
        parent: SpanRecord | None,
        start: int,
        end: int,
        span_id: str | None = None,
    ) -> SpanRecord:
        """A span with explicit parent and times (for overlapping or broken spans)."""
        record = SpanRecord(
            trace_id=self.trace_id,
            span_id=span_id or self.new_id(),
            name=name,
            start_ns=start,
            end_ns=end,
            parent_span_id=parent.span_id if parent else None,
            attributes=dict(attrs or {}),
            scope_name=self.scope,
        )
        self.spans.append(record)
        return record


def _adk_tool(b: SpanBuilder, name: str, call_id: str, args: dict[str, Any]) -> Any:
    """An ADK ``execute_tool`` span (open it with ``with``)."""
    attrs = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
        "gen_ai.tool.call.id": call_id,
        "gcp.vertex.agent.tool_call_args": js(args),
        "gcp.vertex.agent.tool_response": js({"ok": True}),
    }
    return b.span(f"execute_tool {name}", attrs)


def adk_agent_tool_trace(trace_id: str = TRACE_ID) -> list[SpanRecord]:
    """ADK's spans for a router that calls a forecaster agent as a tool (AgentTool), which calls get_weather, then
    looks a city up itself: the mapper marks get_weather's step ``within_tool`` the forecaster's call."""
    b = SpanBuilder(trace_id, scope="gcp.vertex.agent")
    with b.span("invocation"), b.span("invoke_agent router"):
        with (
            _adk_tool(b, "forecaster", "f1", {"request": "Bergen"}),
            b.span("invoke_agent forecaster"),
            _adk_tool(b, "get_weather", "w1", {"city": "Bergen"}),
        ):
            pass
        with _adk_tool(b, "lookup", "l1", {"city": "Bergen"}):
            pass
    return b.spans
