"""Benchmark: LLM-judged grading through the judge layer against a local server answering after 200 ms.

200 cases x 3 samples of ``response_match`` (600 judge calls, real litellm over HTTP, cache off) under one
judge runtime with a concurrency limit of 16. Ideal wall time = calls x latency / concurrency = 7.5 s;
target: within 1.25x of that. The scripted server runs in its own process so its CPU does not share our
GIL. Besides the wall time, the process CPU time per call is reported: when it approaches
latency / concurrency (12.5 ms), litellm's per-call overhead, not the server, sets the pace. A baseline
sends the same 600 requests with plain httpx under the same limit, to separate the machine and the server
from the judge layer.

    python bench/bench_judges.py [--cases 200] [--samples 3] [--latency 0.2] [--concurrency 16] [--runs 3]
        [--api-style chat|responses] [--unpriced]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.llm_server import LLMServer, Reply

from tracegrade.criteria.llm import ResponseMatchCriterion
from tracegrade.judges import JudgeRuntime, judge_runtime
from tracegrade.judges.llm import load_litellm
from tracegrade.models.config import CriterionConfig
from tracegrade.models.dataset import EvalCase
from tracegrade.models.execution import ExecutionResult


def serve(latency: float, port_queue: multiprocessing.Queue, stop: multiprocessing.Event) -> None:
    server = LLMServer(responder=lambda request: Reply.score(0.9, "close enough"), latency=latency).start()
    port_queue.put(server.port)
    stop.wait()
    server.stop()


def make_cases(n: int) -> list[tuple[ExecutionResult, EvalCase]]:
    return [
        (
            ExecutionResult(actual_response=f"Order {i} ships on day {i % 7}."),
            EvalCase.single_turn(f"case-{i}", f"When does order {i} ship?", expected_response=f"Day {i % 7}."),
        )
        for i in range(n)
    ]


async def grade_all(config: CriterionConfig, cases, concurrency: int) -> tuple[float, float, int]:
    criterion = ResponseMatchCriterion(config)
    runtime = JudgeRuntime(max_concurrency=concurrency, cache=None)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    with judge_runtime(runtime):
        results = await asyncio.gather(*(criterion.evaluate(actual, case) for actual, case in cases))
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    failed = [r for r in results if r.error or r.details.get("dropped_samples")]
    if failed:
        raise SystemExit(f"{len(failed)} cases had failed samples, e.g. {failed[0].details}")
    return wall, cpu, runtime.usage.calls


async def httpx_baseline(base_url: str, calls: int, concurrency: int) -> float:
    """Wall time of ``calls`` bare POSTs under the same concurrency limit (no litellm, no criteria)."""
    import httpx

    semaphore = asyncio.Semaphore(concurrency)
    body = {"model": "bench-judge", "messages": [{"role": "user", "content": "x" * 2000}]}
    async with httpx.AsyncClient(timeout=60) as client:

        async def one() -> None:
            async with semaphore:
                (await client.post(f"{base_url}/chat/completions", json=body)).raise_for_status()

        start = time.perf_counter()
        await asyncio.gather(*(one() for _ in range(calls)))
        return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=200)
    parser.add_argument("--samples", type=int, default=3)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--api-style", choices=["chat", "responses"], default="chat")
    parser.add_argument("--unpriced", action="store_true", help="leave the judge model out of the cost map")
    args = parser.parse_args()

    ports: multiprocessing.Queue = multiprocessing.Queue()
    stop = multiprocessing.Event()
    server = multiprocessing.Process(target=serve, args=(args.latency, ports, stop), daemon=True)
    server.start()
    port = ports.get(timeout=30)
    t0 = time.perf_counter()
    litellm = load_litellm()
    print(f"litellm import: {time.perf_counter() - t0:.2f} s (once per process, not counted below)")
    if not args.unpriced:  # real judge models are in the cost map; an unmapped one sends litellm searching
        litellm.register_model(
            {
                "openai/bench-judge": {
                    "input_cost_per_token": 3e-7,
                    "output_cost_per_token": 2.5e-6,
                    "litellm_provider": "openai",
                    "mode": "chat",
                }
            }
        )
    config = CriterionConfig(
        judge_model="openai/bench-judge",
        api_base=f"http://127.0.0.1:{port}/v1",
        api_key="bench",
        api_style=args.api_style,
        num_samples=args.samples,
    )
    cases = make_cases(args.cases)
    asyncio.run(grade_all(config, cases[:4], args.concurrency))  # warm up litellm's lazy imports
    ideal = args.cases * args.samples * args.latency / args.concurrency
    walls, baselines = [], []
    try:
        for run in range(args.runs):
            baseline = asyncio.run(httpx_baseline(config.api_base or "", args.cases * args.samples, args.concurrency))
            baselines.append(baseline)
            wall, cpu, calls = asyncio.run(grade_all(config, cases, args.concurrency))
            walls.append(wall)
            print(
                f"run {run + 1}: {calls} calls, wall {wall:.2f} s ({wall / ideal:.2f}x ideal), "
                f"process CPU {cpu:.2f} s = {cpu / calls * 1000:.1f} ms/call; "
                f"plain httpx baseline {baseline:.2f} s ({baseline / ideal:.2f}x)"
            )
    finally:
        stop.set()
        server.join(10)
    median = statistics.median(walls)
    verdict = "within" if median <= 1.25 * ideal else "OVER"
    print(
        f"median wall {median:.2f} s vs ideal {ideal:.2f} s = {median / ideal:.2f}x ({verdict} the 1.25x target); "
        f"CPU budget per call at this concurrency: {args.latency / args.concurrency * 1000:.1f} ms; "
        f"median plain-httpx baseline {statistics.median(baselines):.2f} s"
    )


if __name__ == "__main__":
    main()
