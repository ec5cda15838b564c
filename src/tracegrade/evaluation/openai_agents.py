"""OpenAI Agents SDK agents under test: :class:`OpenAIAgentsAdapter` runs an ``agents.Agent`` with
``Runner.run``, the conversation of a case carried from turn to turn (``result.to_input_list()``).

The Agents SDK traces with its own tracing API, not OpenTelemetry. :class:`OtelBridge`, one ``TracingProcessor``
registered with ``agents.add_trace_processor``, writes each SDK span as an OpenTelemetry span with the GenAI
attributes tracegrade's mapper reads: agent spans as ``invoke_agent {name}``, function spans as
``execute_tool {name}`` with ``gen_ai.tool.call.arguments`` / ``gen_ai.tool.call.result``, model spans as
``chat {model}``, handoffs and the rest under their SDK type. The spans go to the tracer provider of the live
eval turn sending the run, as children of the current OpenTelemetry span, so they join
the case's turn trace. The SDK's own exporter to OpenAI is left as it is (``agents.set_tracing_disabled`` or
``set_trace_processors([])`` turn it off). The SDK is an optional dependency (``pip install openai-agents``).
"""

from __future__ import annotations

import contextvars
import json
import sys
import threading
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode, TracerProvider

from tracegrade.capture.context import current_tracer
from tracegrade.evaluation.adapters import AgentAdapter, CaseSession, response_text

__all__ = ["OpenAIAgentsAdapter", "OtelBridge", "is_openai_agent"]

# the tracer of the live eval turn sending the SDK run (None outside tracegrade's runs: nothing is written)
_TRACER: contextvars.ContextVar[trace.Tracer | None] = contextvars.ContextVar("tracegrade_agents_tracer", default=None)


def is_openai_agent(agent: Any) -> bool:
    """Whether ``agent`` is an Agents SDK ``Agent`` (looked up only when the SDK is already imported)."""
    module = sys.modules.get("agents")
    base = getattr(module, "Agent", None)
    return isinstance(base, type) and isinstance(agent, base)


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)


def _name_and_attributes(data: Any) -> tuple[str, dict[str, Any]]:
    kind = getattr(data, "type", "custom")
    if kind == "agent":
        return f"invoke_agent {data.name}", {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": data.name}
    if kind == "function":
        return f"execute_tool {data.name}", {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": data.name}
    if kind in ("generation", "response"):
        model = getattr(data, "model", None) or "model"
        return f"chat {model}", {"gen_ai.operation.name": "chat", "gen_ai.request.model": str(model)}
    return f"openai_agents.{kind}", {"openai_agents.span.type": str(kind)}


def _end_attributes(data: Any) -> dict[str, Any]:
    kind = getattr(data, "type", "")
    out: dict[str, Any] = {}
    if kind == "function":
        if (arguments := _text(getattr(data, "input", None))) is not None:
            out["gen_ai.tool.call.arguments"] = arguments
        if (result := _text(getattr(data, "output", None))) is not None:
            out["gen_ai.tool.call.result"] = result
    elif kind == "response" and getattr(data, "response", None) is not None:
        text = getattr(data.response, "output_text", "")
        if text:
            message = {"role": "assistant", "parts": [{"type": "text", "content": text}]}
            out["gen_ai.output.messages"] = json.dumps([message], ensure_ascii=False)
    elif kind == "handoff":
        out["openai_agents.handoff.to"] = str(getattr(data, "to_agent", "") or "")
    return out


class OtelBridge:
    """An Agents SDK ``TracingProcessor`` writing the SDK's spans as OpenTelemetry spans (see the module)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: dict[str, Any] = {}  # SDK span id -> OTel span

    def on_trace_start(self, trace_: Any) -> None:
        return None

    def on_trace_end(self, trace_: Any) -> None:
        return None

    def on_span_start(self, span: Any) -> None:
        tracer = _TRACER.get()
        if tracer is None:  # a run tracegrade is not grading
            return
        with self._lock:
            parent = self._open.get(span.parent_id) if span.parent_id else None
        ctx = trace.set_span_in_context(parent) if parent is not None else otel_context.get_current()
        name, attributes = _name_and_attributes(span.span_data)
        started = tracer.start_span(name, context=ctx, attributes=attributes)
        with self._lock:
            self._open[span.span_id] = started

    def on_span_end(self, span: Any) -> None:
        with self._lock:
            started = self._open.pop(span.span_id, None)
        if started is None:
            return
        started.set_attributes(_end_attributes(span.span_data))
        if span.error:
            started.set_status(Status(StatusCode.ERROR, str(span.error.get("message", ""))))
        started.end()

    def shutdown(self) -> None:
        return None

    def force_flush(self) -> None:
        return None


_BRIDGE = OtelBridge()
_registered = False
_register_lock = threading.Lock()


def _register_bridge() -> None:
    global _registered
    with _register_lock:
        if not _registered:
            from agents import add_trace_processor

            add_trace_processor(_BRIDGE)  # type: ignore[arg-type]  # duck-typed TracingProcessor
            _registered = True


class OpenAIAgentsAdapter(AgentAdapter):
    """An Agents SDK ``Agent`` run with ``Runner.run``; ``session_input.state`` becomes the run ``context``."""

    def __init__(self, agent: Any) -> None:
        self.agent = agent

    def instrument(self, provider: TracerProvider, *, replace: bool = False) -> None:
        _register_bridge()  # the spans go to the provider of the live turn (see run_turn)

    async def run_turn(self, session: CaseSession, user_text: str) -> str | None:
        from agents import Runner

        _register_bridge()
        token = _TRACER.set(current_tracer())  # the live turn's provider
        try:
            user = {"role": "user", "content": user_text}
            result = await Runner.run(self.agent, [*session.history, user], context=session.state or None)
        finally:
            _TRACER.reset(token)
        session.history = list(result.to_input_list())
        return response_text(result.final_output)
