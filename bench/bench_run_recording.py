"""Run-recording benchmark: what recording a graded run in the store costs, as a fraction of grading it.

``tracegrade grade`` grades the cases and then records the run (``record_report``: one ``eval_runs`` row
with the report JSON, a row per case, a row per criterion result). Each run here copies a cached store of
``--cases`` loadgen agent traces (bench/bench_offline_grading.py builds it), grades one case per trace with
five deterministic criteria (tool_name_match, trajectory with arguments, node_order, rouge_match,
contains_keywords: five result rows per case), then records the report into the same store, as the CLI
does. Wall-clock medians of ``--runs``; the target is recording under 20% of grading time.

    python bench/bench_run_recording.py                   # 20,000 cases, 3 runs
    python bench/bench_run_recording.py --cases 2000 --runs 1
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from bench_offline_grading import DEFAULT_STORE, EVAL_SET, build_store  # noqa: E402

from tracegrade.evaluation.case_export import cases_from_traces  # noqa: E402
from tracegrade.evaluation.offline import TraceGrader  # noqa: E402
from tracegrade.evaluation.run_records import record_report  # noqa: E402
from tracegrade.evaluation.selection import TraceSelection  # noqa: E402
from tracegrade.store import TraceStore  # noqa: E402

TARGET_FRACTION = 0.20


def _stored_traces(path: Path) -> int:
    if not path.exists():
        return -1
    with TraceStore(path) as store:  # read-write: a cache built by an older tracegrade is migrated
        return int(store.query("SELECT count(*) FROM traces").rows[0][0])


def _one_run(cached: Path, cases: int, run: int) -> tuple[float, float]:
    """Grade and record on a fresh copy of ``cached``; the wall-clock seconds each took (CPU seconds printed:
    on a shared machine they say more)."""
    with tempfile.TemporaryDirectory(prefix="tracegrade_bench_recording_") as folder:
        path = Path(folder) / "store.duckdb"
        shutil.copyfile(cached, path)
        with TraceStore(path) as store:
            eval_set = cases_from_traces(store, TraceSelection(), name="bench")
            started, cpu_started = time.perf_counter(), time.process_time()
            report = TraceGrader(store, EVAL_SET).grade_eval_set_sync(eval_set)
            graded, cpu_graded = time.perf_counter(), time.process_time()
            record_report(store, report, "eval_set", f"run-bench-{run}")
            recorded, cpu_recorded = time.perf_counter(), time.process_time()
            rows = store.query("SELECT count(*) FROM eval_results").rows[0][0]
            size = store.query(
                "SELECT coalesce(strlen(report::VARCHAR), 0) + coalesce(octet_length(case_results), 0) FROM eval_runs"
            ).rows[0][0]
    assert len(report.results) == cases, f"graded {len(report.results)} of {cases}"
    grading, recording = graded - started, recorded - graded
    cpu_grading, cpu_recording = cpu_graded - cpu_started, cpu_recorded - cpu_graded
    print(
        f"  run {run + 1}: grading {grading:.2f}s ({cpu_grading:.2f}s CPU), recording {recording:.2f}s "
        f"({cpu_recording:.2f}s CPU; {rows:,} result rows, report JSON {size / 1e6:.1f} MB) "
        f"= {recording / grading:.1%} of grading ({cpu_recording / cpu_grading:.1%} in CPU time)",
        flush=True,
    )
    return grading, recording


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--store", type=Path, default=None, help=f"cached store (default {DEFAULT_STORE})")
    args = parser.parse_args(argv)
    cached = args.store or DEFAULT_STORE.with_name(f"{DEFAULT_STORE.stem}_{args.cases}.duckdb")
    if _stored_traces(cached) != args.cases:
        print(f"building {cached} with {args.cases:,} traces (cached for later runs)…", file=sys.stderr)
        build_store(cached, args.cases)
    timings = [_one_run(cached, args.cases, run) for run in range(args.runs)]
    grading = statistics.median(g for g, _ in timings)
    recording = statistics.median(r for _, r in timings)
    fractions = sorted(r / g for g, r in timings)
    verdict = "meets" if statistics.median(fractions) < TARGET_FRACTION else "MISSES"
    print(
        f"\n{args.cases:,} cases: grading median {grading:.2f}s, recording median {recording:.2f}s; "
        f"recording/grading median {statistics.median(fractions):.1%} (range {fractions[0]:.1%}-{fractions[-1]:.1%}), "
        f"{verdict} the {TARGET_FRACTION:.0%} target"
    )


if __name__ == "__main__":
    main()
