"""Store benchmark: write throughput (spans/s) and trajectory rebuild throughput (traces/s).

Spans look like real agent traces (GenAI conventions): an invoke_agent root, chat spans carrying
~2 KB message attributes, execute_tool spans. Three measurements, each the median of --runs runs on a
fresh DuckDB file:

- ``write``: TraceStore.write of --batch-size batches, one committed transaction each;
- ``writer``: --producers threads submitting --batch-size batches through one StoreWriter (coalescing),
  until every span is committed and every trajectory rebuilt;
- ``rebuild``: TraceStore.rebuild_trajectories over every trace of the file.

    python bench/bench_store.py --spans 50000 --runs 5
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import threading
import time
from pathlib import Path

from tracegrade.models.span import SpanRecord
from tracegrade.store import StoreWriter, TraceStore

_BASE_NS = 1_760_000_000_000_000_000


def _message(i: int) -> str:
    text = f"turn {i}: " + "the weather in Paris is sunny and mild today " * 40
    return json.dumps([{"role": "user", "parts": [{"type": "text", "content": text[:2000]}]}])


def agent_trace(n: int, spans_per_trace: int) -> list[SpanRecord]:
    """One agent run: root, then alternating chat and tool spans (about 2 KB of attributes on chats)."""
    trace_id = f"{n:032x}"
    start = _BASE_NS + n * 10_000_000
    root = SpanRecord(
        trace_id=trace_id,
        span_id=f"{n * 100:016x}",
        name="invoke_agent weather_agent",
        start_ns=start,
        end_ns=start + 9_000_000,
        attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "weather_agent"},
        resource={"service.name": "bench-agent"},
        scope_name="bench",
    )
    spans = [root]
    for i in range(1, spans_per_trace):
        chat = i % 2 == 1
        attributes = (
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": "gpt-4o",
                "gen_ai.input.messages": _message(n),
                "gen_ai.usage.input_tokens": 120,
                "gen_ai.usage.output_tokens": 30,
            }
            if chat
            else {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "get_weather",
                "gen_ai.tool.call.id": f"call_{n}_{i}",
                "gen_ai.tool.call.arguments": '{"city": "Paris"}',
                "gen_ai.tool.call.result": "sunny",
            }
        )
        spans.append(
            SpanRecord(
                trace_id=trace_id,
                span_id=f"{n * 100 + i:016x}",
                parent_span_id=root.span_id,
                name="chat gpt-4o" if chat else "execute_tool get_weather",
                start_ns=start + i * 1_000_000,
                end_ns=start + i * 1_000_000 + 800_000,
                kind="CLIENT" if chat else "INTERNAL",
                attributes=attributes,
                resource={"service.name": "bench-agent"},
                scope_name="bench",
            )
        )
    return spans


def batches(total: int, spans_per_trace: int, batch_size: int) -> list[list[SpanRecord]]:
    spans = [s for n in range(total // spans_per_trace) for s in agent_trace(n, spans_per_trace)]
    return [spans[i : i + batch_size] for i in range(0, len(spans), batch_size)]


def bench_write(path: Path, work: list[list[SpanRecord]]) -> tuple[float, float]:
    """(write spans/s, rebuild traces/s) with direct TraceStore calls."""
    with TraceStore(path) as store:
        started = time.perf_counter()
        for batch in work:
            store.write(batch)
        write_rate = sum(map(len, work)) / (time.perf_counter() - started)
        trace_ids = [r[0] for r in store.query("SELECT DISTINCT trace_id FROM spans").rows]
        started = time.perf_counter()
        store.rebuild_trajectories(trace_ids)
        rebuild_rate = len(trace_ids) / (time.perf_counter() - started)
    return write_rate, rebuild_rate


def bench_writer(path: Path, work: list[list[SpanRecord]], producers: int) -> tuple[float, float]:
    """(spans/s until all committed, spans/s until all trajectories are rebuilt) through a StoreWriter."""
    writer = StoreWriter(TraceStore(path), settle_seconds=0.5)
    writer.start()
    total = sum(map(len, work))
    started = time.perf_counter()

    def produce(share: list[list[SpanRecord]]) -> None:
        for batch in share:
            while True:
                try:
                    writer.submit(batch).result()
                    break
                except Exception as exc:  # QueueFull: back off like an exporter
                    time.sleep(getattr(exc, "retry_after", 0.05))

    threads = [threading.Thread(target=produce, args=(work[i::producers],)) for i in range(producers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    committed = time.perf_counter() - started
    traces = len({b[0].trace_id for b in work} | {s.trace_id for b in work for s in b})
    while writer.query("SELECT count(*) FROM traces").rows[0][0] < traces:
        time.sleep(0.01)
    mapped = time.perf_counter() - started
    writer.close()
    return total / committed, total / mapped


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spans", type=int, default=50_000)
    parser.add_argument("--spans-per-trace", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=512)
    parser.add_argument("--producers", type=int, default=4)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    work = batches(args.spans, args.spans_per_trace, args.batch_size)
    results: dict[str, list[float]] = {
        "write_spans_per_s": [],
        "rebuild_traces_per_s": [],
        "writer_committed_spans_per_s": [],
        "writer_mapped_spans_per_s": [],
    }
    for run in range(args.runs):
        with tempfile.TemporaryDirectory() as tmp:
            write_rate, rebuild_rate = bench_write(Path(tmp) / "direct.duckdb", work)
            committed_rate, mapped_rate = bench_writer(Path(tmp) / "writer.duckdb", work, args.producers)
        for key, value in zip(results, (write_rate, rebuild_rate, committed_rate, mapped_rate)):
            results[key].append(value)
        print(f"run {run + 1}: " + ", ".join(f"{k}={v[-1]:,.0f}" for k, v in results.items()), flush=True)
    summary = {
        "spans": sum(map(len, work)),
        "batch_size": args.batch_size,
        "producers": args.producers,
        "runs": args.runs,
        **{k: {"median": statistics.median(v), "min": min(v), "max": max(v)} for k, v in results.items()},
    }
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
