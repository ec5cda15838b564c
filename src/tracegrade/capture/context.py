"""The case context of one live turn: its root span, the baggage that carries the case into fresh traces,
and the tracer provider that ``trace_node``/``trace_tool`` use while the turn runs.

Everything here lives in ``contextvars`` (OpenTelemetry's context is one), so concurrent cases running in
separate asyncio tasks, or in worker threads started with ``asyncio.to_thread``, never see each other's
context.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, NamedTuple

from opentelemetry import baggage, trace
from opentelemetry import context as otel_context
from opentelemetry.trace import Status, StatusCode

from tracegrade.capture import semconv

__all__ = ["TurnKey", "TurnScope", "case_baggage", "current_tracer", "turn_span"]

_TRACER_NAME = "tracegrade"
_active_provider: ContextVar[trace.TracerProvider | None] = ContextVar("tracegrade_active_provider", default=None)
# each provider's tracegrade tracer, made once: the SDK builds a new Tracer (and its scope) on every
# get_tracer call, a noticeable share of a small trace_node/trace_tool graph's run when asked per span
# (bench/RESULTS.md, bench_collector_overhead)
_tracers: weakref.WeakKeyDictionary[trace.TracerProvider, trace.Tracer] = weakref.WeakKeyDictionary()


class TurnKey(NamedTuple):
    """Which run, case and turn a span belongs to (``turn_index`` None: every turn of the case).

    A named tuple: the collector hashes and compares a few for every turn, and a tuple does both in C (a
    frozen dataclass runs generated Python code for each).
    """

    case_id: str
    turn_index: int | None = None
    run_id: str | None = None

    def covers(self, other: TurnKey) -> bool:
        """Does this (possibly partial) key select ``other``?"""
        return (
            self.case_id == other.case_id
            and (self.turn_index is None or self.turn_index == other.turn_index)
            and (self.run_id is None or self.run_id == other.run_id)
        )


@dataclass(frozen=True, slots=True)
class TurnScope:
    """The attributes of one turn's root span (INTERFACES §2)."""

    case_id: str
    turn_index: int
    run_id: str
    eval_set_id: str = ""
    thread_id: str = ""

    @property
    def key(self) -> TurnKey:
        return TurnKey(self.case_id, self.turn_index, self.run_id)

    def root_attributes(self, user_input: str) -> dict[str, Any]:
        attrs: dict[str, Any] = {
            semconv.EVAL_SET_ID: self.eval_set_id,
            semconv.CASE_ID: self.case_id,
            semconv.TURN_INDEX: self.turn_index,
            semconv.RUN_ID: self.run_id,
            semconv.TURN_INPUT: user_input,
        }
        if self.thread_id:
            attrs[semconv.THREAD_ID] = self.thread_id
        return attrs


def case_baggage(values: Mapping[str, object]) -> TurnKey | None:
    """The turn a baggage mapping points at, or None when it carries no tracegrade case."""
    case_id = values.get(semconv.CASE_ID)
    if not case_id:
        return None
    turn = values.get(semconv.TURN_INDEX)
    run_id = values.get(semconv.RUN_ID)
    return TurnKey(str(case_id), int(str(turn)) if turn is not None else None, str(run_id) if run_id else None)


def current_tracer() -> trace.Tracer:
    """The tracer of the provider driving the current live turn, else the global provider's tracer."""
    provider = _active_provider.get()
    return _tracer_of(provider if provider is not None else trace.get_tracer_provider())


def _tracer_of(provider: trace.TracerProvider) -> trace.Tracer:
    """``provider``'s tracegrade tracer (the same one on every call while the provider lives).

    The global proxy provider's tracer is a proxy that follows the real provider once one is set.
    """
    try:
        tracer = _tracers.get(provider)
    except TypeError:  # a provider class without weak references: ask it each time
        return provider.get_tracer(_TRACER_NAME)
    if tracer is None:
        tracer = _tracers[provider] = provider.get_tracer(_TRACER_NAME)
    return tracer


@contextmanager
def turn_span(provider: trace.TracerProvider, scope: TurnScope, user_input: str) -> Iterator[trace.Span]:
    """Run a block as one eval-case turn: a fresh root span ``tracegrade.turn {case_id}``, made current.

    The case id, turn index and run id also go into OpenTelemetry baggage, so a span started in a fresh
    trace inside the block (an instrumentation that forces a new root) is still attributed to this turn by
    :class:`~tracegrade.capture.collector.TrajectoryCollector`. An exception is recorded on the span and
    re-raised.
    """
    ctx = otel_context.Context()  # a fresh root: a turn never joins an ambient trace
    ctx = baggage.set_baggage(semconv.CASE_ID, scope.case_id, ctx)
    ctx = baggage.set_baggage(semconv.TURN_INDEX, str(scope.turn_index), ctx)
    ctx = baggage.set_baggage(semconv.RUN_ID, scope.run_id, ctx)
    span = _tracer_of(provider).start_span(
        f"{semconv.TURN_SPAN_PREFIX} {scope.case_id}", context=ctx, attributes=scope.root_attributes(user_input)
    )
    token = otel_context.attach(trace.set_span_in_context(span, ctx))
    provider_token = _active_provider.set(provider)
    try:
        yield span
    except BaseException as exc:
        span.record_exception(exc)
        span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
        raise
    finally:
        _active_provider.reset(provider_token)
        otel_context.detach(token)
        span.end()
