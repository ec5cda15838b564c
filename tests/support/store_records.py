"""Span records, fixture files and lock-holding subprocesses for the store tests."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tracegrade.models.span import LogRecordData, SpanEvent, SpanLink, SpanRecord

__all__ = [
    "FIXTURES",
    "decode_fixture",
    "holding_store",
    "make_log",
    "make_span",
    "rich_span",
    "store_fixtures",
    "trace_hex",
]

FIXTURES = sorted((Path(__file__).parent.parent / "data" / "otlp").glob("*.otlp.json"))
_BASE_NS = 1_760_000_000_000_000_000


def trace_hex(n: int) -> str:
    return f"{n:032x}"


def make_span(trace: int, span: int, *, parent: int | None = None, name: str = "work", **fields: Any) -> SpanRecord:
    """A small span of trace ``trace`` (ids derived from the numbers, so tests can name them)."""
    return SpanRecord(
        trace_id=trace_hex(trace),
        span_id=f"{span:016x}",
        name=name,
        start_ns=_BASE_NS + span * 1_000_000,
        end_ns=_BASE_NS + span * 1_000_000 + 500_000,
        parent_span_id=None if parent is None else f"{parent:016x}",
        resource=fields.pop("resource", {"service.name": "svc-test"}),
        **fields,
    )


def make_log(trace: int | None, n: int, *, evaluation: bool = False) -> LogRecordData:
    """Log record ``n`` of trace ``trace`` (None: of no trace); ``evaluation``: a gen_ai.evaluation.result event."""
    attributes = {"event.name": "gen_ai.evaluation.result", "gen_ai.evaluation.name": "x"} if evaluation else {}
    return LogRecordData(
        time_ns=_BASE_NS + n,
        trace_id=None if trace is None else trace_hex(trace),
        event_name="gen_ai.evaluation.result" if evaluation else "note",
        body=f"record {n}",
        attributes=attributes,
    )


def rich_span() -> SpanRecord:
    """A span using every field of SpanRecord, with nested attribute values."""
    return SpanRecord(
        trace_id="0af7651916cd43dd8448eb211c80319c",
        span_id="b7ad6b7169203331",
        parent_span_id="00f067aa0ba902b7",
        name="chat gpt-4o",
        start_ns=1_760_000_000_123_456_789,
        end_ns=1_760_000_001_987_654_321,
        kind="CLIENT",
        attributes={
            "gen_ai.operation.name": "chat",
            "gen_ai.usage.input_tokens": 12,
            "temperature": 0.25,
            "flag": True,
            "tags": ["a", "b"],
            "nested": {"k": [1, {"deep": None}]},
            "text": "héllo ✓",
        },
        events=[SpanEvent("exception", 1_760_000_000_500_000_000, {"exception.type": "ValueError"}, 1)],
        links=[SpanLink("1" * 32, "2" * 16, {"link.kind": "retry"}, "vendor=1", 2)],
        status_code="ERROR",
        status_message="boom",
        resource={"service.name": "svc-rich", "service.version": "1.2.3"},
        scope_name="my.scope",
        scope_version="0.9",
        trace_state="congo=t61rcWkgMzE",
        flags=1,
        dropped_attributes_count=3,
        dropped_events_count=4,
        dropped_links_count=5,
    )


def decode_fixture(path: Path) -> tuple[list[SpanRecord], list[LogRecordData]]:
    from tracegrade.ingest.decode import read_otlp_file

    traces, logs = read_otlp_file(path)
    assert not traces.rejected and not logs.rejected, (traces.rejected, logs.rejected)
    return traces.spans, logs.records


def store_fixtures(store: Any, paths: Iterable[Path] = FIXTURES, tenant: str = "default") -> set[str]:
    """Write each fixture file's records to ``store`` as ``tenant`` and build their trajectories; the trace ids."""
    ids: set[str] = set()
    for path in paths:
        spans, logs = decode_fixture(path)
        written = sorted(store.write(spans, logs, tenant=tenant).trace_ids)
        store.rebuild_trajectories(written, tenant=tenant)
        ids.update(written)
    return ids


_HOLDER = """
import sys
from tracegrade.store import TraceStore
store = TraceStore(sys.argv[1])
print("ready", flush=True)
sys.stdin.read()
store.close()
"""


@contextmanager
def holding_store(path: Path) -> Iterator[subprocess.Popen[str]]:
    """Another process that holds ``path`` open read-write until the block ends."""
    process = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        line = process.stdout.readline()  # type: ignore[union-attr]
        assert line.strip() == "ready", f"store holder failed to start (exit {process.poll()})"
        yield process
    finally:
        process.stdin.close()  # type: ignore[union-attr]
        process.wait(timeout=30)
