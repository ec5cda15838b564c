"""Online grading benchmark: time per grading job of ``GradingWorker`` on a store of many traces.

Copies the offline-grading benchmark's store (``bench_offline_grading.py`` builds and caches it), enqueues the
jobs of one rule that samples ``--sample`` of its traces with one reference-free criterion, and runs ``--jobs``
of them the way ``tracegrade worker`` does (``GradingWorker.run_once`` until enough jobs ran). Prints wall-clock
and CPU milliseconds per job for each run and their medians, and after each run how long a worker's first look
for settled traces takes (it reads every trace) against its next one (it reads those updated since); with
``--profile``, the cProfile of the first run.

With ``--lake CONNINFO --lake-data DIR`` the worker grades on a lake instead (its catalog in that PostgreSQL
database, filled with ``--traces`` traces on first use; give it an empty database). A lake is not copied between
runs: each run empties the job queue first, so every run grades the same traces afresh, and the lake keeps the
results of the runs before it (each run replaces their cases).

    python bench/bench_worker_jobs.py [--traces 100000] [--jobs 200] [--runs 3] [--profile]
    python bench/bench_worker_jobs.py --traces 10000 --sample 0.1 --jobs 1000 --lake "host=… dbname=…" --lake-data D
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psycopg

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from bench_offline_grading import DEFAULT_STORE, _stored_traces, build_store, fill_store  # noqa: E402

from tracegrade.evaluation.worker import GradingWorker, WorkerRules  # noqa: E402
from tracegrade.models.config import CriteriaConfig, CriterionConfig  # noqa: E402
from tracegrade.store import TraceStore  # noqa: E402
from tracegrade.store.lake import LakeStore  # noqa: E402
from tracegrade.store.lake_jobs import JOBS_SCHEMA  # noqa: E402


def rules(sample: float) -> WorkerRules:
    criteria = CriteriaConfig(contains_keywords=CriterionConfig.contains_keywords(["refund"], threshold=0.5))
    return WorkerRules.model_validate(
        {"rules": [{"name": "sampled", "settle_seconds": 0, "sample": sample, "criteria": criteria}]}
    )


async def run_jobs(worker: GradingWorker, limit: int) -> int:
    """Run the worker's cycles (``run_once``: enqueue, claim a batch, run it) until ``limit`` jobs ran or none is
    left."""
    done = 0
    while done < limit:
        ran = await worker.run_once()
        if not ran:
            break
        done += ran
    return done


def one_run(source: Path, sample: float, limit: int, profile: bool) -> tuple[float, float]:
    """Milliseconds per job (wall, CPU) on a fresh copy of ``source``."""
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "store.duckdb"
        shutil.copyfile(source, path)
        with TraceStore(path) as store:
            return timed_jobs(store, rules(sample), limit, profile)


def one_lake_run(lake: LakeStore, conninfo: str, sample: float, limit: int, profile: bool) -> tuple[float, float]:
    """Milliseconds per job (wall, CPU) on ``lake``, its job queue emptied first."""
    with psycopg.connect(conninfo, autocommit=True) as catalog:
        catalog.execute(f"DELETE FROM {JOBS_SCHEMA}.grading_jobs")
    return timed_jobs(lake, rules(sample), limit, profile)


def timed_jobs(store: TraceStore, settings: WorkerRules, limit: int, profile: bool) -> tuple[float, float]:
    """Enqueue the rule's jobs, then time the worker's cycles until ``limit`` jobs ran: ms per job (wall, CPU)."""
    worker = GradingWorker(store, settings)
    enqueued = worker.enqueue()
    profiler = cProfile.Profile() if profile else None
    wall, cpu = time.perf_counter(), time.process_time()
    if profiler:
        profiler.enable()
    done = asyncio.run(run_jobs(worker, limit))
    if profiler:
        profiler.disable()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    if profiler:
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(30)
    if not done:
        raise SystemExit(f"no job ran ({enqueued} enqueued)")
    print_look_times(store, settings)
    return wall / done * 1000, cpu / done * 1000


def print_look_times(store: TraceStore, settings: WorkerRules) -> None:
    """How long a new worker's first look for settled traces takes (it reads every trace) and its next one (it
    reads those updated since), once every job exists."""
    worker = GradingWorker(store, settings)
    times = []
    for _ in range(2):
        started = time.perf_counter()
        worker.enqueue()
        times.append((time.perf_counter() - started) * 1000)
    print(f"a look for settled traces: {times[0]:.1f} ms reading every trace, then {times[1]:.1f} ms", flush=True)


def open_lake(conninfo: str, data: Path, traces: int) -> LakeStore:
    """The lake of ``traces`` traces at ``conninfo`` (filled now if it is empty)."""
    lake = LakeStore(f"ducklake:postgres:{conninfo}", data_path=data)
    held = int(lake.query("SELECT count(*) FROM traces").rows[0][0])
    if held == 0:
        print(f"filling the lake with {traces:,} traces…", file=sys.stderr)
        fill_store(lake, traces)
    elif held != traces:
        lake.close()
        raise SystemExit(f"the lake holds {held:,} traces, not {traces:,}: give --lake an empty database")
    return lake


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traces", type=int, default=100_000)
    parser.add_argument("--store", type=Path, default=None, help=f"cached store (default {DEFAULT_STORE})")
    parser.add_argument("--sample", type=float, default=0.01, help="the rule's sample rate")
    parser.add_argument("--jobs", type=int, default=200, help="jobs run per run")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--profile", action="store_true", help="cProfile the first run")
    parser.add_argument("--lake", metavar="CONNINFO", help="grade on a lake whose catalog is this PostgreSQL database")
    parser.add_argument("--lake-data", type=Path, help="the lake's data path (with --lake)")
    args = parser.parse_args()
    if args.lake and not args.lake_data:
        parser.error("--lake needs --lake-data")
    lake = open_lake(args.lake, args.lake_data, args.traces) if args.lake else None
    source = args.store or DEFAULT_STORE.with_name(f"{DEFAULT_STORE.stem}_{args.traces}.duckdb")
    if lake is None and _stored_traces(source) != args.traces:
        print(f"building {source} with {args.traces:,} traces (cached for later runs)…", file=sys.stderr)
        build_store(source, args.traces)
    walls, cpus = [], []
    for run in range(args.runs):
        profile = args.profile and run == 0
        if lake is None:
            wall, cpu = one_run(source, args.sample, args.jobs, profile)
        else:
            wall, cpu = one_lake_run(lake, args.lake, args.sample, args.jobs, profile)
        walls.append(wall)
        cpus.append(cpu)
        print(f"run {run + 1}: {wall:.1f} ms wall, {cpu:.1f} ms CPU per job", flush=True)
    if lake is not None:
        lake.close()
    wall, cpu = statistics.median(walls), statistics.median(cpus)
    print(f"median over {args.runs} runs: {wall:.1f} ms wall, {cpu:.1f} ms CPU per job")


if __name__ == "__main__":
    main()
