"""Benchmark: tracegrade's trajectory criterion against Google ADK's ``TrajectoryEvaluator``, same cases.

Both sides grade the same generated cases: 20 tool calls each, with nested arguments (a query string,
a filters object, a list of option objects), one case in four deviating (two calls swapped and one
nested argument changed), arguments compared. The cases are plain data made from one seed, converted
to each side's own types before the clock starts; the clock covers grading only:

* ``--side tracegrade``: ``TrajectoryMatchCriterion(check_args=True).evaluate_sync`` per case, which
  returns a ``CriterionResult`` with its partial-credit details (matches, missing with reasons, extra,
  both trajectories);
* ``--side adk``: ``TrajectoryEvaluator.evaluate_invocations`` per case (one invocation, its
  ``FunctionCall`` list), which returns a pass/fail score. google-adk is not a tracegrade dependency;
  this side runs in its own virtualenv (``python3 -m venv /tmp/adkvenv && /tmp/adkvenv/bin/pip install
  google-adk``) and imports nothing from tracegrade.
* ``--side both`` (the default) runs the two sides alternately in subprocesses, ``--runs`` times each,
  and prints the medians side by side: trajectories per CPU-second of the grading process (the figure
  the shared 2-core machine distorts least) and per wall-clock second.

    python bench/bench_trajectory_vs_adk.py [--adk-python /tmp/adkvenv/bin/python] [--cases 20000] [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import time
from typing import Any

CALLS_PER_CASE = 20
MATCH_TYPES = ("EXACT", "IN_ORDER", "ANY_ORDER")
VOCABULARY = """the agent checked weather forecast for paris and booked a table near river while user asked about
prices refund policy opening hours train tickets museum entry discount family children luggage"""
WORDS = VOCABULARY.split()
TOOLS = ["get_weather", "search_flights", "book_table", "convert_currency", "send_email", "lookup_order"]


def make_cases(count: int, seed: int = 42) -> list[tuple[list[dict[str, Any]], list[dict[str, Any]]]]:
    """``(expected, actual)`` call lists of ``{"name", "args"}``; one case in four deviates."""
    rng = random.Random(seed)
    cases = []
    for index in range(count):
        expected = [
            {
                "name": rng.choice(TOOLS),
                "args": {
                    "query": " ".join(rng.choices(WORDS, k=4)),
                    "filters": {"max_price": rng.randint(10, 500), "tags": rng.sample(WORDS, 3)},
                    "options": [{"key": rng.choice(WORDS), "weight": round(rng.random(), 3)} for _ in range(2)],
                },
            }
            for _ in range(CALLS_PER_CASE)
        ]
        actual = json.loads(json.dumps(expected))  # equal values, distinct objects (as from a trace)
        if index % 4 == 3:
            actual[5], actual[6] = actual[6], actual[5]
            actual[12]["args"]["filters"]["max_price"] += 1
        cases.append((expected, actual))
    return cases


def tracegrade_grader(match_type: str, cases: list[Any]) -> tuple[Any, list[Any]]:
    from tracegrade.criteria import TrajectoryMatchCriterion
    from tracegrade.models import CriterionConfig, EvalCase, ExecutionResult, MatchType, ToolCall

    criterion = TrajectoryMatchCriterion(CriterionConfig.trajectory(match_type=MatchType(match_type), check_args=True))
    inputs = []
    for index, (expected, actual) in enumerate(cases):
        case = EvalCase.single_turn(f"case-{index}", "Plan my trip", expected_tools=[ToolCall(**c) for c in expected])
        execution = ExecutionResult(tool_calls=[ToolCall(**c, call_id=f"call-{n}") for n, c in enumerate(actual)])
        inputs.append((execution, case))

    def grade(execution: Any, case: Any) -> float:
        return criterion.evaluate_sync(execution, case).score

    return grade, inputs


def adk_grader(match_type: str, cases: list[Any]) -> tuple[Any, list[Any]]:
    from google.adk.evaluation.eval_case import IntermediateData, Invocation
    from google.adk.evaluation.eval_metrics import EvalMetric, ToolTrajectoryCriterion
    from google.adk.evaluation.trajectory_evaluator import TrajectoryEvaluator
    from google.genai import types

    criterion = ToolTrajectoryCriterion(threshold=1.0, match_type=ToolTrajectoryCriterion.MatchType[match_type])
    evaluator = TrajectoryEvaluator(
        eval_metric=EvalMetric(metric_name="tool_trajectory_avg_score", criterion=criterion)
    )
    user = types.Content(role="user", parts=[types.Part(text="Plan my trip")])

    def invocation(calls: list[dict[str, Any]]) -> Any:
        uses = [types.FunctionCall(id=f"call-{n}", **c) for n, c in enumerate(calls)]
        return Invocation(user_content=user, intermediate_data=IntermediateData(tool_uses=uses))

    inputs = [(invocation(actual), invocation(expected)) for expected, actual in cases]

    def grade(actual: Any, expected: Any) -> float:
        return evaluator.evaluate_invocations([actual], [expected]).overall_score

    return grade, inputs


def run_side(side: str, match_type: str, count: int) -> dict[str, float]:
    """Grade ``count`` cases once on one side; wall and CPU seconds of the grading loop."""
    make = adk_grader if side == "adk" else tracegrade_grader
    grade, inputs = make(match_type, make_cases(count))
    for actual, expected in inputs[:200]:  # warm up (imports, caches)
        grade(actual, expected)
    wall, cpu = time.perf_counter(), time.process_time()
    total = 0.0
    for actual, expected in inputs:
        total += grade(actual, expected)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {"cases": count, "wall": wall, "cpu": cpu, "mean_score": total / count}


def _both(args: argparse.Namespace) -> None:
    sides = {"tracegrade": sys.executable, "adk": args.adk_python}
    for match_type in args.match_types.split(","):
        figures: dict[str, list[dict[str, float]]] = {side: [] for side in sides}
        for _ in range(args.runs):
            for side, python in sides.items():
                command = [python, __file__, "--side", side, "--match-types", match_type, "--cases", str(args.cases)]
                done = subprocess.run(command, capture_output=True, text=True, check=False)
                if done.returncode != 0:
                    sys.exit(f"{side} side failed:\n{done.stderr}")
                figures[side].append(json.loads(done.stdout.splitlines()[-1]))
        for side, runs in figures.items():
            per_cpu = statistics.median(r["cases"] / r["cpu"] for r in runs)
            per_wall = statistics.median(r["cases"] / r["wall"] for r in runs)
            print(
                f"{match_type:>9} {side:>10}: median {per_cpu:,.0f} trajectories per CPU-second, "
                f"{per_wall:,.0f}/s wall-clock (mean score {runs[0]['mean_score']:.3f}, {args.runs} runs)"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--side", choices=["both", "tracegrade", "adk"], default="both")
    parser.add_argument("--adk-python", default="/tmp/adkvenv/bin/python", help="a python with google-adk")
    parser.add_argument("--cases", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--match-types", default="EXACT,IN_ORDER", help=f"comma-separated, of {MATCH_TYPES}")
    args = parser.parse_args()
    if args.side == "both":
        _both(args)
    else:
        print(json.dumps(run_side(args.side, args.match_types, args.cases)))


if __name__ == "__main__":
    main()
