"""Benchmark: where a cold trajectory case's time goes, per kind of case, on tracegrade's side or ADK's.

``bench_trajectory_vs_adk.py`` grades each of its cases once after building them all, so every case is read from
memory, not from the caches. This splits that figure: the grading loop over the matching cases and over the
deviating ones (one in four), and the one read of both call lists each side cannot avoid — tracegrade's C pass
(``calls_satisfy_in_place``) or, on ADK's side, a Python loop comparing names and arguments with ``==``; then,
warm, one case of each kind graded ``--cases`` times over. Best of ``--repeats`` loops, microseconds per case.
ADK's side runs in a virtualenv with google-adk, as in ``bench_trajectory_vs_adk.py``:

    python bench/bench_trajectory_split.py --side tracegrade [--match-type EXACT]
    /tmp/adkvenv/bin/python bench/bench_trajectory_split.py --side adk [--match-type EXACT]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from typing import Any

from bench_trajectory_vs_adk import adk_grader, make_cases, tracegrade_grader


def per_case(step: Callable[[Any, Any], object], cases: Sequence[tuple[Any, Any]], repeats: int) -> float:
    """Microseconds per case of ``step`` over ``cases``, best of ``repeats`` loops."""
    best = float("inf")
    for _ in range(repeats):
        started = time.process_time()
        for first, second in cases:
            step(first, second)
        best = min(best, time.process_time() - started)
    return best / len(cases) * 1e6


def _one_read(side: str) -> Callable[[Any, Any], object]:
    if side == "adk":

        def compare(actual: Any, expected: Any) -> bool:
            pairs = zip(actual.intermediate_data.tool_uses, expected.intermediate_data.tool_uses)
            return all(a.name == e.name and a.args == e.args for a, e in pairs)

        return compare
    from tracegrade.criteria.call_compare import calls_satisfy_in_place

    return lambda execution, case: calls_satisfy_in_place(execution.tool_calls, case.expected_tools())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--side", choices=["tracegrade", "adk"], required=True)
    parser.add_argument("--match-type", default="EXACT", choices=["EXACT", "IN_ORDER", "ANY_ORDER"])
    parser.add_argument("--cases", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    make = adk_grader if args.side == "adk" else tracegrade_grader
    grade, inputs = make(args.match_type, make_cases(args.cases))
    matching = [pair for index, pair in enumerate(inputs) if index % 4 != 3]
    deviating = [pair for index, pair in enumerate(inputs) if index % 4 == 3]
    print(f"{args.side} {args.match_type}, us per case, cold:")
    print(f"  matching case, whole    {per_case(grade, matching, args.repeats):6.1f}")
    print(f"  deviating case, whole   {per_case(grade, deviating, args.repeats):6.1f}")
    print(f"  one read of both lists  {per_case(_one_read(args.side), matching, args.repeats):6.1f}")
    # the first case of each kind graded over and over: what the work costs once the case is in the caches
    print(f"{args.side} {args.match_type}, us per case, warm:")
    print(f"  matching case, whole    {per_case(grade, matching[:1] * args.cases, args.repeats):6.1f}")
    print(f"  deviating case, whole   {per_case(grade, deviating[:1] * args.cases, args.repeats):6.1f}")


if __name__ == "__main__":
    main()
