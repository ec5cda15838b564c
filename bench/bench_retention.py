"""Retention on a DuckDB store file: how long a pass takes, and how long a writer waits for it (run by hand).

Builds a store of ``--traces`` agent traces of ``--spans`` spans each (~600-byte attributes, written as the
receiver writes: no WAL, 8,192-span transactions, a checkpoint after each), marks the cutoff, then writes as
many traces again. Each run copies that store, then expires the first half with ``TraceStore.expire`` while
another thread writes one 10-span trace at a time, as a receiver's writer would between batches. Reports the
medians over ``--repeat`` runs of the pass's time and traces/s, and the writer's longest and median write
during the pass against the same writes with no pass running. Also reports the file's size after the
store is filled again, which shows whether the space freed is reused.

    python bench/bench_retention.py [--traces 50000] [--spans 10] [--repeat 3] [--batch 5000]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # for tests.support when run as a script

from tests.support.store_records import make_span

from tracegrade.models.span import SpanRecord
from tracegrade.store.retention import EXPIRE_BATCH
from tracegrade.store.rows import utc_now
from tracegrade.store.trace_store import TraceStore

_WORDS = ("find", "the", "cheapest", "flight", "to", "lisbon", "book", "a", "window", "seat", "email", "itinerary")


def _trace(rng: random.Random, number: int, spans: int) -> list[SpanRecord]:
    root = number * 100
    text = " ".join(rng.choice(_WORDS) for _ in range(100))  # ~600 bytes that compress like text
    return [make_span(number, root, name="agent", attributes={"input": text})] + [
        make_span(number, root + n, parent=root, name="tool", attributes={"gen_ai.tool.name": "search", "out": text})
        for n in range(1, spans)
    ]


def _fill(store: TraceStore, first: int, traces: int, spans: int) -> None:
    rng = random.Random(first)
    per_commit = max(1, 8192 // spans)
    for start in range(first, first + traces, per_commit):
        batch = [s for n in range(start, min(start + per_commit, first + traces)) for s in _trace(rng, n, spans)]
        store.write(batch)
        store.checkpoint()


def _writes_during(store: TraceStore, spans: int, work: threading.Event, first: int) -> list[float]:
    """Write one trace at a time until ``work`` is cleared; each write's seconds."""
    rng = random.Random(first)
    seconds: list[float] = []
    number = first
    while work.is_set():
        trace = _trace(rng, number, spans)
        began = time.perf_counter()
        store.write(trace)
        seconds.append(time.perf_counter() - began)
        number += 1
    return seconds


def _one_run(base: Path, work_dir: Path, cutoff: object, args: argparse.Namespace, run: int) -> dict[str, float]:
    path = work_dir / f"run{run}.duckdb"
    shutil.copy(base, path)
    with TraceStore(path, wal=False) as store:
        # the writer alone, for its ordinary write time
        alone: list[float] = []
        done = threading.Event()
        done.set()
        timer = threading.Timer(2.0, done.clear)
        timer.start()
        alone = _writes_during(store, 10, done, 10_000_000 + run * 1_000_000)
        # the writer while a pass runs
        writing = threading.Event()
        writing.set()
        during: list[float] = []
        writer = threading.Thread(
            target=lambda: during.extend(_writes_during(store, 10, writing, 20_000_000 + run * 1_000_000))
        )
        writer.start()
        began = time.perf_counter()
        expired = store.expire(cutoff, batch=args.batch)  # type: ignore[arg-type]
        seconds = time.perf_counter() - began
        writing.clear()
        writer.join()
        assert expired.traces == args.traces, expired.summary()
        size_before = os.path.getsize(path)
        _fill(store, 30_000_000, args.traces, args.spans)  # as many traces again, into the freed space
        size_after = os.path.getsize(path)
    path.unlink()
    return {
        "seconds": seconds,
        "traces_per_s": expired.traces / seconds,
        "spans_per_s": expired.spans / seconds,
        "alone_median_ms": statistics.median(alone) * 1000,
        "alone_max_ms": max(alone) * 1000,
        "during_median_ms": statistics.median(during) * 1000 if during else float("nan"),
        "during_max_ms": max(during) * 1000 if during else float("nan"),
        "writes_during": len(during),
        "size_mib_before_refill": size_before / 2**20,
        "size_mib_after_refill": size_after / 2**20,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=int, default=50_000, help="traces expired per run (as many are kept)")
    parser.add_argument("--spans", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--batch", type=int, default=EXPIRE_BATCH)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-retention-") as tmp:
        work_dir = Path(tmp)
        base = work_dir / "base.duckdb"
        with TraceStore(base, wal=False) as store:
            _fill(store, 1, args.traces, args.spans)
            time.sleep(0.01)
            cutoff = utc_now()
            time.sleep(0.01)
            _fill(store, 1 + args.traces, args.traces, args.spans)
        print(f"store: {2 * args.traces} traces of {args.spans} spans, {os.path.getsize(base) / 2**20:.0f} MiB")
        runs = [_one_run(base, work_dir, cutoff, args, run) for run in range(args.repeat)]
    for key in runs[0]:
        values = [run[key] for run in runs]
        print(f"{key:24} median {statistics.median(values):10.2f}   runs {', '.join(f'{v:.2f}' for v in values)}")


if __name__ == "__main__":
    main()
