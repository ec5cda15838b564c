"""Agent adapters: how ``AgentEvaluator`` drives one turn of a plain callable, a LangGraph graph or a
pydantic-ai ``Agent``, chosen automatically by :func:`adapter_for`.

An adapter keeps the conversation of one case in a :class:`CaseSession` (history, state, run config) and
returns the agent's reply text for each turn (None when it returned none). :func:`run_agent_turn` is the one
way scripted and simulated conversations send a turn: it counts the turn and turns an agent failure into
:class:`AgentTurnError`.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import json
import threading
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.trace import TracerProvider

from tracegrade.capture.instrumentation import instrument_langchain, instrument_pydantic_ai
from tracegrade.errors import TracegradeError
from tracegrade.evaluation.agent_errors import agent_traceback, describe_agent_exception

__all__ = [
    "AgentAdapter",
    "AgentTurnError",
    "CallableAdapter",
    "CaseSession",
    "LangGraphAdapter",
    "PydanticAIAdapter",
    "adapter_for",
    "compile_if_needed",
    "response_text",
    "run_agent_turn",
]


@dataclass
class CaseSession:
    """One case's conversation as the adapter carries it from turn to turn."""

    thread_id: str
    user_id: str
    state: dict[str, Any] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)
    history: list[Any] = field(default_factory=list)
    turns_done: int = 0

    def run_config(self) -> dict[str, Any]:
        """``{"thread_id", "user_id", **session_input.config}`` (the plain-callable form)."""
        return {"thread_id": self.thread_id, "user_id": self.user_id, **self.config}


class AgentAdapter(ABC):
    """Drives one kind of agent; subclass it to support another framework and pass the instance as agent."""

    def instrument(self, provider: TracerProvider, *, replace: bool = False) -> None:  # noqa: B027
        """Make sure the agent's spans reach ``provider`` (no-op for agents traced by the user's own code)."""

    @abstractmethod
    async def run_turn(self, session: CaseSession, user_text: str) -> str | None:
        """Send one user message; return the agent's reply text."""


def _message_text(message: Any) -> str | None:
    content = message.get("content") if isinstance(message, dict) else getattr(message, "content", None)
    if isinstance(content, list):
        parts = [b if isinstance(b, str) else str(b.get("text", "")) for b in content if isinstance(b, (str, dict))]
        return " ".join(p for p in parts if p)
    return None if content is None else str(content)


def response_text(value: Any) -> str | None:
    """The reply text in whatever an agent returned (a string, a run result, a state with messages…)."""
    if value is None or isinstance(value, str):
        return value
    if hasattr(value, "output") and hasattr(value, "all_messages"):  # pydantic-ai AgentRunResult
        value = value.output
        if isinstance(value, str):
            return value
    if isinstance(value, dict) and isinstance(value.get("messages"), list) and value["messages"]:
        return _message_text(value["messages"][-1])
    if hasattr(value, "content") and hasattr(value, "type"):  # a LangChain message
        return _message_text(value)
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        value = dump(mode="json")
    try:
        return json.dumps(value, default=str, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(value)


class CallableAdapter(AgentAdapter):
    """A plain function (sync or async) called with the user text, plus ``state``/``config``/``history``
    keyword arguments when its signature accepts them. Sync functions run in a thread of their own
    (:func:`_in_daemon_thread`)."""

    _OPTIONAL = ("state", "config", "history")

    def __init__(self, func: Any) -> None:
        self.func = func
        self.is_async = inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(
            getattr(func, "__call__", None)  # noqa: B004  (an object with an async __call__)
        )
        try:
            params = inspect.signature(func).parameters
        except (TypeError, ValueError):
            params = {}  # type: ignore[assignment]
        takes_any = any(p.kind is p.VAR_KEYWORD for p in params.values())
        self.accepted = tuple(n for n in self._OPTIONAL if takes_any or n in params)

    async def run_turn(self, session: CaseSession, user_text: str) -> str | None:
        available = {"state": session.state, "config": session.run_config(), "history": list(session.history)}
        kwargs = {name: available[name] for name in self.accepted}
        if self.is_async:
            result = await self.func(user_text, **kwargs)
        else:
            result = await _in_daemon_thread(self.func, user_text, **kwargs)
            if inspect.isawaitable(result):
                result = await result
        reply = response_text(result)
        session.history += [{"role": "user", "content": user_text}]
        if reply:
            session.history.append({"role": "assistant", "content": reply})
        return reply


async def _in_daemon_thread(func: Any, *args: Any, **kwargs: Any) -> Any:
    """``func(*args, **kwargs)`` in a new daemon thread, in a copy of the caller's context, awaited.

    Not ``asyncio.to_thread``: the loop's default executor is joined when ``asyncio.run`` ends, and again at
    interpreter exit, so a sync agent that hangs past the case timeout would keep the whole run from ending.
    Python cannot stop a thread; a daemon thread left behind by a timeout ends with the process.
    """
    loop = asyncio.get_running_loop()
    done: asyncio.Future[Any] = loop.create_future()
    context = contextvars.copy_context()  # the run's collector context, as to_thread would carry it

    def settle(outcome: Any, failed: bool) -> None:
        if not done.done():  # a timed-out case has cancelled it
            (done.set_exception if failed else done.set_result)(outcome)

    def work() -> None:
        try:
            outcome, failed = context.run(func, *args, **kwargs), False
        except BaseException as exc:  # handed to the awaiting task, as to_thread would
            outcome, failed = exc, True
        try:
            loop.call_soon_threadsafe(settle, outcome, failed)
        except RuntimeError:  # the loop has closed: the run ended without waiting for this turn
            pass

    threading.Thread(target=work, name=f"tracegrade-agent-{getattr(func, '__name__', 'call')}", daemon=True).start()
    return await done


def compile_if_needed(graph: Any) -> Any:
    """Compile an uncompiled LangGraph ``StateGraph`` (with an in-memory checkpointer, for multi-turn)."""
    if hasattr(graph, "compile") and not hasattr(graph, "ainvoke"):
        from langgraph.checkpoint.memory import InMemorySaver

        return graph.compile(checkpointer=InMemorySaver())
    return graph


class LangGraphAdapter(AgentAdapter):
    """A compiled LangGraph graph, run with ``ainvoke({"messages": [...], **state}, config)``.

    With a checkpointer each turn sends only the new user message (the thread keeps the history); without
    one it sends the whole conversation so far. ``session_input.state`` seeds the input (every turn when
    there is no checkpointer); ``session_input.config`` merges into the run config (unknown top-level keys
    go to ``configurable``).
    """

    _TOP_LEVEL = frozenset(
        {"configurable", "metadata", "tags", "recursion_limit", "run_name", "callbacks", "max_concurrency", "run_id"}
    )

    def __init__(self, graph: Any) -> None:
        self.graph = compile_if_needed(graph)
        self.has_checkpointer = getattr(self.graph, "checkpointer", None) not in (None, False)

    def instrument(self, provider: TracerProvider, *, replace: bool = False) -> None:
        instrument_langchain(provider)

    def _config(self, session: CaseSession) -> dict[str, Any]:
        top = {k: v for k, v in session.config.items() if k in self._TOP_LEVEL}
        rest = {k: v for k, v in session.config.items() if k not in self._TOP_LEVEL}
        ids = {"thread_id": session.thread_id, "user_id": session.user_id}
        return {
            **top,
            "configurable": {**ids, **rest, **top.get("configurable", {})},
            "metadata": {**ids, **top.get("metadata", {})},
        }

    async def run_turn(self, session: CaseSession, user_text: str) -> str | None:
        user_message = {"role": "user", "content": user_text}
        messages = [user_message] if self.has_checkpointer else [*session.history, user_message]
        seed = session.state if (session.turns_done == 0 or not self.has_checkpointer) else {}
        result = await self.graph.ainvoke({**seed, "messages": messages}, config=self._config(session))
        if isinstance(result, dict) and isinstance(result.get("messages"), list):
            session.history = list(result["messages"])
        else:
            session.history = messages
        return response_text(result)


class PydanticAIAdapter(AgentAdapter):
    """A pydantic-ai ``Agent``: ``agent.run(text, message_history=…)`` with the history carried across turns.

    ``session_input.state`` becomes the run's ``deps`` (when not empty); the thread id becomes the
    conversation id and ``session_input.config`` the run metadata, where the installed pydantic-ai supports them.
    """

    def __init__(self, agent: Any) -> None:
        self.agent = agent
        self.run_params = frozenset(inspect.signature(agent.run).parameters)

    def instrument(self, provider: TracerProvider, *, replace: bool = False) -> None:
        instrument_pydantic_ai(self.agent, provider, replace=replace)

    async def run_turn(self, session: CaseSession, user_text: str) -> str | None:
        kwargs: dict[str, Any] = {"message_history": session.history or None}
        if session.state:
            kwargs["deps"] = session.state
        if "conversation_id" in self.run_params:
            kwargs["conversation_id"] = session.thread_id
        if "metadata" in self.run_params:
            kwargs["metadata"] = {"thread_id": session.thread_id, "user_id": session.user_id, **session.config}
        result = await self.agent.run(user_text, **kwargs)
        session.history = list(result.all_messages())
        return response_text(result)


class AgentTurnError(TracegradeError):
    """The agent raised during one turn (the conversation stops there; other cases continue). The message says
    what it raised and where in the user's code; ``agent_traceback`` is the traceback without tracegrade's
    frames (see :mod:`tracegrade.evaluation.agent_errors`)."""

    def __init__(self, message: str, agent_traceback: str | None = None) -> None:
        super().__init__(message)
        self.agent_traceback = agent_traceback


async def run_agent_turn(adapter: AgentAdapter, session: CaseSession, index: int, user_text: str) -> str | None:
    """Send turn ``index`` through ``adapter``; an agent exception becomes :class:`AgentTurnError`."""
    try:
        reply = await adapter.run_turn(session, user_text)
    except Exception as exc:
        raise AgentTurnError(
            f"Agent error on turn {index}: {describe_agent_exception(exc)}", agent_traceback(exc)
        ) from exc
    session.turns_done += 1
    return reply


def _is_pydantic_agent(agent: Any) -> bool:
    try:
        from pydantic_ai import Agent
    except ImportError:
        return False
    return isinstance(agent, Agent)


def _is_langgraph(agent: Any) -> bool:
    try:
        from langgraph.graph import StateGraph
        from langgraph.pregel import Pregel
    except ImportError:
        return False
    return isinstance(agent, (StateGraph, Pregel))


def adapter_for(agent: Any) -> AgentAdapter:
    """The adapter that drives ``agent`` (an ``AgentAdapter`` instance is used as is)."""
    if isinstance(agent, AgentAdapter):
        return agent
    if _is_pydantic_agent(agent):
        return PydanticAIAdapter(agent)
    if _is_langgraph(agent):
        return LangGraphAdapter(agent)
    from tracegrade.evaluation.adk_agent import AdkAdapter, is_adk_agent

    if is_adk_agent(agent):  # before callable: an ADK agent is not called directly
        return AdkAdapter(agent)
    from tracegrade.evaluation.openai_agents import OpenAIAgentsAdapter, is_openai_agent

    if is_openai_agent(agent):
        return OpenAIAgentsAdapter(agent)
    if callable(agent):
        return CallableAdapter(agent)
    raise TypeError(
        f"cannot evaluate an agent of type {type(agent).__name__}: pass a sync or async callable, a LangGraph "
        "graph, a pydantic-ai Agent, a Google ADK agent, an OpenAI Agents SDK Agent, or an AgentAdapter subclass "
        "instance"
    )
