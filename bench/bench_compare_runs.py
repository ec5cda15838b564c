"""Benchmark: ``compare_runs`` (what ``tracegrade gate`` and ``diff`` compute) on two runs of many cases.

Builds a baseline and a candidate report of ``--cases`` cases in memory, each case graded by three criteria: a
pass/fail one, one scored in tenths and one with continuous scores (a ROUGE-like score: nearly every value
distinct); about one case in ten changes between the runs (``--changed``: 1 changes every case, so nearly every
continuous difference is distinct and non-zero). Times ``compare_runs`` alone (the bootstrap intervals, the
permutation tests, McNemar, the flips), median of ``--runs`` runs, CPU seconds of this process.

    python bench/bench_compare_runs.py [--cases 100000] [--runs 3] [--changed 0.1]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from tracegrade.evaluation.compare import compare_runs
from tracegrade.models.results import CriterionResult, EvalCaseResult, EvalReport


def make_runs(cases: int, seed: int = 7, changed: float = 0.1) -> tuple[EvalReport, EvalReport]:
    """A baseline and a candidate of ``cases`` cases; a ``changed`` share of them has new scores in the candidate."""
    rng = random.Random(seed)
    base, cand = [], []
    for index in range(cases):
        scores = [float(rng.random() < 0.8), rng.randint(0, 10) / 10, rng.random()]
        kept = rng.random() >= changed
        new = scores if kept else [float(rng.random() < 0.7), rng.randint(0, 10) / 10, rng.random()]
        for results, values in ((base, scores), (cand, new)):
            criteria = [
                CriterionResult(criterion=name, score=value, passed=value >= 0.5, threshold=0.5)
                for name, value in zip(("pass_fail", "tenths", "continuous"), values)
            ]
            passed = all(c.passed for c in criteria)
            results.append(EvalCaseResult(eval_id=f"case-{index}", passed=passed, criterion_results=criteria))
    return EvalReport.create("bench", base), EvalReport.create("bench", cand)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--changed", type=float, default=0.1, help="share of the cases whose scores change")
    args = parser.parse_args()
    baseline, candidate = make_runs(args.cases, changed=args.changed)
    seconds = []
    for _ in range(args.runs):
        started = time.process_time()
        result = compare_runs(baseline, candidate)
        seconds.append(time.process_time() - started)
    print(
        f"{args.cases} cases ({args.changed:.0%} changed), 3 criteria: compare_runs {statistics.median(seconds):.2f} "
        f"CPU s (median of {args.runs}; {', '.join(f'{s:.2f}' for s in seconds)}); verdict {result.verdict}, "
        f"{len(result.flips)} flips"
    )


if __name__ == "__main__":
    main()
