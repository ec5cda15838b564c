"""A lake writer's memory over many commits, its connection renewed every ``--renew-after`` commits or never.

One LakeStore (PostgreSQL catalog from $TRACEGRADE_TEST_PG_DSN, a new database per run; Parquet in a temp
directory) commits ``--commits`` small writes (``--spans`` spans of a new trace each, as a receiver's writer does
under a steady load), each followed by a query of the spans view, as readers do. This process's RSS is sampled
every ``--every`` commits, after ``malloc_trim``; the slope is a least-squares fit over the samples after the
first (warm-up). Each run has a process of its own: renewed (the default, ``LakeStore.renew_after_commits``), then
never renewed.

With ``--beside-busy N`` the store commits rarely beside a busy writer (another process committing as fast as it
can): one commit, and its query, after every N of the busy one's, as a receiver taking little traffic beside one
taking much. Its renewals count its own commits (the store's rule), so with ``--commits`` below ``--renew-after``
both runs are alike; the slope is then per lake commit. bench/RESULTS.md ("A lake writer committing rarely") has
what renewing it by every lake commit instead would buy.

    python bench/bench_lake_renewal.py                                  # 3,000 commits each way
    python bench/bench_lake_renewal.py --commits 6000 --renew-after 1000 500
    python bench/bench_lake_renewal.py --beside-busy 20 --commits 150 --every 25
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.support, run from anywhere

from tests.support.pg_cluster import PgServer
from tests.support.store_records import make_span

from tracegrade.store.lake import LakeStore

_NEVER = 10**12
# the busy writer of ``--beside-busy``: commits of 20 spans each, as fast as it can, until killed
_BUSY = """
import sys
from tests.support.store_records import make_span
from tracegrade.store.lake import LakeStore
store = LakeStore(sys.argv[1], data_path=sys.argv[2])
trace = 10**9
while True:
    trace += 1
    store.write([make_span(trace, trace * 20 + n) for n in range(20)])
"""


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


@contextlib.contextmanager
def _new_lake(dsn: str) -> Iterator[tuple[str, Path]]:
    """A new lake's location (a database made for it) and its data path, both removed afterwards."""
    database = f"bench_renewal_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {database}")
    try:
        with tempfile.TemporaryDirectory() as data:
            yield f"ducklake:postgres:{PgServer(dsn).conninfo(database)}", Path(data) / "lake"
    finally:
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE {database} WITH (FORCE)")


def _lake_commits(store: LakeStore) -> int:
    """The id of the lake's newest snapshot: every process's commits, counted one by one."""
    return store._view_columns_known.newest_snapshot_id()


def run(dsn: str, commits: int, spans: int, every: int, renew_after: int, beside_busy: int) -> dict[str, object]:
    with _new_lake(dsn) as (location, data):
        store = LakeStore(location, data_path=data)
        store.renew_after_commits = renew_after
        busy = None
        if beside_busy:
            root = str(Path(__file__).resolve().parents[1])
            env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
            busy = subprocess.Popen([sys.executable, "-c", _BUSY, location, str(data)], env=env)
        first = _lake_commits(store)
        samples = [(0, _rss_mb())]
        started = time.monotonic()
        try:
            for commit in range(1, commits + 1):
                if busy is not None:  # the busy writer's next ``beside_busy`` commits first
                    wanted = _lake_commits(store) + beside_busy
                    while _lake_commits(store) < wanted:
                        time.sleep(0.01)
                store.write([make_span(commit, commit * spans + n) for n in range(spans)])
                store.query("SELECT count(*) FROM spans WHERE trace_id = ?", [make_span(commit, 0).trace_id])
                if commit % every == 0:
                    samples.append((_lake_commits(store) - first if busy else commit, _rss_mb()))
            seconds = time.monotonic() - started
            renewals = store.renewals
        finally:
            if busy is not None:
                busy.kill()
                busy.wait()
            store.close()
    return {
        "renew_after": "never" if renew_after == _NEVER else renew_after,
        "renewals": renewals,
        "lake_commits": samples[-1][0],
        "rss_mb": [round(mb, 1) for _, mb in samples],
        "kb_per_lake_commit": round(_slope(samples[1:]), 1),
        "ms_per_own_commit": round(seconds / commits * 1000, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--commits", type=int, default=3000)
    parser.add_argument("--spans", type=int, default=20, help="spans per commit")
    parser.add_argument("--every", type=int, default=500, help="commits between RSS samples")
    parser.add_argument(
        "--renew-after", type=int, nargs="+", default=[LakeStore.renew_after_commits], help="renewed runs' counts"
    )
    parser.add_argument("--beside-busy", type=int, default=0, help="a busy writer's commits per commit of the store")
    args = parser.parse_args()
    dsn = os.environ.get("TRACEGRADE_TEST_PG_DSN")
    if not dsn:
        raise SystemExit("set TRACEGRADE_TEST_PG_DSN to a PostgreSQL the benchmark may create databases on")
    for renew_after in [*args.renew_after, _NEVER]:
        with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
            measured = pool.submit(run, dsn, args.commits, args.spans, args.every, renew_after, args.beside_busy)
            print(measured.result(), flush=True)


if __name__ == "__main__":
    main()
