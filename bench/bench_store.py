"""Store benchmark: write throughput (spans/s), trajectory rebuild throughput (traces/s), memory.

Spans look like real agent traces (GenAI conventions): an invoke_agent root, chat spans carrying
~2 KB message attributes, execute_tool spans. Each run uses fresh DuckDB files; the summary gives the
median, min and max over --runs runs of:

- ``write``: TraceStore.write of --batch-size batches, one committed transaction each;
- ``rebuild``: TraceStore.rebuild_trajectories over every trace of that file (read back from DuckDB);
- ``writer``: --producers threads, each submitting one --batch-size batch at a time through one
  StoreWriter (like exporters waiting for their response), measured until every span is committed
  and until every trace's rows are current (``sum(span_count)`` over ``traces`` equals the spans sent);
- peak RSS of the process during the writer phase, and how far above the RSS before it (the spans
  to send are built up front, so the increase is what the store and its writer add).

CPU seconds (all threads) are reported next to wall time: the machine may be shared.

    python bench/bench_store.py --spans 200000 --runs 5
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import threading
import time
from pathlib import Path

import psutil

from tracegrade.models.span import SpanRecord
from tracegrade.store import QueueFull, StoreWriter, TraceStore

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


class PeakRss:
    """Samples the process RSS every few milliseconds while in use; ``peak`` and ``before`` in MB."""

    def __init__(self, interval: float = 0.01) -> None:
        self._process = psutil.Process()
        self._interval = interval
        self._stop = threading.Event()
        self.before = self.peak = self._process.memory_info().rss / 2**20
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.wait(self._interval):
            self.peak = max(self.peak, self._process.memory_info().rss / 2**20)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._process.memory_info().rss / 2**20)


def bench_write(path: Path, work: list[list[SpanRecord]]) -> dict[str, float]:
    """Direct TraceStore calls: write spans/s, then rebuild traces/s (wall and CPU)."""
    with TraceStore(path) as store:
        wall, cpu = time.perf_counter(), time.process_time()
        for batch in work:
            store.write(batch)
        spans = sum(map(len, work))
        write_wall, write_cpu = time.perf_counter() - wall, time.process_time() - cpu
        trace_ids = [r[0] for r in store.query("SELECT DISTINCT trace_id FROM spans").rows]
        wall, cpu = time.perf_counter(), time.process_time()
        store.rebuild_trajectories(trace_ids)
        rebuild_wall, rebuild_cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {
        "write_spans_per_s": spans / write_wall,
        "write_cpu_us_per_span": write_cpu / spans * 1e6,
        "rebuild_traces_per_s": len(trace_ids) / rebuild_wall,
        "rebuild_cpu_us_per_trace": rebuild_cpu / len(trace_ids) * 1e6,
    }


def bench_writer(path: Path, work: list[list[SpanRecord]], producers: int, settle: float) -> dict[str, float]:
    """Through a StoreWriter (server settings): spans/s until committed and until trajectories are current."""
    total = sum(map(len, work))
    traces = len({s.trace_id for b in work for s in b})
    writer = StoreWriter(TraceStore(path, memory_limit="256MB"), settle_seconds=settle)
    writer.start()

    errors: list[BaseException] = []

    def produce(share: list[list[SpanRecord]]) -> None:
        try:
            for batch in share:
                while True:
                    try:
                        writer.submit(batch).result()
                        break
                    except QueueFull as exc:  # back off like an exporter
                        time.sleep(exc.retry_after)
        except BaseException as exc:
            errors.append(exc)

    def current() -> bool:
        if errors:
            raise RuntimeError(f"a producer failed: {errors[0]!r}")
        if time.perf_counter() - wall > 600:
            raise RuntimeError(f"trajectories not current after 10 minutes: {writer.stats}")
        return writer.query("SELECT count(*), sum(span_count) FROM traces").rows[0] == (traces, total)

    with PeakRss() as rss:
        wall, cpu = time.perf_counter(), time.process_time()
        threads = [threading.Thread(target=produce, args=(work[i::producers],)) for i in range(producers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        committed = time.perf_counter() - wall
        while not current():
            time.sleep(0.01)
        mapped, mapped_cpu = time.perf_counter() - wall, time.process_time() - cpu
        stats = writer.stats
        writer.close()
    return {
        "writer_committed_spans_per_s": total / committed,
        "writer_mapped_spans_per_s": total / mapped,
        "writer_cpu_us_per_span": mapped_cpu / total * 1e6,
        "writer_transactions": stats["transactions"],
        "peak_rss_mb": rss.peak,
        "rss_increase_mb": rss.peak - rss.before,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spans", type=int, default=200_000)
    parser.add_argument("--spans-per-trace", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=512)
    parser.add_argument("--producers", type=int, default=4)
    parser.add_argument("--settle", type=float, default=1.0, help="StoreWriter settle_seconds (the server's default)")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--skip-direct", action="store_true", help="only the StoreWriter measurement")
    args = parser.parse_args()
    work = batches(args.spans, args.spans_per_trace, args.batch_size)
    results: dict[str, list[float]] = {}
    for run in range(args.runs):
        with tempfile.TemporaryDirectory() as tmp:
            figures = {} if args.skip_direct else bench_write(Path(tmp) / "direct.duckdb", work)
            figures |= bench_writer(Path(tmp) / "writer.duckdb", work, args.producers, args.settle)
        for key, value in figures.items():
            results.setdefault(key, []).append(value)
        print(f"run {run + 1}: " + ", ".join(f"{k}={v:,.1f}" for k, v in figures.items()), flush=True)
    summary = {
        "spans": sum(map(len, work)),
        "spans_per_trace": args.spans_per_trace,
        "batch_size": args.batch_size,
        "producers": args.producers,
        "runs": args.runs,
        **{k: {"median": statistics.median(v), "min": min(v), "max": max(v)} for k, v in results.items()},
    }
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
