"""``trace_node`` and ``trace_tool``: light-weight instrumentation for agents that have none.

Each works as a decorator (sync or async function) and as a context manager (``with`` / ``async with``)
and writes the ``tracegrade.*`` span attributes the mapper reads (INTERFACES §2)::

    @trace_node("planner")
    async def planner(state): ...

    @trace_tool                       # the tool name defaults to the function name
    def get_weather(city: str): ...

    with trace_tool("search", arguments={"q": q}, call_id="call-1") as tool:
        tool.set_result(search(q))

Arguments and results are JSON-encoded (pydantic models and dataclasses as objects, anything else via
``str``). An exception is recorded on the span (status ERROR plus an exception event) and re-raised.
Spans go to the provider of the live eval turn when one is running, else to the global provider.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import json
from collections.abc import Callable
from types import TracebackType
from typing import Any, TypeVar

from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode

from tracegrade.capture import semconv
from tracegrade.capture.context import current_tracer
from tracegrade.errors import InvalidStateError, InvalidValueError

__all__ = ["TracedSpan", "to_json_text", "trace_node", "trace_tool"]

F = TypeVar("F", bound=Callable[..., Any])
_SELF_NAMES = frozenset({"self", "cls"})


def _json_default(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return str(value)


def to_json_text(value: Any, *, keep_strings: bool = False) -> str:
    """``value`` as JSON text (never raises); with ``keep_strings`` a ``str`` is recorded as is."""
    if keep_strings and isinstance(value, str):
        return value
    try:
        return json.dumps(value, default=_json_default, ensure_ascii=False)
    except (TypeError, ValueError):  # e.g. circular references
        return json.dumps(str(value), ensure_ascii=False)


class TracedSpan:
    """One node or tool span: a decorator factory and a (sync or async) context manager."""

    def __init__(self, kind: str, name: str | None, arguments: Any = None, call_id: str | None = None) -> None:
        self.kind = kind
        self.name = name
        self.arguments = arguments
        self.call_id = call_id
        self.span: trace.Span | None = None
        self._scope: Any = None

    # ---- decorator ----

    def __call__(self, func: F) -> F:
        name = self.name or func.__name__
        kind, call_id = self.kind, self.call_id
        signature = inspect.signature(func)

        def start(args: tuple[Any, ...], kwargs: dict[str, Any]) -> TracedSpan:
            return TracedSpan(kind, name, _call_arguments(signature, args, kwargs), call_id)

        if inspect.iscoroutinefunction(func):

            @functools.wraps(func)
            async def run_async(*args: Any, **kwargs: Any) -> Any:
                with start(args, kwargs) as traced:
                    result = await func(*args, **kwargs)
                    traced.set_result(result)
                    return result

            return run_async  # type: ignore[return-value]

        @functools.wraps(func)
        def run(*args: Any, **kwargs: Any) -> Any:
            with start(args, kwargs) as traced:
                result = func(*args, **kwargs)
                traced.set_result(result)
                return result

        return run  # type: ignore[return-value]

    # ---- context manager ----

    def __enter__(self) -> TracedSpan:
        if not self.name:
            raise InvalidValueError(f"trace_{self.kind} needs a name when used as a context manager")
        self._scope = current_tracer().start_as_current_span(
            self.name, record_exception=False, set_status_on_exception=False
        )
        self.span = self._scope.__enter__()
        self.span.set_attribute(semconv.SPAN_KIND, self.kind)
        if self.kind == "tool":
            self.span.set_attribute(semconv.TOOL_NAME, self.name)
            if self.call_id:
                self.span.set_attribute(semconv.TOOL_CALL_ID, self.call_id)
            if self.arguments is not None:
                self.span.set_attribute(semconv.TOOL_ARGUMENTS, to_json_text(self.arguments))
        else:
            self.span.set_attribute(semconv.NODE_NAME, self.name)
            if self.arguments is not None:
                self.span.set_attribute(semconv.NODE_INPUT, to_json_text(self.arguments, keep_strings=True))
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc is not None and self.span is not None:
            self.span.record_exception(exc)
            self.span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
        self._scope.__exit__(exc_type, exc, tb)

    async def __aenter__(self) -> TracedSpan:
        return self.__enter__()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.__exit__(exc_type, exc, tb)

    def set_result(self, value: Any) -> None:
        """Record the tool's result or the node's output (inside the ``with`` block)."""
        if self.span is None:
            raise InvalidStateError("set_result is only valid inside the traced block")
        attribute = semconv.TOOL_RESULT if self.kind == "tool" else semconv.NODE_OUTPUT
        self.span.set_attribute(attribute, to_json_text(value, keep_strings=True))

    set_output = set_result


def _call_arguments(signature: inspect.Signature, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The call's arguments by parameter name (``self``/``cls`` left out; ``**kwargs`` flattened)."""
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError:  # the call itself is wrong; the function will raise the real error
        return {"args": list(args), **kwargs}
    out: dict[str, Any] = {}
    for name, value in bound.arguments.items():
        param = signature.parameters[name]
        if name in _SELF_NAMES and param.kind in (param.POSITIONAL_ONLY, param.POSITIONAL_OR_KEYWORD):
            continue
        if param.kind is param.VAR_KEYWORD:
            out.update(value)
        else:
            out[name] = list(value) if param.kind is param.VAR_POSITIONAL else value
    return out


def trace_node(name: str | Callable[..., Any]) -> Any:
    """Mark a graph node: ``@trace_node("name")``, ``@trace_node`` or ``with trace_node("name") as node``.

    As a decorator the call's arguments become ``tracegrade.node.input`` and the return value
    ``tracegrade.node.output``; in a ``with`` block call ``node.set_output(...)``.
    """
    if callable(name):
        return TracedSpan("node", None)(name)
    return TracedSpan("node", name)


def trace_tool(
    name: str | Callable[..., Any] | None = None, *, arguments: dict[str, Any] | None = None, call_id: str | None = None
) -> Any:
    """Mark a tool call: ``@trace_tool``, ``@trace_tool("name")`` or ``with trace_tool("name", arguments=…)``.

    As a decorator the call's arguments (by parameter name) become ``tracegrade.tool.arguments`` and the
    return value ``tracegrade.tool.result``; in a ``with`` block call ``tool.set_result(...)``.
    """
    if callable(name):
        return TracedSpan("tool", None)(name)
    return TracedSpan("tool", name, arguments, call_id)
