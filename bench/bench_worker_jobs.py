"""Online grading benchmark: time per grading job of ``GradingWorker`` on a store of many traces.

Copies the offline-grading benchmark's store (``bench_offline_grading.py`` builds and caches it), enqueues the
jobs of one rule that samples ``--sample`` of its traces with one reference-free criterion, and runs ``--jobs``
of them the way ``tracegrade worker`` does (``GradingWorker.run_once`` until enough jobs ran). Prints wall-clock
and CPU milliseconds per job for each run and their medians; with ``--profile``, the cProfile of the first run.

    python bench/bench_worker_jobs.py [--traces 100000] [--jobs 200] [--runs 3] [--profile]
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

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from bench_offline_grading import DEFAULT_STORE, _stored_traces, build_store  # noqa: E402

from tracegrade.evaluation.worker import GradingWorker, WorkerRules  # noqa: E402
from tracegrade.models.config import CriteriaConfig, CriterionConfig  # noqa: E402
from tracegrade.store import TraceStore  # noqa: E402


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
            worker = GradingWorker(store, rules(sample))
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
    return wall / done * 1000, cpu / done * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traces", type=int, default=100_000)
    parser.add_argument("--store", type=Path, default=None, help=f"cached store (default {DEFAULT_STORE})")
    parser.add_argument("--sample", type=float, default=0.01, help="the rule's sample rate")
    parser.add_argument("--jobs", type=int, default=200, help="jobs run per run")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--profile", action="store_true", help="cProfile the first run")
    args = parser.parse_args()
    source = args.store or DEFAULT_STORE.with_name(f"{DEFAULT_STORE.stem}_{args.traces}.duckdb")
    if _stored_traces(source) != args.traces:
        print(f"building {source} with {args.traces:,} traces (cached for later runs)…", file=sys.stderr)
        build_store(source, args.traces)
    walls, cpus = [], []
    for run in range(args.runs):
        wall, cpu = one_run(source, args.sample, args.jobs, args.profile and run == 0)
        walls.append(wall)
        cpus.append(cpu)
        print(f"run {run + 1}: {wall:.1f} ms wall, {cpu:.1f} ms CPU per job", flush=True)
    wall, cpu = statistics.median(walls), statistics.median(cpus)
    print(f"median over {args.runs} runs: {wall:.1f} ms wall, {cpu:.1f} ms CPU per job")


if __name__ == "__main__":
    main()
