"""Benchmark: what ``num_runs`` adds to grading, per trial: combining k graded trials into one case result.

Builds bench_criteria's cases, grades each case ``--trials`` times through the real engine (every trial
its own case result, as a live or offline run makes it; trials alternate between the matching execution
and a deviating one, so scores differ and the statistics do real work), then combines each case's
trials with ``combine_trials`` (mean scores, Wilson intervals, pass@k, pass^k, flaky). Prints grading
seconds, combining seconds and the overhead as a share of the grading, median of ``--runs`` runs.

    python bench/bench_trials.py [--cases 1000] [--trials 5] [--runs 5]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import time

from bench_criteria import make_case, make_grader

from tracegrade.evaluation.engine import build_case_result
from tracegrade.evaluation.trials import combine_trials
from tracegrade.models import EvalCase, ExecutionResult, MatchType


def trial_inputs(count: int, seed: int = 42) -> list[tuple[EvalCase, list[ExecutionResult]]]:
    """Each case with its matching execution and a deviating one (same random draws up to the deviation)."""
    rng = random.Random(seed)
    cases = []
    for i in range(count):
        state = rng.getstate()
        matching, case = make_case(rng, 4 * i)
        rng.setstate(state)
        deviating, _ = make_case(rng, 4 * i + 3)
        cases.append((case, [matching, deviating]))
    return cases


async def run_once(cases: list[tuple[EvalCase, list[ExecutionResult]]], trials: int) -> tuple[float, float]:
    grader = make_grader(MatchType.IN_ORDER)
    graded = []
    start = time.process_time()
    for case, executions in cases:
        per_case = []
        for t in range(trials):
            execution = executions[1 if t % 3 == 2 else 0]
            per_case.append(build_case_result(case, execution, await grader.grade(execution, case), 0.0))
        graded.append(per_case)
    grading = time.process_time() - start
    start = time.process_time()
    for per_case in graded:
        combine_trials(per_case)
    return grading, time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    cases = trial_inputs(args.cases)
    shares = []
    for run in range(1, args.runs + 1):
        grading, combining = asyncio.run(run_once(cases, args.trials))
        shares.append(combining / grading)
        print(f"run {run}: grading {grading:.3f} CPU-s, combining {combining:.3f} CPU-s = +{shares[-1]:.1%}")
    print(
        f"median overhead of num_runs={args.trials}: +{statistics.median(shares):.1%} of grading time per trial "
        f"({args.cases} cases, 5 criteria each)"
    )


if __name__ == "__main__":
    main()
