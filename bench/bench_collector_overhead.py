"""CPU overhead of the TrajectoryCollector on instrumented agent runs (target: under 10%).

Two workloads, each run many times per measurement:
  * pydantic-ai: an Agent on a scripted FunctionModel calling two tools per run (its own instrumentation);
  * function graph: nodes and tools traced with trace_node / trace_tool, each decoding and encoding a JSON
    body the size of a typical tool or model HTTP response.
Baseline: the same runs with the provider recording spans but no span processor. With the collector: the
collector is attached and each run's trajectory is mapped once (as AgentEvaluator does), then released.
CPU time is ``time.process_time``, the two set-ups interleaved in chunks of 10 runs; the figure is the
median of 5 measurements.

    python bench/bench_collector_overhead.py [--runs 200] [--repeats 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections.abc import Awaitable, Callable

from opentelemetry.sdk.trace import TracerProvider
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.instrumented import InstrumentationSettings

from tracegrade.capture import TrajectoryCollector, TurnScope, trace_node, trace_tool, turn_span
from tracegrade.trajectory import COMPILED

# about the size of one tool's or one model's HTTP response body (~14 kB of JSON)
PAYLOAD = {"items": [{"sku": f"sku-{i}", "qty": i, "tags": ["a", "b", "c"], "price": i * 1.5} for i in range(200)]}


def _model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    last = messages[-1]
    if isinstance(last, ModelRequest) and any(isinstance(p, ToolReturnPart) for p in last.parts):
        return ModelResponse(parts=[TextPart("Both items are in stock.")])
    return ModelResponse(
        parts=[
            ToolCallPart("stock", {"sku": "sku-1"}, tool_call_id="c1"),
            ToolCallPart("stock", {"sku": "sku-2"}, tool_call_id="c2"),
        ]
    )


def pydantic_ai_workload(provider: TracerProvider) -> Callable[[], Awaitable[object]]:
    agent = Agent(FunctionModel(_model), name="bench")
    agent.instrument = InstrumentationSettings(tracer_provider=provider)

    @agent.tool_plain
    def stock(sku: str) -> str:
        data = json.loads(json.dumps(PAYLOAD))
        return f"{sku}: {sum(item['qty'] for item in data['items'])} units"

    return lambda: agent.run("Are sku-1 and sku-2 in stock?")


@trace_tool
def price(sku: str) -> float:
    data = json.loads(json.dumps(PAYLOAD))
    return sum(item["price"] for item in data["items"] if item["sku"] != sku)


@trace_node("planner")
async def planner(message: str) -> list[str]:
    return sorted({word for word in json.dumps(PAYLOAD).split('"') if word.startswith("sku-")})[:3]


@trace_node("writer")
def writer(prices: list[float]) -> str:
    return json.dumps({"total": sum(prices), "payload": PAYLOAD})[:40]


async def function_graph(message: str) -> str:
    skus = await planner(message)
    return writer([price(sku) for sku in skus])


def function_graph_workload(provider: TracerProvider) -> Callable[[], Awaitable[object]]:
    return lambda: function_graph("price check")


class _Setup:
    """One provider (with or without the collector) and the workload bound to it."""

    def __init__(
        self, make_workload: Callable[[TracerProvider], Callable[[], Awaitable[object]]], with_collector: bool
    ) -> None:
        self.provider = TracerProvider()
        self.collector = TrajectoryCollector() if with_collector else None
        if self.collector is not None:
            self.provider.add_span_processor(self.collector)
        self.run_once = make_workload(self.provider)
        self.cpu = 0.0

    async def run(self, runs: int, first: int) -> None:
        started = time.process_time()
        for i in range(first, first + runs):
            with turn_span(self.provider, TurnScope("case", 0, str(i)), "price check"):
                await self.run_once()
            if self.collector is not None:  # what AgentEvaluator does after each turn
                self.collector.execution_for("case", 0, str(i))
                self.collector.release("case", str(i))
        self.cpu += time.process_time() - started


async def _measure(make_workload, runs: int, chunk: int = 10) -> tuple[float, float]:
    """CPU seconds of ``runs`` runs without and with the collector, interleaved in chunks to cancel drift."""
    base, collected = _Setup(make_workload, False), _Setup(make_workload, True)
    await base.run(chunk, -chunk)  # warm up both
    await collected.run(chunk, -chunk)
    base.cpu = collected.cpu = 0.0
    for first in range(0, runs, chunk):
        await base.run(chunk, first)
        await collected.run(chunk, first)
    return base.cpu, collected.cpu


async def main(runs: int, repeats: int) -> None:
    print(f"mapper {'compiled (mypyc)' if COMPILED else 'pure Python'}")
    for name, workload in (
        ("pydantic-ai FunctionModel agent", pydantic_ai_workload),
        ("trace_node/trace_tool function graph", function_graph_workload),
    ):
        overheads, base_times, with_times = [], [], []
        for _ in range(repeats):
            base, with_collector = await _measure(workload, runs)
            base_times.append(base)
            with_times.append(with_collector)
            overheads.append((with_collector - base) / base * 100)
        print(f"{name}: {runs} runs x {repeats} repeats")
        print(f"  CPU per run without processor: {statistics.median(base_times) / runs * 1e3:.3f} ms")
        print(f"  CPU per run with collector   : {statistics.median(with_times) / runs * 1e3:.3f} ms")
        print(
            f"  overhead (median of {repeats}): {statistics.median(overheads):.1f}%  "
            f"(all: {', '.join(f'{o:.1f}' for o in overheads)})"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    asyncio.run(main(args.runs, args.repeats))
