"""What forgetting traces costs (run by hand): a request to forget, and every write after one.

On a DuckDB file of ``--traces`` traces of 10 spans (written 1,000 traces a transaction), then, alternating
``--rounds`` times:

- forgetting 1 trace, and ``--batch`` traces, each a request of its own (``TraceStore.forget``, durable on
  return: the file writes no WAL, as under a receiver, so each includes its own checkpoint);
- writing ``--writes`` transactions of 100 spans (10 new traces) with the forgotten-trace look-up (the file holds
  forgotten traces) and without it (``holds_forgotten`` off: a file that never forgot a trace).

On a lake (PostgreSQL: $TRACEGRADE_TEST_PG_DSN, else a private cluster) it also times the look-up of 100 traces in
the catalog's table of forgotten traces. Reports medians with ranges.

    python bench/bench_forget.py [--traces 50000] [--batch 1000] [--writes 200] [--rounds 3] [--lake]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # for tests.support when run as a script

from tests.support.pg_cluster import DSN_VARIABLE, PgServer, PrivateCluster
from tests.support.store_records import make_span, trace_hex

from tracegrade.store import TraceStore

SPANS_PER_TRACE = 10


def _trace(n: int) -> list:
    root = n * 100
    return [make_span(n, root, name="agent")] + [
        make_span(n, root + k, parent=root, name="tool") for k in range(1, SPANS_PER_TRACE)
    ]


def _fill(store: TraceStore, first: int, count: int) -> None:
    for start in range(first, first + count, 1000):
        store.write([span for n in range(start, min(start + 1000, first + count)) for span in _trace(n)])


def _writes_seconds(store: TraceStore, first: int, writes: int, look_up: bool) -> float:
    store.holds_forgotten = look_up
    began = time.perf_counter()
    for w in range(writes):
        store.write([span for n in range(first + w * 10, first + w * 10 + 10) for span in _trace(n)])
    store.holds_forgotten = True
    return (time.perf_counter() - began) / writes


def _summary(values: list[float], unit: float, label: str) -> str:
    runs = ", ".join(f"{v * unit:.2f}" for v in values)
    return f"median {statistics.median(values) * unit:.2f} {label} (runs {runs})"


def _file(args: argparse.Namespace) -> None:
    with (
        tempfile.TemporaryDirectory(prefix="bench-forget-") as tmp,
        TraceStore(Path(tmp) / "store.duckdb", wal=False) as store,
    ):
        _fill(store, 0, args.traces)
        store.checkpoint()
        one: list[float] = []
        many: list[float] = []
        looked: list[float] = []
        plain: list[float] = []
        next_trace, victim = args.traces + 1, 0
        for round_ in range(args.rounds):
            store.checkpoint()  # each forget times its own checkpoint, not that of the writes before it
            began = time.perf_counter()
            store.forget([trace_hex(victim)])
            one.append(time.perf_counter() - began)
            batch = [trace_hex(n) for n in range(victim + 1, victim + 1 + args.batch)]
            store.checkpoint()
            began = time.perf_counter()
            store.forget(batch)
            many.append(time.perf_counter() - began)
            victim += args.batch + 1
            sides = [(True, looked), (False, plain)]
            for look_up, seconds in sides if round_ % 2 == 0 else reversed(sides):  # the store grows: alternate
                seconds.append(_writes_seconds(store, next_trace, args.writes, look_up))
                next_trace += args.writes * 10
    print(f"file of {args.traces} traces of {SPANS_PER_TRACE} spans:")
    print(f"  forget 1 trace:            {_summary(one, 1000, 'ms')}")
    print(f"  forget {args.batch} traces:       {_summary(many, 1000, 'ms')}")
    print(f"  write of 100 spans, look-up:    {_summary(looked, 1000, 'ms')}")
    print(f"  write of 100 spans, no look-up: {_summary(plain, 1000, 'ms')}")


def _lake(args: argparse.Namespace) -> None:
    from tracegrade.store.lake import LakeStore

    cluster = None if os.environ.get(DSN_VARIABLE) else PrivateCluster()
    pg = PgServer(os.environ[DSN_VARIABLE]) if cluster is None else cluster.start()
    try:
        with tempfile.TemporaryDirectory(prefix="bench-forget-lake-") as tmp:
            location = f"ducklake:postgres:{pg.new_database()}"
            with LakeStore(location, data_path=Path(tmp) / "data") as store:
                store.write(_trace(1))
                store.forget([trace_hex(n) for n in range(0, 2000, 2)])
                keys = {("default", trace_hex(n)) for n in range(100)}
                medians = []
                for _ in range(args.rounds):
                    times = []
                    for _ in range(50):
                        began = time.perf_counter()
                        store._forgotten_among(keys)
                        times.append(time.perf_counter() - began)
                    medians.append(statistics.median(times))
    finally:
        if cluster is not None:
            cluster.remove()
    print(f"lake: look-up of 100 traces among 1,000 forgotten: {_summary(medians, 1000, 'ms')}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=int, default=50_000)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--writes", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--lake", action="store_true", help="also time the look-up on a lake")
    args = parser.parse_args()
    _file(args)
    if args.lake:
        _lake(args)


if __name__ == "__main__":
    main()
