"""What a lake maintain pass's first step costs (run by hand): finishing the forgets a killed process left.

A lake on a private PostgreSQL cluster holding ``--traces`` traces of 10 spans (random-looking 32-hex ids, so
no file is skipped by its min/max by chance), flushed and merged by one maintain pass; then, with 10,000 forgotten
traces the lake holds nothing of, ``LakeStore.finish_forgets`` (nothing pending) and a whole maintain pass, and
``finish_forgets`` with 100 traces pending (forgotten, their rows still stored). Medians with their runs, ms.

    python bench/bench_finish_forgets.py [--traces 100000]
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.support, run from anywhere

from tests.support.pg_cluster import PrivateCluster
from tests.support.store_records import make_span

from tracegrade.store.lake import LakeStore
from tracegrade.store.trace_deletion import trace_keys

SPANS = 10


def trace_hex(n: int) -> str:
    return hashlib.md5(str(n).encode()).hexdigest()


def trace(n: int) -> list:
    root = n * 100
    spans = [make_span(n, root, name="agent")]
    spans += [make_span(n, root + k, parent=root, name="tool") for k in range(1, SPANS)]
    return [dataclasses.replace(span, trace_id=trace_hex(n)) for span in spans]


def timed(step: Callable[[], object], rounds: int) -> str:
    runs = []
    for _ in range(rounds):
        started = time.perf_counter()
        step()
        runs.append((time.perf_counter() - started) * 1000)
    return f"median {statistics.median(runs):.0f} ms, runs {[round(r) for r in runs]}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traces", type=int, default=100_000)
    args = parser.parse_args()
    cluster = PrivateCluster()
    pg = cluster.start()
    try:
        with (
            tempfile.TemporaryDirectory() as tmp,
            LakeStore(f"ducklake:postgres:{pg.new_database()}", data_path=Path(tmp) / "data") as store,
        ):
            for start in range(1, args.traces + 1, 1000):
                store.write([s for n in range(start, min(start + 1000, args.traces + 1)) for s in trace(n)])
            store.maintain(keep=timedelta(0))
            store._remember_forgotten(trace_keys("default", [trace_hex(n) for n in range(10**7, 10**7 + 10_000)]))
            print("finish_forgets, nothing pending:", timed(store.finish_forgets, 7))
            print("whole maintain pass, nothing pending:", timed(lambda: store.maintain(keep=timedelta(minutes=15)), 3))
            batches = iter(range(3))

            def pending_100() -> None:
                first = 1 + next(batches) * 100
                store._remember_forgotten(trace_keys("default", [trace_hex(n) for n in range(first, first + 100)]))
                assert store.finish_forgets().traces == 100

            print("finish_forgets, 100 traces pending:", timed(pending_100, 3))
    finally:
        cluster.remove()


if __name__ == "__main__":
    main()
