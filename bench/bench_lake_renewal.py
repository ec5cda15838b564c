"""A lake writer's memory over many commits, its connection renewed every ``--renew-after`` commits or never.

One LakeStore (PostgreSQL catalog from $TRACEGRADE_TEST_PG_DSN, a new database per run; Parquet in a temp
directory) commits ``--commits`` small writes (``--spans`` spans of a new trace each, as a receiver's writer does
under a steady load), each followed by a query of the spans view, as readers do. This process's RSS is sampled
every ``--every`` commits, after ``malloc_trim``; the slope is a least-squares fit over the samples after the
first (warm-up). Each run has a process of its own: renewed (the default, ``LakeStore.renew_after_commits``), then
never renewed.

    python bench/bench_lake_renewal.py                                  # 3,000 commits each way
    python bench/bench_lake_renewal.py --commits 6000 --renew-after 1000 500
"""

from __future__ import annotations

import argparse
import ctypes
import multiprocessing
import os
import sys
import tempfile
import time
import uuid
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.support, run from anywhere

from tests.support.pg_cluster import PgServer
from tests.support.store_records import make_span

from tracegrade.store.lake import LakeStore

_NEVER = 10**12


def _rss_mb() -> float:
    ctypes.CDLL("libc.so.6").malloc_trim(0)  # what the allocator keeps free is not what the store holds
    for line in Path(f"/proc/{os.getpid()}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS in /proc/self/status")


def _slope(samples: list[tuple[int, float]]) -> float:
    """KB per commit, least squares over ``samples`` (commits, MB)."""
    xs, ys = [x for x, _ in samples], [y for _, y in samples]
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    covariance = sum((x - mean_x) * (y - mean_y) for x, y in samples)
    return covariance / sum((x - mean_x) ** 2 for x in xs) * 1024


def run(dsn: str, commits: int, spans: int, every: int, renew_after: int) -> dict[str, object]:
    server = PgServer(dsn)
    database = f"bench_renewal_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {database}")
    try:
        with tempfile.TemporaryDirectory() as data:
            store = LakeStore(f"ducklake:postgres:{server.conninfo(database)}", data_path=Path(data) / "lake")
            store.renew_after_commits = renew_after
            samples = [(0, _rss_mb())]
            started = time.monotonic()
            try:
                for commit in range(1, commits + 1):
                    store.write([make_span(commit, commit * spans + n) for n in range(spans)])
                    store.query("SELECT count(*) FROM spans WHERE trace_id = ?", [make_span(commit, 0).trace_id])
                    if commit % every == 0:
                        samples.append((commit, _rss_mb()))
                seconds = time.monotonic() - started
                renewals = store.renewals
            finally:
                store.close()
    finally:
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE {database} WITH (FORCE)")
    return {
        "renew_after": "never" if renew_after == _NEVER else renew_after,
        "renewals": renewals,
        "rss_mb": [round(mb, 1) for _, mb in samples],
        "kb_per_commit": round(_slope(samples[1:]), 1),
        "ms_per_commit": round(seconds / commits * 1000, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--commits", type=int, default=3000)
    parser.add_argument("--spans", type=int, default=20, help="spans per commit")
    parser.add_argument("--every", type=int, default=500, help="commits between RSS samples")
    parser.add_argument(
        "--renew-after", type=int, nargs="+", default=[LakeStore.renew_after_commits], help="renewed runs' counts"
    )
    args = parser.parse_args()
    dsn = os.environ.get("TRACEGRADE_TEST_PG_DSN")
    if not dsn:
        raise SystemExit("set TRACEGRADE_TEST_PG_DSN to a PostgreSQL the benchmark may create databases on")
    for renew_after in [*args.renew_after, _NEVER]:
        with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
            print(pool.submit(run, dsn, args.commits, args.spans, args.every, renew_after).result(), flush=True)


if __name__ == "__main__":
    main()
