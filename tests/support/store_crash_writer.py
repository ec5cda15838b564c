"""Writes span batches through a StoreWriter forever, printing ``ack <batch>`` once each is durable.

Run by the SIGKILL crash test: ``python store_crash_writer.py STORE``. Batch b holds spans
(trace b, span b*1000 + i) for i < SPANS_PER_BATCH; every fourth batch also re-sends batch b-1.
"""

from __future__ import annotations

import sys

from tracegrade.models.span import SpanRecord
from tracegrade.store import StoreWriter, TraceStore

SPANS_PER_BATCH = 50
_ATTRIBUTE = "x" * 2000


def batch_spans(batch: int) -> list[SpanRecord]:
    return [
        SpanRecord(
            trace_id=f"{batch:032x}",
            span_id=f"{batch * 1000 + i:016x}",
            name=f"span {i}",
            start_ns=1_760_000_000_000_000_000 + i,
            end_ns=1_760_000_000_000_000_000 + i + 10,
            attributes={"payload": _ATTRIBUTE, "batch": batch},
        )
        for i in range(SPANS_PER_BATCH)
    ]


def main(store_path: str) -> None:
    writer = StoreWriter(TraceStore(store_path), settle_seconds=0.05)
    writer.start()
    batch = 1
    while True:
        spans = batch_spans(batch)
        if batch % 4 == 0:
            spans += batch_spans(batch - 1)
        writer.submit(spans).result()
        print(f"ack {batch}", flush=True)
        batch += 1


if __name__ == "__main__":
    main(sys.argv[1])
