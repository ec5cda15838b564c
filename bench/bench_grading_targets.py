"""The three grading-speed targets of issue 26 §4, measured side by side in one run, as one table.

Each round runs, each in its own process and one after the other: the trajectory criterion and ADK's
``TrajectoryEvaluator`` on the same 20-call cases (EXACT, then IN_ORDER; ``bench_trajectory_vs_adk.py``),
the five deterministic criteria of ``bench_criteria.py`` (IN_ORDER, arguments checked), and offline grading
of an eval set from a store (one case per trace, five criteria; ``bench_offline_grading.py``'s store and
config). ``--runs`` rounds interleave the benchmarks, so load on the shared machine falls on all of them
alike. Rates are per CPU-second of the grading process (wall-clock beside them); the table gives each
median, its range over the runs, and whether it meets the target.

    python bench/bench_grading_targets.py [--runs 3] [--adk-python /tmp/adkvenv/bin/python]
        [--trajectory-cases 5000] [--criteria-cases 2000] [--traces 10000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
CRITERIA_TARGET = 15_000  # cases per second
OFFLINE_TARGET = 5_000  # traces per second


def _criteria(cases: int) -> dict[str, float]:
    sys.path.insert(0, str(BENCH))
    import bench_criteria

    from tracegrade.models import MatchType

    rng = random.Random(42)
    made = [bench_criteria.make_case(rng, i) for i in range(cases)]
    grader = bench_criteria.make_grader(MatchType.IN_ORDER)
    asyncio.run(bench_criteria.grade_all(grader, made[:200]))  # warm up
    wall, cpu = asyncio.run(bench_criteria.grade_all(grader, made))
    return {"count": cases, "wall": wall, "cpu": cpu}


def _offline(traces: int, store_path: str) -> dict[str, float]:
    sys.path.insert(0, str(BENCH))
    import bench_offline_grading as offline

    from tracegrade.evaluation.case_export import cases_from_traces
    from tracegrade.evaluation.offline import TraceGrader
    from tracegrade.evaluation.selection import TraceSelection
    from tracegrade.store import TraceStore

    with TraceStore(Path(store_path), read_only=True) as store:
        eval_set = cases_from_traces(store, TraceSelection(), name="bench")
        grader = TraceGrader(store, offline.EVAL_SET)
        wall, cpu = time.perf_counter(), time.process_time()
        report = grader.grade_eval_set_sync(eval_set)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    if len(report.results) != traces:
        raise SystemExit(f"graded {len(report.results)} of {traces} traces")
    return {"count": traces, "wall": wall, "cpu": cpu}


def _run(command: list[str]) -> dict[str, float]:
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed:\n{done.stderr}")
    figures = json.loads(done.stdout.splitlines()[-1])
    figures.setdefault("count", figures.get("cases", 0))  # bench_trajectory_vs_adk.py names it "cases"
    return figures


def _table(figures: dict[str, list[dict[str, float]]], targets: dict[str, str]) -> None:
    print("| benchmark | median /CPU-s | range /CPU-s | median /s wall | target | met |")
    print("|---|---|---|---|---|---|")
    rates = {name: [r["count"] / r["cpu"] for r in runs] for name, runs in figures.items()}
    for name, runs in figures.items():
        per_cpu = statistics.median(rates[name])
        per_wall = statistics.median(r["count"] / r["wall"] for r in runs)
        target = targets.get(name, "")
        if target.startswith(">= "):  # a fixed rate, or the rate of another row
            bar = target[3:]
            floor = statistics.median(rates[bar]) if bar in rates else float(bar.replace(",", ""))
            met = "yes" if per_cpu >= floor else "no"
        else:
            met = ""
        spread = f"{min(rates[name]):,.0f}–{max(rates[name]):,.0f}"
        print(f"| {name} | {per_cpu:,.0f} | {spread} | {per_wall:,.0f} | {target} | {met} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--adk-python", default="/tmp/adkvenv/bin/python", help="a python with google-adk")
    parser.add_argument("--trajectory-cases", type=int, default=5_000)
    parser.add_argument("--criteria-cases", type=int, default=2_000)
    parser.add_argument("--traces", type=int, default=10_000, help="stored traces graded offline")
    parser.add_argument("--store", type=Path, default=None, help="cached offline-grading store")
    parser.add_argument("--one", choices=["criteria", "offline"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    store = args.store or Path(f"/tmp/tracegrade_bench_offline_grading_{args.traces}.duckdb")
    if args.one == "criteria":
        print(json.dumps(_criteria(args.criteria_cases)))
        return
    if args.one == "offline":
        print(json.dumps(_offline(args.traces, str(store))))
        return

    sys.path.insert(0, str(BENCH))
    import bench_offline_grading

    if bench_offline_grading._stored_traces(store) != args.traces:
        print(f"building {store} with {args.traces:,} traces (cached for later runs)…", file=sys.stderr)
        bench_offline_grading.build_store(store, args.traces)
    trajectory = str(BENCH / "bench_trajectory_vs_adk.py")
    commands: dict[str, list[str]] = {}
    for match_type in ("EXACT", "IN_ORDER"):
        for side, python in (("tracegrade", sys.executable), ("adk", args.adk_python)):
            commands[f"trajectory {match_type}, {side}"] = [
                *(python, trajectory, "--side", side, "--match-types", match_type),
                *("--cases", str(args.trajectory_cases)),
            ]
    own = [sys.executable, __file__, "--traces", str(args.traces), "--store", str(store)]
    commands["bench_criteria (5 criteria)"] = [*own, "--one", "criteria", "--criteria-cases", str(args.criteria_cases)]
    commands["offline eval set (5 criteria)"] = [*own, "--one", "offline"]
    figures: dict[str, list[dict[str, float]]] = {name: [] for name in commands}
    for round_ in range(args.runs):
        for name, command in commands.items():
            figures[name].append(_run(command))
            print(f"round {round_ + 1}: {name}: {json.dumps(figures[name][-1])}", file=sys.stderr, flush=True)
    targets = {
        "trajectory EXACT, tracegrade": ">= trajectory EXACT, adk",
        "trajectory IN_ORDER, tracegrade": ">= trajectory IN_ORDER, adk",
        "bench_criteria (5 criteria)": f">= {CRITERIA_TARGET:,}",
        "offline eval set (5 criteria)": f">= {OFFLINE_TARGET:,}",
    }
    _table(figures, targets)


if __name__ == "__main__":
    main()
