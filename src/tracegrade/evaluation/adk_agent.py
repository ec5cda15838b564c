"""Google ADK agents under test: :class:`AdkAdapter` runs an ADK agent (``LlmAgent`` or any ``BaseAgent``)
through ADK's ``InMemoryRunner``, one ADK session per case, so a multi-turn case is one conversation.

ADK traces with the *global* tracer and logger providers (``trace.get_tracer`` / ``_logs.get_logger`` at
import time), not with a provider it is handed. :meth:`AdkAdapter.instrument` therefore forwards the spans of
the global ``TracerProvider`` to the run's provider: an SDK provider the application installed gets one
forwarding processor; when none is installed, tracegrade installs an SDK provider as the global one. ADK's
spans start inside the case's turn span, so they join its trace and are attributed to the case. Content ADK
writes to log records (``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`` means EVENT_ONLY) reaches the
collector through :mod:`tracegrade.capture.log_capture`. google-adk is an optional dependency
(``pip install 'tracegrade[adk]'``).
"""

from __future__ import annotations

import sys
import threading
import weakref
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.trace import TracerProvider as SdkTracerProvider
from opentelemetry.trace import TracerProvider

from tracegrade.evaluation.adapters import AgentAdapter, CaseSession

__all__ = ["AdkAdapter", "forward_global_spans", "is_adk_agent"]


def _adk_type(module: str, name: str) -> type | None:
    """ADK's class ``module.name`` when that module is already imported, else None."""
    found = getattr(sys.modules.get(module), name, None)
    return found if isinstance(found, type) else None


def _is_adk_app(agent: Any) -> bool:
    """Whether ``agent`` is an ADK ``App`` (its root agent with the app's name and plugins: what ``adk run`` and
    ``adk eval`` load from a module's ``app`` before its ``root_agent``)."""
    app = _adk_type("google.adk.apps.app", "App")
    return app is not None and isinstance(agent, app)


def is_adk_agent(agent: Any) -> bool:
    """Whether ``agent`` is an ADK ``BaseAgent`` or ``App``. Only looked up when google-adk is already imported
    (an ADK agent cannot exist otherwise), so other agents never pay for importing it."""
    base = _adk_type("google.adk.agents", "BaseAgent")
    return (base is not None and isinstance(agent, base)) or _is_adk_app(agent)


class _GlobalSpanFanOut(SpanProcessor):
    """On the global provider: hands each span to the processors of every subscribed provider."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.targets: weakref.WeakSet[Any] = weakref.WeakSet()

    def _processors(self) -> list[Any]:
        with self.lock:
            # _active_span_processor: the SDK provider's multi-processor (the collector and the stamping one)
            return [getattr(p, "_active_span_processor", None) for p in self.targets]

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        for processor in self._processors():
            if processor is not None:
                processor.on_start(span, parent_context=parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        for processor in self._processors():
            if processor is not None:
                processor.on_end(span)


class _Detach(SpanProcessor):
    """On a subscribed provider: its shutdown ends the forwarding to it."""

    def __init__(self, provider: TracerProvider) -> None:
        self._provider = weakref.ref(provider)

    def shutdown(self) -> None:
        provider = self._provider()
        if provider is not None:
            with _FAN_OUT.lock:
                _FAN_OUT.targets.discard(provider)


_FAN_OUT = _GlobalSpanFanOut()
_installed_on: weakref.WeakSet[Any] = weakref.WeakSet()


def forward_global_spans(provider: TracerProvider) -> bool:
    """Have the spans of the global tracer provider processed by ``provider``'s processors as well; False when
    the global provider is not the SDK's (attach the collector to it yourself)."""
    with _FAN_OUT.lock:
        current = trace.get_tracer_provider()
        if not isinstance(current, SdkTracerProvider):
            if type(current).__name__ not in ("ProxyTracerProvider", "NoOpTracerProvider"):
                return False
            trace.set_tracer_provider(SdkTracerProvider())
            current = trace.get_tracer_provider()
            if not isinstance(current, SdkTracerProvider):
                return False
        if current is provider:
            return True
        if current not in _installed_on:
            current.add_span_processor(_FAN_OUT)
            _installed_on.add(current)
        if provider not in _FAN_OUT.targets and isinstance(provider, SdkTracerProvider):
            provider.add_span_processor(_Detach(provider))
        _FAN_OUT.targets.add(provider)
    return True


def _final_text(event: Any) -> str | None:
    content = getattr(event, "content", None)
    parts = getattr(content, "parts", None) or []
    texts = [p.text for p in parts if getattr(p, "text", None) and not getattr(p, "thought", False)]
    return "\n".join(texts) if texts else None


class AdkAdapter(AgentAdapter):
    """An ADK agent (or ``App``: its plugins then run too, under its name) run with ``InMemoryRunner``;
    ``session_input.state`` seeds the case's ADK session."""

    def __init__(self, agent: Any, app_name: str = "tracegrade_eval") -> None:
        from google.adk.runners import InMemoryRunner

        self.agent = agent
        if _is_adk_app(agent):
            self.runner = InMemoryRunner(app=agent)
        else:
            self.runner = InMemoryRunner(agent=agent, app_name=app_name)
        self._sessions: dict[str, str] = {}  # case thread id -> ADK session id

    def instrument(self, provider: TracerProvider, *, replace: bool = False) -> None:
        forward_global_spans(provider)

    async def _session_id(self, session: CaseSession) -> str:
        found = self._sessions.get(session.thread_id)
        if found is None:
            created = await self.runner.session_service.create_session(
                app_name=self.runner.app_name, user_id=session.user_id, state=dict(session.state)
            )
            found = self._sessions[session.thread_id] = created.id
        return found

    async def run_turn(self, session: CaseSession, user_text: str) -> str | None:
        from google.genai import types

        message = types.Content(role="user", parts=[types.Part(text=user_text)])
        reply: str | None = None
        session_id = await self._session_id(session)
        async for event in self.runner.run_async(user_id=session.user_id, session_id=session_id, new_message=message):
            if event.is_final_response():
                reply = _final_text(event) or reply
        session.history += [{"role": "user", "content": user_text}]
        if reply:
            session.history.append({"role": "assistant", "content": reply})
        return reply
