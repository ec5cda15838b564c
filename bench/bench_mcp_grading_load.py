"""What MCP ``grade`` calls at ``/mcp`` cost the receiver's ingest: the same OTLP load with and without them.

``grade`` runs in the receiver's process (on worker threads, ``GRADING_AT_ONCE`` at a time), so a caller that
keeps it busy competes with ingest for the interpreter. Each round starts ``tracegrade serve`` on a copy of a
store that already holds traces (``--store``: bench_offline_grading.py's, e.g. /tmp/speed_offline_10000.duckdb),
sends ``--spans`` agent spans with bench/loadgen.py (OTLP/gRPC, 4 exporter processes), and measures spans/s
from the first send until every span is stored. In the rounds "with grading", ``--callers`` MCP clients call
``grade`` back to back the whole time, each with an eval set of ``--cases`` of the store's traces (one case per
trace, exported with ``cases_from_traces``) and bench_offline_grading.py's five deterministic criteria. Rounds
alternate (without, with) ``--runs`` times.

    python bench/bench_mcp_grading_load.py --store /tmp/speed_offline_10000.duckdb [--runs 3] [--spans 100000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent))  # tests.support, when run as a script from anywhere
sys.path.insert(0, str(BENCH))

from bench_ingest import _wait_until_stored, query_number  # noqa: E402
from tests.support.server_process import ServerProcess  # noqa: E402


def eval_set_document(store: Path, cases: int) -> dict[str, Any]:
    """An eval set of ``cases`` of the store's traces, one case per trace, as JSON."""
    from tracegrade.evaluation.case_export import cases_from_traces
    from tracegrade.evaluation.selection import TraceSelection
    from tracegrade.store import TraceStore

    with TraceStore(store, read_only=True) as opened:
        exported = cases_from_traces(opened, TraceSelection(limit=cases), name="load")
    return exported.model_dump(mode="json")


def grade_calls(url: str, arguments: dict[str, Any], stop: threading.Event, done: list[float]) -> None:
    """Call ``grade`` back to back until ``stop``; the seconds each call took go to ``done``."""
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async def calls() -> None:
        async with streamable_http_client(f"{url}/mcp") as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            while not stop.is_set():
                started = time.perf_counter()
                result = await session.call_tool("grade", arguments)
                if result.is_error:
                    raise SystemExit(f"grade failed: {result.content}")
                done.append(time.perf_counter() - started)

    asyncio.run(calls())


def one_round(store: Path, spans: int, callers: int, arguments: dict[str, Any]) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="tracegrade-bench-") as directory:
        copy = Path(directory) / "store.duckdb"
        shutil.copyfile(store, copy)
        server = ServerProcess(copy).start()
        before = query_number(server.http_url, "SELECT count(*) FROM spans")
        stop, done = threading.Event(), []
        graders = [
            threading.Thread(target=grade_calls, args=(server.http_url, arguments, stop, done), daemon=True)
            for _ in range(callers)
        ]
        try:
            for grader in graders:
                grader.start()
            while callers and not done:  # grading is under way before the load starts
                if not any(grader.is_alive() for grader in graders):
                    raise SystemExit("every grade caller stopped before its first call finished (see above)")
                time.sleep(0.05)
            command = [sys.executable, str(BENCH / "loadgen.py"), "--protocol", "grpc", "--target"]
            command += [server.grpc_target, "--spans", str(spans), "--batch", "512", "--concurrency", "4"]
            loadgen = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
            stored, all_stored_at = _wait_until_stored(server.http_url, before + spans, loadgen)
            summary = json.loads(loadgen.communicate(timeout=600)[0].strip().splitlines()[-1])
        finally:
            stop.set()
            for grader in graders:
                grader.join(timeout=120)
            server.kill()
    if all_stored_at is None:
        raise SystemExit(f"only {stored - before} of {spans} spans were stored")
    return {"spans_per_second": spans / (all_stored_at - summary["first_send"]), "grade_calls": len(done)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--store", type=Path, required=True, help="a store that holds traces (not changed)")
    parser.add_argument("--spans", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--callers", type=int, default=2, help="MCP clients calling grade at once")
    parser.add_argument("--cases", type=int, default=200, help="cases (traces) each grade call grades")
    args = parser.parse_args()

    import bench_offline_grading

    config = bench_offline_grading.EVAL_SET.model_dump(mode="json", exclude_defaults=True)
    arguments = {"config": config, "eval_set": eval_set_document(args.store, args.cases)}
    rates: dict[str, list[float]] = {"without grading": [], "with grading": []}
    for run in range(args.runs):
        for label, callers in (("without grading", 0), ("with grading", args.callers)):
            figures = one_round(args.store, args.spans, callers, arguments)
            rates[label].append(figures["spans_per_second"])
            print(
                f"run {run + 1}, {label}: {figures['spans_per_second']:,.0f} spans/s, "
                f"{figures['grade_calls']:.0f} grade calls",
                flush=True,
            )
    for label, values in rates.items():
        print(f"{label}: median {statistics.median(values):,.0f} spans/s (range {min(values):,.0f}–{max(values):,.0f})")


if __name__ == "__main__":
    main()
