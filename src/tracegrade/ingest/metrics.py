"""Receiver metrics in the Prometheus text exposition format (version 0.0.4), written by hand.

Counters and histograms are updated from the event-loop thread only; gauges are read through callbacks
at scrape time, so nothing here needs a lock.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

__all__ = [
    "CONTENT_TYPE",
    "Counter",
    "Gauge",
    "Histogram",
    "LabeledGauge",
    "MetricsRegistry",
    "ReceiverMetrics",
    "StatsGauges",
]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

LabelValues = tuple[str, ...]
MetricT = TypeVar("MetricT", bound="_Metric")


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _format_labels(names: Iterable[str], values: Iterable[str]) -> str:
    pairs = [f'{name}="{_escape(value)}"' for name, value in zip(names, values, strict=True)]
    return "{" + ",".join(pairs) + "}" if pairs else ""


def _format_value(value: float) -> str:
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if float(value).is_integer():
        return str(int(value))
    return repr(float(value))


class _Metric:
    kind = "untyped"

    def __init__(self, name: str, help_text: str, labelnames: tuple[str, ...] = ()) -> None:
        self.name = name
        self.help_text = help_text
        self.labelnames = labelnames

    def _key(self, labels: dict[str, str]) -> LabelValues:
        if set(labels) != set(self.labelnames):
            raise ValueError(f"metric {self.name} takes labels {self.labelnames}, got {sorted(labels)}")
        return tuple(str(labels[name]) for name in self.labelnames)

    def samples(self) -> Iterator[str]:
        raise NotImplementedError

    def render(self) -> str:
        header = f"# HELP {self.name} {self.help_text}\n# TYPE {self.name} {self.kind}\n"
        return header + "".join(line + "\n" for line in self.samples())


class Counter(_Metric):
    """A monotonically increasing count, optionally split by labels."""

    kind = "counter"

    def __init__(self, name: str, help_text: str, labelnames: tuple[str, ...] = ()) -> None:
        super().__init__(name, help_text, labelnames)
        self._values: dict[LabelValues, float] = {} if labelnames else {(): 0.0}

    def inc(self, amount: float = 1, **labels: str) -> None:
        key = self._key(labels)
        self._values[key] = self._values.get(key, 0.0) + amount

    def value(self, **labels: str) -> float:
        return self._values.get(self._key(labels), 0.0)

    def samples(self) -> Iterator[str]:
        for key, value in sorted(self._values.items()):
            yield f"{self.name}{_format_labels(self.labelnames, key)} {_format_value(value)}"


class Gauge(_Metric):
    """A value read from a callback at scrape time (queue depth, in-flight requests…)."""

    kind = "gauge"

    def __init__(self, name: str, help_text: str, read: Callable[[], float]) -> None:
        super().__init__(name, help_text)
        self._read = read

    def samples(self) -> Iterator[str]:
        yield f"{self.name} {_format_value(self._read())}"


class LabeledGauge(_Metric):
    """Values split by labels, read from a callback at scrape time: label values (in ``labelnames`` order) ->
    value; no samples while the callback has none (a value not known yet is left out, not reported as 0)."""

    kind = "gauge"

    def __init__(
        self, name: str, help_text: str, labelnames: tuple[str, ...], read: Callable[[], dict[LabelValues, float]]
    ) -> None:
        super().__init__(name, help_text, labelnames)
        self._read = read

    def samples(self) -> Iterator[str]:
        for key, value in sorted(self._read().items()):
            yield f"{self.name}{_format_labels(self.labelnames, key)} {_format_value(value)}"


class StatsGauges(_Metric):
    """Every numeric entry of a stats dict read at scrape time, one gauge each (``<prefix><key>``)."""

    kind = "gauge"

    def __init__(self, prefix: str, help_text: str, read: Callable[[], dict[str, object]]) -> None:
        super().__init__(prefix, help_text)
        self._read = read

    def render(self) -> str:
        lines = []
        for key, value in sorted(self._read().items()):
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                name = self.name + key
                lines.append(f"# HELP {name} {self.help_text} ({key})\n# TYPE {name} gauge\n")
                lines.append(f"{name} {_format_value(value)}\n")
        return "".join(lines)


class Histogram(_Metric):
    """Cumulative buckets plus ``_sum`` and ``_count`` (seconds, by convention)."""

    kind = "histogram"

    def __init__(self, name: str, help_text: str, buckets: tuple[float, ...]) -> None:
        super().__init__(name, help_text)
        self.buckets = tuple(sorted(buckets))
        self._counts = [0] * len(self.buckets)
        self._sum = 0.0
        self._count = 0

    def observe(self, value: float) -> None:
        self._sum += value
        self._count += 1
        for index, bound in enumerate(self.buckets):
            if value <= bound:
                self._counts[index] += 1
                break

    @property
    def count(self) -> int:
        return self._count

    def samples(self) -> Iterator[str]:
        cumulative = 0
        for bound, count in zip(self.buckets, self._counts, strict=True):
            cumulative += count
            yield f'{self.name}_bucket{{le="{_format_value(bound)}"}} {cumulative}'
        yield f'{self.name}_bucket{{le="+Inf"}} {self._count}'
        yield f"{self.name}_sum {_format_value(self._sum)}"
        yield f"{self.name}_count {self._count}"


class MetricsRegistry:
    """An ordered set of metrics rendered together."""

    def __init__(self) -> None:
        self._metrics: dict[str, _Metric] = {}

    def add(self, metric: MetricT) -> MetricT:
        if metric.name in self._metrics:
            raise ValueError(f"metric {metric.name} is registered twice")
        self._metrics[metric.name] = metric
        return metric

    def render(self) -> str:
        return "".join(metric.render() for metric in self._metrics.values())


# where an abandoned request was (``requests_abandoned_total{stage}``): each exposed from 0 on, so that a rate or an
# increase over a window counts a stage's first abandoned request too (a series that appears at 1 shows no increase)
_ABANDONED_STAGES = ("body_room", "queue", "decode_wait", "decoding")
_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class ReceiverMetrics:
    """The receiver's own metrics; gauges are wired to live values by the server."""

    def __init__(
        self,
        queue_depth: Callable[[], float],
        inflight: Callable[[], float],
        store_stats: Callable[[], dict[str, object]] = dict,
        waiting_for_room: Callable[[], float] = lambda: 0,
        body_bytes: Callable[[], float] = lambda: 0,
        waiting_for_body_room: Callable[[], float] = lambda: 0,
        decoding_bytes: Callable[[], float] = lambda: 0,
        waiting_to_decode: Callable[[], float] = lambda: 0,
        queries_running: Callable[[], float] = lambda: 0,
        queries_waiting: Callable[[], float] = lambda: 0,
        more: Callable[[], str] = str,
    ) -> None:
        """``more``: exposition text rendered after the receiver's own (the in-process grading worker's
        ``tracegrade_worker_*`` series, which it renders under its own lock)."""
        self._more = more
        self.registry = MetricsRegistry()
        add = self.registry.add
        prefix = "tracegrade_receiver_"
        self.requests = add(
            Counter(
                prefix + "requests_total",
                "Export and query requests by protocol, signal and outcome status.",
                ("protocol", "signal", "status"),
            )
        )
        self.requests_abandoned = add(
            Counter(
                prefix + "requests_abandoned_total",
                "Export requests dropped, never acknowledged, because their client hung up before they were handed "
                "to the writer, by the stage they were in: body_room (an OTLP/gRPC call waiting to read its "
                "message), queue (waiting for room in the write queue), decode_wait (waiting for the decode "
                "threads), decoding (handed to them: taken off their queue, or stopped once parsed, before it was "
                "converted and written).",
                ("stage",),
            )
        )
        for stage in _ABANDONED_STAGES:
            self.requests_abandoned.inc(0, stage=stage)
        self.spans_received = add(
            Counter(prefix + "spans_received_total", "Spans decoded from export requests (kept or rejected).")
        )
        self.spans_stored = add(
            Counter(prefix + "spans_stored_total", "Spans durably written to the store (new rows).")
        )
        self.spans_duplicate = add(
            Counter(prefix + "spans_duplicate_total", "Spans already stored (exporter retries), ignored.")
        )
        self.spans_rejected = add(
            Counter(prefix + "spans_rejected_total", "Spans refused by the decoder (partial success).")
        )
        self.logs_received = add(
            Counter(prefix + "log_records_received_total", "Log records decoded from export requests.")
        )
        self.logs_stored = add(
            Counter(prefix + "log_records_stored_total", "Log records durably written to the store.")
        )
        self.logs_rejected = add(Counter(prefix + "log_records_rejected_total", "Log records refused by the decoder."))
        self.traces_expired = add(
            Counter(prefix + "traces_expired_total", "Traces deleted by retention (--retain), every row of them.")
        )
        self.spans_expired = add(Counter(prefix + "spans_expired_total", "Spans deleted by retention (--retain)."))
        self.logs_expired = add(
            Counter(prefix + "log_records_expired_total", "Log records deleted by retention (--retain).")
        )
        self.traces_forgotten = add(
            Counter(prefix + "traces_forgotten_total", "Traces deleted on request (POST /v1/forget).")
        )
        self.spans_dropped_forgotten = add(
            Counter(prefix + "spans_dropped_forgotten_total", "Spans received for a forgotten trace, not stored.")
        )
        self.auth_failures = add(
            Counter(
                prefix + "auth_failures_total",
                "Requests refused for a wrong bearer token, UI cookie or sign-in (401 / UNAUTHENTICATED), by protocol.",
                ("protocol",),
            )
        )
        self.auth_throttled = add(
            Counter(
                prefix + "auth_throttled_total",
                "Requests refused unread (429 / RESOURCE_EXHAUSTED) from an address over --auth-failure-limit.",
                ("protocol",),
            )
        )
        self.write_latency = add(
            Histogram(
                prefix + "write_latency_seconds",
                "Time from handing a batch to the writer until it is durable (journaled).",
                _LATENCY_BUCKETS,
            )
        )
        add(Gauge(prefix + "queue_depth_spans", "Spans waiting in the write queue.", queue_depth))
        add(Gauge(prefix + "inflight_requests", "Export requests being handled now.", inflight))
        add(
            Gauge(
                prefix + "requests_waiting_for_room",
                "Export requests held, undecoded, until the write queue has room.",
                waiting_for_room,
            )
        )
        add(
            Gauge(
                prefix + "request_body_bytes",
                "Bytes held by OTLP/HTTP request bodies and OTLP/gRPC messages being received or handled (the body "
                "budget's use; a gRPC call holds room for the largest message while it reads its own).",
                body_bytes,
            )
        )
        add(
            Gauge(
                prefix + "requests_waiting_for_body_room",
                "OTLP/gRPC calls waiting, their message unread, for room in the body budget.",
                waiting_for_body_room,
            )
        )
        add(
            Gauge(
                prefix + "decoding_bytes",
                "Bytes of export requests handed to the decode threads (2 x --max-request-bytes at most).",
                decoding_bytes,
            )
        )
        add(
            Gauge(
                prefix + "requests_waiting_to_decode",
                "Export requests waiting for their bytes to fit beside those being decoded.",
                waiting_to_decode,
            )
        )
        add(Gauge(prefix + "queries_running", "Queries holding one of the --max-queries turns.", queries_running))
        add(Gauge(prefix + "queries_waiting", "Queries waiting for a turn (every tenant's).", queries_waiting))
        add(StatsGauges("tracegrade_store_", "Store writer statistic", store_stats))

    def render(self) -> str:
        return self.registry.render() + self._more()
