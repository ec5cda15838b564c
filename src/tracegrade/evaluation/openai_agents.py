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


def _dumped(item: Any) -> Any:
    """A Responses API item as plain JSON values (the SDK hands over pydantic models or dicts)."""
    dump = getattr(item, "model_dump", None)
    return dump(exclude_none=True) if callable(dump) else item


def _item_text(content: Any) -> str:
    """The text of a Responses message's content: a string, or its text parts joined."""
    if isinstance(content, str):
        return content
    parts = content if isinstance(content, list) else []
    return "".join(str(p.get("text", "")) for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str))


def _response_messages(items: Any) -> list[dict[str, Any]]:
    """Responses API input or output items as GenAI messages (``role`` and ``parts``).

    A run of ``function_call`` items is one assistant message asking for those calls (one model turn's
    parallel batch), so the mapper can pair each tool span with the call and id the model asked for; a
    ``function_call_output`` is a ``tool`` message answering its call id. Other item kinds (reasoning, web
    search) carry nothing the trajectory uses and are left out.
    """
    if isinstance(items, str):
        return [{"role": "user", "parts": [{"type": "text", "content": items}]}]
    messages: list[dict[str, Any]] = []
    for raw in items if isinstance(items, list) else []:
        item = _dumped(raw)
        if not isinstance(item, dict):
            continue
        kind = item.get("type", "message")
        if kind == "function_call":
            part = {"type": "tool_call", "id": item.get("call_id"), "name": item.get("name")}
            part["arguments"] = item.get("arguments")  # JSON text as the model wrote it; the mapper decodes it
            last = messages[-1] if messages else None
            if last is not None and last["role"] == "assistant" and last["parts"][-1]["type"] == "tool_call":
                last["parts"].append(part)
            else:
                messages.append({"role": "assistant", "parts": [part]})
        elif kind == "function_call_output":
            part = {"type": "tool_call_response", "id": item.get("call_id"), "response": item.get("output")}
            messages.append({"role": "tool", "parts": [part]})
        elif kind == "message" and isinstance(item.get("role"), str):
            text = _item_text(item.get("content"))
            messages.append({"role": item["role"], "parts": [{"type": "text", "content": text}] if text else []})
    return messages


def _usage_attributes(usage: Any) -> dict[str, Any]:
    """GenAI usage attributes from the SDK's usage dict or an OpenAI usage object."""
    usage = _dumped(usage)
    if not isinstance(usage, dict):
        return {}
    out: dict[str, Any] = {}
    for source, key in (("input_tokens", "gen_ai.usage.input_tokens"), ("output_tokens", "gen_ai.usage.output_tokens")):
        if isinstance(usage.get(source), int):
            out[key] = usage[source]
    details = usage.get("input_tokens_details")
    if isinstance(details, dict) and isinstance(details.get("cached_tokens"), int):
        out["gen_ai.usage.cache_read.input_tokens"] = details["cached_tokens"]
    return out


def _model_call_attributes(kind: str, data: Any) -> dict[str, Any]:
    """Model, usage and messages of a ``response`` (Responses API) or ``generation`` (Chat Completions) span.

    Without them a model call was a bare span: no tokens counted, no tool call ids to pair the tool spans
    with, no input. Chat Completions messages are written as the SDK recorded them (OpenAI chat messages,
    which the mapper reads); Responses items are turned into GenAI messages.
    """
    out: dict[str, Any] = {}
    if kind == "response":
        response = getattr(data, "response", None)
        model = getattr(response, "model", None)
        outputs = _response_messages(getattr(response, "output", None)) if response is not None else None
        inputs = _response_messages(data.input) if getattr(data, "input", None) is not None else None
        instructions = getattr(response, "instructions", None)
        if inputs is not None and isinstance(instructions, str) and instructions:  # the agent's instructions
            inputs.insert(0, {"role": "system", "parts": [{"type": "text", "content": instructions}]})
        usage = getattr(data, "usage", None) or getattr(response, "usage", None)
    else:
        model = getattr(data, "model", None)
        outputs = getattr(data, "output", None)
        inputs = getattr(data, "input", None)
        usage = getattr(data, "usage", None)
    if isinstance(model, str) and model:
        out["gen_ai.response.model"] = model
    if outputs is not None:
        out["gen_ai.output.messages"] = json.dumps(outputs, default=str, ensure_ascii=False)
    if inputs is not None:
        out["gen_ai.input.messages"] = json.dumps(inputs, default=str, ensure_ascii=False)
    out.update(_usage_attributes(usage))
    return out


def _end_attributes(data: Any) -> dict[str, Any]:
    kind = getattr(data, "type", "")
    out: dict[str, Any] = {}
    if kind == "function":
        if (arguments := _text(getattr(data, "input", None))) is not None:
            out["gen_ai.tool.call.arguments"] = arguments
        if (result := _text(getattr(data, "output", None))) is not None:
            out["gen_ai.tool.call.result"] = result
    elif kind in ("response", "generation"):
        out.update(_model_call_attributes(kind, data))
    elif kind == "handoff":
        out["openai_agents.handoff.to"] = str(getattr(data, "to_agent", "") or "")
    return out


def _error_message(error: dict[str, Any]) -> str:
    """The SDK's span error: its message, and the detail it carries when tracing may show it."""
    message = str(error.get("message", "") or "")
    data = error.get("data")
    detail = data.get("error") if isinstance(data, dict) else None
    if isinstance(detail, str) and detail and detail not in message:
        return f"{message}: {detail}" if message else detail
    return message


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
        attributes = _end_attributes(span.span_data)
        model = attributes.get("gen_ai.response.model")
        if model is not None and started.name == "chat model":  # a Responses call names its model only at the end
            started.update_name(f"chat {model}")
        started.set_attributes(attributes)
        if span.error:
            started.set_status(Status(StatusCode.ERROR, _error_message(span.error)))
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
