"""What a lake writer's guards cost it: seconds per commit with a guard and without it (run by hand).

Commits ``--commits`` small agent traces (20 spans, one transaction each, as a receiver's writer commits) into a
fresh lake, once with every guard and once without the one ``--without`` names, alternating ``--rounds`` times:
``gate``, the write gate (a shared advisory lock in the catalog around each transaction), replaced by no lock;
``forgotten``, the look-up of forgotten traces in each write's transaction, skipped. Reports the median seconds
per commit of each side. PostgreSQL: $TRACEGRADE_TEST_PG_DSN (a new database), else a private cluster.

    TRACEGRADE_TEST_PG_DSN="host=127.0.0.1 port=55432 user=postgres dbname=tracegrade" \\
        python bench/bench_lake_gate.py [--commits 100] [--rounds 3] [--without gate|forgotten]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # for tests.support when run as a script

from tests.support.pg_cluster import DSN_VARIABLE, PgServer, PrivateCluster
from tests.support.store_records import make_span

from tracegrade.store.lake import LakeStore


class _NoGate:
    """The gate's interface with no lock: what a commit cost before the gate."""

    shared = exclusive = staticmethod(contextlib.nullcontext)

    def close(self) -> None:
        pass


def _per_commit(location: str, data: Path, commits: int, without: str | None) -> float:
    with LakeStore(location, data_path=data) as store:
        if without == "gate":
            store._gate.close()
            store._gate = _NoGate()  # type: ignore[assignment]
        elif without == "forgotten":
            store.holds_forgotten = False
        base = uuid.uuid4().int % 10**5 * 1000
        began = time.perf_counter()
        for n in range(commits):
            trace = base + n
            store.write([make_span(trace, trace * 100 + k, name="tool") for k in range(20)])
        return (time.perf_counter() - began) / commits


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--without", choices=["gate", "forgotten"], default="gate")
    args = parser.parse_args()
    cluster = None if os.environ.get(DSN_VARIABLE) else PrivateCluster()
    pg = PgServer(os.environ[DSN_VARIABLE]) if cluster is None else cluster.start()
    try:
        with tempfile.TemporaryDirectory(prefix="bench-lake-gate-") as tmp:
            location = f"ducklake:postgres:{pg.new_database()}"
            data = Path(tmp) / "lake-data"
            _per_commit(location, data, 5, None)  # creates the lake
            plain = f"no {args.without}"
            seconds: dict[str, list[float]] = {"guarded": [], plain: []}
            for _ in range(args.rounds):
                seconds["guarded"].append(_per_commit(location, data, args.commits, None))
                seconds[plain].append(_per_commit(location, data, args.commits, args.without))
    finally:
        if cluster is not None:
            cluster.remove()
    for side, values in seconds.items():
        runs = ", ".join(f"{v * 1000:.1f}" for v in values)
        print(f"{side:13} median {statistics.median(values) * 1000:.1f} ms per commit   runs {runs}")


if __name__ == "__main__":
    main()
