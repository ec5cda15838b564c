"""Wiring framework instrumentations to a tracer provider: OpenInference for LangChain/LangGraph, and
pydantic-ai's built-in instrumentation.

LangChain instrumentation is process-wide (it patches LangChain's callback manager). tracegrade never
instruments twice: it re-points its own instrumentation at the newest provider, and leaves an
instrumentation the application set up itself alone (attach the collector to that provider instead).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from opentelemetry.trace import TracerProvider

__all__ = ["instrument_langchain", "instrument_pydantic_ai"]

log = logging.getLogger("tracegrade.capture")

_langchain_lock = threading.Lock()
_langchain_provider: TracerProvider | None = None  # the provider tracegrade itself instrumented LangChain with


def instrument_langchain(provider: TracerProvider) -> bool:
    """Send openinference LangChain spans to ``provider``; False when the application instrumented it itself."""
    global _langchain_provider
    try:
        from openinference.instrumentation.langchain import LangChainInstrumentor
    except ImportError as exc:
        raise ImportError(
            "tracing a LangGraph agent needs openinference-instrumentation-langchain: "
            "pip install 'tracegrade[langgraph]'"
        ) from exc
    instrumentor = LangChainInstrumentor()
    with _langchain_lock:
        if instrumentor.is_instrumented_by_opentelemetry:
            if _langchain_provider is provider:
                return True
            if _langchain_provider is None:
                log.warning(
                    "LangChain is already instrumented by the application; tracegrade keeps that "
                    "instrumentation, so attach the TrajectoryCollector to its tracer provider"
                )
                return False
            instrumentor.uninstrument()
        instrumentor.instrument(tracer_provider=provider)
        _langchain_provider = provider
    return True


def instrument_pydantic_ai(agent: Any, provider: TracerProvider, *, replace: bool = False) -> bool:
    """Instrument a pydantic-ai ``Agent`` with ``provider``.

    Without ``replace`` an agent that already has instrumentation of its own (``agent.instrument`` or
    ``Agent.instrument_all``) is left alone and False is returned.
    """
    from pydantic_ai import Agent
    from pydantic_ai.models.instrumented import InstrumentationSettings

    if not replace and (agent.instrument or (agent.instrument is None and Agent._instrument_default)):
        return False
    agent.instrument = InstrumentationSettings(tracer_provider=provider)
    return True
