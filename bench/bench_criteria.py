"""Benchmark: deterministic criteria through the real grading engine, in cases per second.

Generates N cases (20-step trajectories: 15 node visits and 5 tool calls with nested arguments, a
200-word response), then grades every case with the trajectory (check_args on), node-order, tool-name,
ROUGE and keywords criteria through ``CriteriaGrader`` — the path live and offline runs use. One case in
four deviates (swapped calls, a changed nested argument, a skipped node, reworded text), so the partial-
credit paths run too. Prints cases/s for each of 5 runs and their median, plus cases per CPU-second of
this process (the one-core figure, less distorted when the machine is shared).

    python bench/bench_criteria.py [--cases 5000] [--runs 5] [--match-type IN_ORDER]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import time

from tracegrade.criteria import (
    ContainsKeywordsCriterion,
    NodeOrderMatchCriterion,
    RougeMatchCriterion,
    ToolNameMatchCriterion,
    TrajectoryMatchCriterion,
)
from tracegrade.evaluation.engine import CriteriaGrader
from tracegrade.models import CriterionConfig, EvalCase, ExecutionResult, MatchType, ToolCall, TrajectoryStep

# A small vocabulary; a plain string keeps the list readable.
VOCABULARY = """the agent checked weather forecast for paris and booked a table near river while user asked
about prices refund policy opening hours train tickets museum entry discount family children luggage
storage airport transfer hotel breakfast sunny cloudy rain tomorrow evening morning"""
WORDS = VOCABULARY.split()
NODES = ["router", "planner", "researcher", "writer", "critic"]
TOOLS = ["get_weather", "search_flights", "book_table", "convert_currency", "send_email"]
KEYWORDS = ["paris", "refund", "hotel", "tomorrow", "table"]


def _tool_call(rng: random.Random, name: str) -> ToolCall:
    args = {
        "query": " ".join(rng.choices(WORDS, k=4)),
        "filters": {"max_price": rng.randint(10, 500), "tags": rng.sample(WORDS, 3), "flexible": rng.random() < 0.5},
        "options": [{"key": rng.choice(WORDS), "weight": round(rng.random(), 3)} for _ in range(2)],
    }
    return ToolCall(name=name, args=args, call_id=f"call_{rng.randrange(1 << 30):x}", result={"ok": True})


def make_case(rng: random.Random, index: int) -> tuple[ExecutionResult, EvalCase]:
    """One case and an execution that matches it, except that one case in four deviates."""
    tools = [_tool_call(rng, name) for name in rng.sample(TOOLS, len(TOOLS))]
    nodes = [rng.choice(NODES) for _ in range(15)]
    words = rng.choices(WORDS, k=190) + KEYWORDS * 2
    rng.shuffle(words)
    expected_response = " ".join(words).capitalize() + "."
    actual_tools, actual_nodes, response = [t.model_copy(deep=True) for t in tools], list(nodes), expected_response
    if index % 4 == 3:
        actual_tools[1], actual_tools[2] = actual_tools[2], actual_tools[1]
        actual_tools[0].args["filters"]["max_price"] += 1
        del actual_nodes[rng.randrange(len(actual_nodes))]
        response = " ".join(rng.choices(WORDS, k=200)) + "."
    trajectory, tool_iter = [], iter(actual_tools)
    for i, node in enumerate(actual_nodes):
        trajectory.append(TrajectoryStep.node(node))
        if i % 3 == 2 and (call := next(tool_iter, None)) is not None:
            trajectory.append(TrajectoryStep.tool(call.name, call.args))
    case = EvalCase.single_turn(
        f"case-{index}", "Plan my trip to Paris", expected_response, expected_tools=tools, expected_node_order=nodes
    )
    execution = ExecutionResult(
        tool_calls=actual_tools, node_visits=actual_nodes, trajectory=trajectory, actual_response=response
    )
    return execution, case


def make_grader(match_type: MatchType) -> CriteriaGrader:
    return CriteriaGrader(
        [
            TrajectoryMatchCriterion(CriterionConfig.trajectory(match_type=match_type, check_args=True)),
            NodeOrderMatchCriterion(CriterionConfig.node_order(match_type=match_type)),
            ToolNameMatchCriterion(CriterionConfig.tool_name_match()),
            RougeMatchCriterion(CriterionConfig.rouge_match()),
            ContainsKeywordsCriterion(config=CriterionConfig.contains_keywords(KEYWORDS)),
        ]
    )


async def grade_all(grader: CriteriaGrader, cases: list[tuple[ExecutionResult, EvalCase]]) -> tuple[float, float]:
    """Grade every case; returns (wall seconds, CPU seconds of this process)."""
    wall, cpu = time.perf_counter(), time.process_time()
    for execution, case in cases:
        await grader.grade(execution, case)
    return time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--match-type", choices=[m.value for m in MatchType], default=MatchType.IN_ORDER.value)
    args = parser.parse_args()
    rng = random.Random(42)
    cases = [make_case(rng, i) for i in range(args.cases)]
    grader = make_grader(MatchType(args.match_type))
    rates, cpu_rates = [], []
    for run in range(1, args.runs + 1):
        wall, cpu = asyncio.run(grade_all(grader, cases))
        rates.append(args.cases / wall)
        cpu_rates.append(args.cases / cpu)
        print(
            f"run {run}: {args.cases} cases in {wall:.3f}s = {rates[-1]:,.0f} cases/s ({cpu_rates[-1]:,.0f} per CPU-s)"
        )
    print(
        f"median: {statistics.median(rates):,.0f} cases/s, {statistics.median(cpu_rates):,.0f} cases per CPU-second "
        f"({len(grader.criteria)} criteria per case, match type {args.match_type}, check_args on)"
    )


if __name__ == "__main__":
    main()
