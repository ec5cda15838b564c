"""Real OTLP exporters sending numbered traces to a receiver, recording exactly which spans were acknowledged.

Fault tests kill, starve or corrupt the receiver under this load, then check span by span that every
acknowledged span is stored once (``stored_span_counts``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from pathlib import Path

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

__all__ = ["ExportLoad", "assert_stored_once", "export_all", "make_batches", "stored_span_counts"]

SpanIds = tuple[str, str]  # (trace_id, span_id) as hex


def make_batches(count: int, spans_per_batch: int, payload_bytes: int = 200) -> list[list[ReadableSpan]]:
    """``count`` traces of ``spans_per_batch`` spans each (a root and its steps), one trace per export."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "fault-test"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("tests.faults")
    batches = []
    for index in range(count):
        memory.clear()
        with tracer.start_as_current_span(f"invoke_agent run-{index}"):
            for step in range(spans_per_batch - 1):
                with tracer.start_as_current_span(f"step {step}") as span:
                    span.set_attribute("payload", "x" * payload_bytes)
        batches.append(list(memory.get_finished_spans()))
    return batches


class ExportLoad(threading.Thread):
    """Exports batches one by one with a real exporter, recording the span ids of acknowledged ones.

    With ``resend``, a batch the exporter gave up on (its retries are bounded: 6 attempts for OpenTelemetry
    Python's) is exported again until acknowledged or stopped, as a Collector's sending queue would keep it;
    ``failed_batches`` counts every give-up either way.
    """

    def __init__(
        self, exporter: SpanExporter, batches: Sequence[list[ReadableSpan]], pause: float = 0.02, resend: bool = False
    ) -> None:
        super().__init__(daemon=True)
        self.exporter = exporter
        self.batches = batches
        self.pause = pause  # pacing, so a fault lands mid-load rather than after it
        self.resend = resend
        self.acked: list[SpanIds] = []
        self.acked_batches = 0
        self.failed_batches = 0
        self._halt = threading.Event()

    def run(self) -> None:
        for batch in self.batches:
            if self._halt.is_set():
                break
            while not self._halt.is_set():
                if self.exporter.export(batch) == SpanExportResult.SUCCESS:
                    self.acked.extend((f"{s.context.trace_id:032x}", f"{s.context.span_id:016x}") for s in batch)
                    self.acked_batches += 1
                    break
                self.failed_batches += 1
                if not self.resend:
                    break
            time.sleep(self.pause)
        self.exporter.shutdown()

    def stop(self) -> None:
        self._halt.set()


def export_all(http_url: str, batches: Sequence[list[ReadableSpan]]) -> list[SpanIds]:
    """Export ``batches`` to the receiver at ``http_url`` with the OTLP/HTTP exporter, one trace a request, every
    one acknowledged (asserted); the spans acknowledged."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    load = ExportLoad(OTLPSpanExporter(endpoint=f"{http_url}/v1/traces", timeout=60), batches, pause=0)
    load.start()
    load.join(300)
    assert not load.is_alive() and load.failed_batches == 0, f"{load.failed_batches} exports failed"
    return load.acked


def stored_span_counts(store: Path, tenant: str | None = None) -> dict[SpanIds, int]:
    """How many times each (trace_id, span_id) is stored in the store file (opened read-only): every tenant's
    spans, or ``tenant``'s."""
    from tracegrade.store import TraceStore

    with TraceStore(store, read_only=True) as reader:
        sql = "SELECT trace_id, span_id, count(*) FROM spans GROUP BY trace_id, span_id"
        rows = reader.query(sql, tenant=tenant).rows
    return {(trace_id, span_id): count for trace_id, span_id, count in rows}


def assert_stored_once(store: Path, acked: Sequence[SpanIds], tenant: str | None = None) -> dict[SpanIds, int]:
    """Every acknowledged span is in ``store`` and no span is stored twice (of ``tenant``'s, when given);
    returns the counts."""
    stored = stored_span_counts(store, tenant)
    missing = [ids for ids in acked if ids not in stored]
    assert not missing, f"{len(missing)} of {len(acked)} acknowledged spans lost, e.g. {missing[:3]}"
    doubled = [ids for ids, count in stored.items() if count != 1]
    assert not doubled, f"{len(doubled)} spans stored more than once, e.g. {doubled[:3]}"
    return stored
