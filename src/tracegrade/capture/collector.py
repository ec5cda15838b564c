"""``TrajectoryCollector``: an OpenTelemetry span processor that rebuilds agent trajectories in process.

Add it to a ``TracerProvider`` (or use :func:`make_trajectory_callback`); every finished span is converted
to a :class:`~tracegrade.models.span.SpanRecord` and kept per trace. ``on_end`` only queues the span: the
queued spans are converted and filed by trace together, when the collector is next read (or once
``FILE_EVERY`` have gathered). Done in one go, between the host's runs rather than inside them, this costs
the host less than filing each span in ``on_end`` (bench/RESULTS.md, bench_collector_overhead).

The trajectory, tool calls, node visits and final response are computed by
:func:`tracegrade.trajectory.map_spans` over the spans collected since the last
:meth:`TrajectoryCollector.reset` (the mapping is cached until a new span arrives).

**Log records.** Content that instrumentations emit as OpenTelemetry log records (the GenAI event form,
ADK's ``EVENT_ONLY`` capture) reaches the collector through :meth:`TrajectoryCollector.add_log`: from
``collector.logger_provider`` and from the process's global logger provider once
:func:`make_trajectory_callback` has wired it (see :mod:`tracegrade.capture.log_capture`). Records are kept
with their trace and joined to their span by the mapper, as the receiver joins ``/v1/logs``.

**Attribution to eval cases.** ``AgentEvaluator`` runs each case turn under a root span
``tracegrade.turn {case_id}`` carrying ``tracegrade.case.id``/``tracegrade.turn.index``/``tracegrade.run.id``
and puts the same three values in OpenTelemetry baggage. A trace belongs to the case/turn of the first of
its spans that carries those attributes, so the turn's own trace is attributed by its root. When a
framework starts a *fresh trace* inside a case (a new root with no parent, e.g. an instrumentation that
forces a new trace with an empty parent context), the collector's ``on_start`` reads the baggage from the
parent context, falling back to the current context, and stamps the case attributes on every span that
starts outside a running turn's trace, so that trace is attributed too. A span whose context was lost
entirely (a plain ``threading.Thread`` does not inherit context variables) carries no baggage: it is
attributed to the running turn only when exactly one turn is running (sequential evaluation); in parallel
runs propagate the context to the thread (``contextvars.copy_context().run`` or ``asyncio.to_thread``).

The collector is thread-safe, keeps memory bounded (``max_spans`` spans over at most ``max_traces``
traces; the oldest traces are dropped first and counted) and never raises into the host application:
a failure in any hook is counted (:attr:`TrajectoryCollector.failures`) and logged once.
"""

from __future__ import annotations

import functools
import logging
import sys
import threading
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import baggage
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider

from tracegrade.capture import semconv
from tracegrade.capture.context import TurnKey, case_baggage
from tracegrade.capture.sdk_convert import span_from_readable
from tracegrade.errors import InvalidValueError
from tracegrade.models.dataset import ToolCall, TrajectoryStep
from tracegrade.models.execution import ExecutionResult, NodeResponseData
from tracegrade.models.span import LogRecordData, SpanRecord

__all__ = ["TrajectoryCollector", "make_trajectory_callback"]

log = logging.getLogger("tracegrade.capture")

# ended spans queued at most before on_end files them itself (memory stays bounded when nobody reads)
FILE_EVERY = 256


@dataclass(slots=True)
class _Trace:
    spans: list[SpanRecord] = field(default_factory=list)
    key: TurnKey | None = None
    logs: list[LogRecordData] = field(default_factory=list)


@functools.cache
def _mapper() -> Callable[[list[SpanRecord], list[LogRecordData]], ExecutionResult]:
    """``map_spans``, imported on first use: code that only records spans never loads the mapper."""
    from tracegrade.trajectory import map_spans

    return map_spans


def _turn_key_of(attributes: Any) -> TurnKey | None:
    """The turn a span's ``tracegrade.*`` attributes attribute it to."""
    if not attributes:
        return None
    case_id = attributes.get(semconv.CASE_ID)
    if not case_id:
        return None
    turn = attributes.get(semconv.TURN_INDEX)
    run_id = attributes.get(semconv.RUN_ID)
    try:
        turn_index = int(turn) if turn is not None else None
    except (TypeError, ValueError):
        turn_index = None
    return TurnKey(str(case_id), turn_index, str(run_id) if run_id else None)


def _attributes_of(span: Any) -> Any:
    """A starting span's attributes, from the SDK's backing dict where it has one: ``span.attributes`` wraps
    them in a new read-only proxy, and every read through ``BoundedAttributes`` is a Python call."""
    backing = getattr(getattr(span, "_attributes", None), "_dict", None)
    return backing if isinstance(backing, dict) else span.attributes


def _log_failure(hook: str, exc: Exception, *, first: bool) -> None:
    if first:
        log.warning(
            "TrajectoryCollector.%s failed; the span is skipped (further failures logged at debug)", hook, exc_info=exc
        )
    else:
        log.debug("TrajectoryCollector.%s failed: %s", hook, exc)


class TrajectoryCollector(SpanProcessor):
    """Collects finished spans per trace and exposes the trajectory they describe.

    Args:
        capture_all_events: also expose every collected :class:`SpanRecord` on :attr:`events`.
        max_spans: spans kept at most (over all traces); beyond it the oldest traces are dropped. Log records
            are bounded by the same number; a record beyond it is dropped (and counted).
        max_traces: traces kept at most; beyond it the oldest are dropped.
    """

    def __init__(self, capture_all_events: bool = False, max_spans: int = 100_000, max_traces: int = 10_000) -> None:
        if max_spans < 1 or max_traces < 1:
            raise InvalidValueError(f"max_spans and max_traces must be at least 1, got {max_spans} and {max_traces}")
        self.capture_all_events = capture_all_events
        self.max_spans = max_spans
        self.max_traces = max_traces
        #: the provider :func:`make_trajectory_callback` attached this collector to (None if attached by hand)
        self.tracer_provider: TracerProvider | None = None
        #: a ``LoggerProvider`` whose records reach this collector (set by :func:`make_trajectory_callback`)
        self.logger_provider: Any = None
        #: the run id :func:`make_trajectory_callback` stamps on spans (None when not configured)
        self.run_id: str | None = None
        self._lock = threading.Lock()
        self._traces: OrderedDict[str, _Trace] = OrderedDict()
        self._span_count = 0
        self._version = 0
        self._mapped: dict[TurnKey | None, ExecutionResult] = {}
        self._turn_traces: dict[int, TurnKey] = {}  # trace id -> turn, while the turn's root span is open
        self._ended: deque[ReadableSpan] = deque()  # ended spans not filed yet (appends need no lock)
        self._log_count = 0
        self._dropped_spans = 0
        self._dropped_traces = 0
        self._dropped_logs = 0
        self._failures = 0

    # ---- SpanProcessor hooks (cheap; never raise) ----

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        try:
            if span.context.trace_id in self._turn_traces:
                return  # inside a running turn's own trace: attributed through the trace's root
            key = _turn_key_of(_attributes_of(span))
            if key is not None:
                if span.name.startswith(semconv.TURN_SPAN_PREFIX):
                    with self._lock:
                        self._turn_traces[span.context.trace_id] = key
                return
            key = self._key_from_context(span, parent_context)
            if key is not None:
                span.set_attribute(semconv.CASE_ID, key.case_id)
                if key.turn_index is not None:
                    span.set_attribute(semconv.TURN_INDEX, key.turn_index)
                if key.run_id:
                    span.set_attribute(semconv.RUN_ID, key.run_id)
        except Exception as exc:
            self._record_failure("on_start", exc)

    def _key_from_context(self, span: Span, parent_context: Context | None) -> TurnKey | None:
        key = case_baggage(baggage.get_all(parent_context)) if parent_context is not None else None
        if key is None:
            key = case_baggage(baggage.get_all())
        if key is None and span.parent is None:
            with self._lock:
                running = list(self._turn_traces.values())
            if len(running) == 1:  # a root that lost its context while exactly one turn runs
                key = running[0]
        return key

    def on_end(self, span: ReadableSpan) -> None:
        try:
            if span.parent is None and self._turn_traces:  # a turn's root span ends: the turn is over
                with self._lock:
                    self._turn_traces.pop(span.context.trace_id, None)
            self._ended.append(span)
            if len(self._ended) >= FILE_EVERY:
                with self._lock:
                    self._file_ended()
        except Exception as exc:
            self._record_failure("on_end", exc)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """File the ended spans still queued (``on_end`` only queues them), so every reader sees them."""
        with self._lock:
            self._file_ended()
        return True

    def shutdown(self) -> None:
        """The tracer provider shuts down: stop receiving the process's log records.

        Only a collector whose log capture was wired can be subscribed, and wiring imports ``log_capture``:
        without it there is nothing to undo. Importing it here instead would load the SDK's logs module, which
        fails when the provider shuts down from ``atexit`` (the interpreter refuses new threads then) and
        printed a traceback at the exit of every program that attached a bare collector.
        """
        log_capture = sys.modules.get("tracegrade.capture.log_capture")
        if log_capture is None:
            return
        try:
            log_capture.unsubscribe_process_logs(self)
        except Exception as exc:  # the provider's shutdown must not fail because of the collector
            self._record_failure("shutdown", exc)

    # ---- log records (from a LogRecordProcessor; cheap; never raise) ----

    def add_log(self, record: LogRecordData) -> None:
        """Keep one log record with its trace, so the mapper can join it to its span."""
        try:
            with self._lock:
                if self._log_count >= self.max_spans:
                    self._dropped_logs += 1
                    return
                entry = self._traces.get(record.trace_id or "")
                if entry is None:
                    entry = self._traces[record.trace_id or ""] = _Trace()
                entry.logs.append(record)
                self._log_count += 1
                if len(self._traces) > self.max_traces:
                    self._evict()
                self._invalidate()
        except Exception as exc:
            self._record_failure("add_log", exc)

    # ---- storage ----

    def _file_ended(self) -> None:
        """Convert the queued ended spans and file them by trace (call with the lock held). A span that
        cannot be converted is counted as a failure and skipped."""
        if not self._ended:
            return
        traces = self._traces
        while self._ended:
            span = self._ended.popleft()
            try:
                record = span_from_readable(span)
            except Exception as exc:
                self._failures += 1
                _log_failure("on_end", exc, first=self._failures == 1)
                continue
            entry = traces.get(record.trace_id)
            if entry is None:
                entry = traces[record.trace_id] = _Trace()
            if entry.key is None and semconv.CASE_ID in record.attributes:
                entry.key = _turn_key_of(record.attributes)
            entry.spans.append(record)
            self._span_count += 1
            if self._span_count > self.max_spans or len(traces) > self.max_traces:
                self._evict()
        self._invalidate()

    def _invalidate(self) -> None:
        """The collected spans changed: cached mappings are stale (call with the lock held)."""
        self._version += 1
        if self._mapped:
            self._mapped.clear()

    def _evict(self) -> None:
        """Drop the oldest traces until both bounds hold; a lone oversized trace loses its newest span, except
        its root (which ends last and says which case the trace belongs to)."""
        while len(self._traces) > self.max_traces or (self._span_count > self.max_spans and len(self._traces) > 1):
            _, oldest = self._traces.popitem(last=False)
            self._span_count -= len(oldest.spans)
            self._log_count -= len(oldest.logs)
            self._dropped_spans += len(oldest.spans)
            self._dropped_traces += 1
        if self._span_count > self.max_spans:
            spans = next(iter(self._traces.values())).spans
            spans.pop(-2 if len(spans) > 1 and spans[-1].parent_span_id is None else -1)
            self._span_count -= 1
            self._dropped_spans += 1

    def _record_failure(self, hook: str, exc: Exception) -> None:
        with self._lock:
            self._failures += 1
            first = self._failures == 1
        _log_failure(hook, exc, first=first)

    def _filed(self, value: Callable[[], Any]) -> Any:
        """``value()`` under the lock, after filing the queued ended spans."""
        with self._lock:
            self._file_ended()
            return value()

    @property
    def dropped_spans(self) -> int:
        """Spans dropped to keep within ``max_spans`` / ``max_traces``."""
        return int(self._filed(lambda: self._dropped_spans))

    @property
    def dropped_traces(self) -> int:
        return int(self._filed(lambda: self._dropped_traces))

    @property
    def dropped_logs(self) -> int:
        """Log records dropped because ``max_spans`` records were already kept."""
        return int(self._filed(lambda: self._dropped_logs))

    @property
    def log_count(self) -> int:
        return int(self._filed(lambda: self._log_count))

    @property
    def failures(self) -> int:
        """Hooks that failed (and spans that could not be converted); each span concerned is skipped."""
        return int(self._filed(lambda: self._failures))

    def reset(self) -> None:
        """Forget every collected span and counter (running turns stay known)."""
        with self._lock:
            self._ended.clear()
            self._traces.clear()
            self._span_count = self._log_count = 0
            self._invalidate()
            self._dropped_spans = self._dropped_traces = self._dropped_logs = self._failures = 0

    def release(self, case_id: str, run_id: str | None = None) -> None:
        """Drop the traces of one case (every turn) once they have been graded."""
        wanted = TurnKey(case_id, None, run_id)
        with self._lock:
            self._file_ended()
            for trace_id in [t for t, e in self._traces.items() if e.key is not None and wanted.covers(e.key)]:
                released = self._traces.pop(trace_id)
                self._span_count -= len(released.spans)
                self._log_count -= len(released.logs)
            self._invalidate()

    # ---- queries ----

    def spans_for_trace(self, trace_id: str) -> list[SpanRecord]:
        with self._lock:
            self._file_ended()
            entry = self._traces.get(trace_id)
            return list(entry.spans) if entry else []

    def spans_for(
        self, case_id: str | None = None, turn: int | None = None, run_id: str | None = None
    ) -> list[SpanRecord]:
        """Spans of every trace attributed to that case (and turn / run); all spans when ``case_id`` is None."""
        return self._spans_of(TurnKey(case_id, turn, run_id) if case_id is not None else None)

    def _spans_of(self, wanted: TurnKey | None) -> list[SpanRecord]:
        return self._records_of(wanted)[0]

    def _records_of(self, wanted: TurnKey | None) -> tuple[list[SpanRecord], list[LogRecordData]]:
        """The spans and log records of every trace attributed to ``wanted`` (everything when None)."""
        with self._lock:
            self._file_ended()
            entries = [
                e for e in self._traces.values() if wanted is None or (e.key is not None and wanted.covers(e.key))
            ]
            return [s for e in entries for s in e.spans], [r for e in entries for r in e.logs]

    def logs_for(
        self, case_id: str | None = None, turn: int | None = None, run_id: str | None = None
    ) -> list[LogRecordData]:
        """Log records of every trace attributed to that case (and turn / run); all when ``case_id`` is None."""
        return self._records_of(TurnKey(case_id, turn, run_id) if case_id is not None else None)[1]

    def execution_for(
        self, case_id: str | None = None, turn: int | None = None, run_id: str | None = None
    ) -> ExecutionResult:
        """The mapped execution of one case (and turn / run), or of everything since the last reset."""
        cache_key = TurnKey(case_id, turn, run_id) if case_id is not None else None
        with self._lock:
            self._file_ended()
            cached = self._mapped.get(cache_key)
            version = self._version
        if cached is not None:
            return cached
        execution = _mapper()(*self._records_of(cache_key))
        with self._lock:
            if self._version == version:  # no span arrived while mapping: the result is current
                self._mapped[cache_key] = execution
        return execution

    # ---- the reference collector's attributes, computed from all spans since the last reset ----

    @property
    def execution(self) -> ExecutionResult:
        return self.execution_for()

    @property
    def trajectory(self) -> list[TrajectoryStep]:
        return self.execution.trajectory

    @property
    def tool_calls(self) -> list[ToolCall]:
        return self.execution.tool_calls

    @property
    def node_visits(self) -> list[str]:
        return self.execution.node_visits

    @property
    def node_responses(self) -> list[NodeResponseData]:
        return self.execution.node_responses

    @property
    def final_response(self) -> str:
        return self.execution.actual_response

    @property
    def events(self) -> list[SpanRecord]:
        """Every collected span record (only with ``capture_all_events``; otherwise empty)."""
        return self.spans_for() if self.capture_all_events else []

    @property
    def span_count(self) -> int:
        return int(self._filed(lambda: self._span_count))

    def _bounds_ns(self) -> tuple[int, int] | None:
        spans = self.spans_for()
        return (min(s.start_ns for s in spans), max(s.end_ns for s in spans)) if spans else None

    @property
    def start_time(self) -> float | None:
        """Start of the first collected span (Unix seconds), None when nothing was collected."""
        bounds = self._bounds_ns()
        return bounds[0] / 1e9 if bounds else None

    @property
    def end_time(self) -> float | None:
        bounds = self._bounds_ns()
        return bounds[1] / 1e9 if bounds else None

    @property
    def duration(self) -> float:
        bounds = self._bounds_ns()
        return (bounds[1] - bounds[0]) / 1e9 if bounds else 0.0

    def get_tool_names(self) -> list[str]:
        return [tc.name for tc in self.tool_calls]

    def get_trajectory_steps(self, step_type: str | None = None) -> list[TrajectoryStep]:
        return [s for s in self.trajectory if step_type is None or s.step_type == step_type]

    def to_dict(self) -> dict[str, Any]:
        execution = self.execution
        return {
            "trajectory": [s.model_dump(mode="json") for s in execution.trajectory],
            "tool_calls": [t.model_dump(mode="json") for t in execution.tool_calls],
            "node_visits": list(execution.node_visits),
            "node_responses": [n.model_dump(mode="json") for n in execution.node_responses],
            "final_response": execution.actual_response,
            "duration_seconds": self.duration,
        }


class _StampingProcessor(SpanProcessor):
    """Sets fixed attributes (thread id, run id) on every span as it starts."""

    def __init__(self, attributes: dict[str, str]) -> None:
        self.attributes = attributes

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        try:
            span.set_attributes(self.attributes)
        except Exception as exc:  # never raise into the host application
            log.debug("could not stamp span attributes: %s", exc)


def make_trajectory_callback(
    collector: TrajectoryCollector, config: dict[str, Any] | None = None, *, process_logs: bool = True
) -> tuple[TrajectoryCollector, TracerProvider]:
    """A new ``TracerProvider`` with ``collector`` attached: returns ``(collector, provider)``.

    ``config`` may carry ``thread_id`` and ``run_id``; they are stamped on every span as
    ``tracegrade.thread_id`` and ``tracegrade.run.id``. Pass ``provider`` to your instrumentation
    (``LangChainInstrumentor().instrument(tracer_provider=provider)``,
    ``InstrumentationSettings(tracer_provider=provider)``, ``provider.get_tracer(...)``).

    Log records reach the collector too: ``collector.logger_provider`` is a new ``LoggerProvider`` feeding it
    (for instrumentations that take one), and with ``process_logs`` the records emitted through the global
    logger provider are forwarded to it until ``provider`` shuts down. When the application has installed no
    global ``LoggerProvider``, an SDK one is installed for that (set your own before calling this to keep it).
    """
    from opentelemetry.sdk._logs import LoggerProvider

    from tracegrade.capture.log_capture import CollectorLogProcessor, subscribe_process_logs

    config = config or {}
    provider = TracerProvider()
    stamps = {
        attr: str(config[key])
        for key, attr in (("thread_id", semconv.THREAD_ID), ("run_id", semconv.RUN_ID))
        if config.get(key)
    }
    if stamps:
        provider.add_span_processor(_StampingProcessor(stamps))
    provider.add_span_processor(collector)
    collector.tracer_provider = provider
    collector.logger_provider = LoggerProvider()
    collector.logger_provider.add_log_record_processor(CollectorLogProcessor(collector.add_log))
    if process_logs:
        subscribe_process_logs(collector)
    collector.run_id = stamps.get(semconv.RUN_ID, collector.run_id)
    return collector, provider
