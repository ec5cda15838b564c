"""Offline grading benchmark: grade 100,000 stored agent traces end to end from a DuckDB store.

The store holds realistic agent traces (bench/loadgen.py's: an ``invoke_agent`` root, ``chat`` spans with
~2 KB GenAI input messages and token usage, ``execute_tool`` spans with arguments and results), written
through ``TraceStore.write`` in big batches with their trajectories rebuilt by the real mapper. Building
it takes minutes, so it is cached (``--store``, default under /tmp) and reused while it holds the
requested number of traces.

Two grading paths are timed from the opened store to the finished ``EvalReport`` (median of ``--runs``,
wall-clock; the CPU seconds of each run are printed too, since on a shared machine they say more, and so are the
garbage collections of each run and the time they took):

* **reference-free** (production traffic): every trace, ``contains_keywords`` graded, ``trajectory``
  reported as skipped — ``TraceGrader.grade_traces``;
* **eval set**: one case per trace (exported with ``cases_from_traces``, so each case is matched by its
  ``metadata.selector.trace_id``) graded with tool_name_match, trajectory (arguments checked), node_order,
  rouge_match and contains_keywords — ``TraceGrader.grade_eval_set``.

    python bench/bench_offline_grading.py                    # 100,000 traces, 3 runs
    python bench/bench_offline_grading.py --traces 10000 --runs 1 --profile
    python bench/bench_offline_grading.py --traces 10000 --runs 1 --paths eval_set --plain-collection  # GC as CPython's
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import pstats
import statistics
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from loadgen import TraceFactory  # noqa: E402
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2  # noqa: E402
from opentelemetry.proto.resource.v1 import resource_pb2  # noqa: E402
from opentelemetry.proto.trace.v1 import trace_pb2  # noqa: E402

from tracegrade.evaluation.case_export import cases_from_traces  # noqa: E402
from tracegrade.evaluation.offline import TraceGrader  # noqa: E402
from tracegrade.evaluation.selection import TraceSelection  # noqa: E402
from tracegrade.ingest.decode import decode_traces_message  # noqa: E402
from tracegrade.models.config import CriteriaConfig, CriterionConfig, EvalConfig  # noqa: E402
from tracegrade.models.results import EvalReport  # noqa: E402
from tracegrade.store import TraceStore  # noqa: E402

TARGET_TRACES_PER_SECOND = 5_000  # issue 26 §4
SPANS_PER_TRACE = 7  # root + 4 chat + 2 tool spans
WRITE_CHUNK_TRACES = 5_000
DEFAULT_STORE = Path(tempfile.gettempdir()) / "tracegrade_bench_offline_grading.duckdb"

REFERENCE_FREE = EvalConfig(
    criteria=CriteriaConfig(
        trajectory=CriterionConfig.trajectory(),  # needs a case: reported as skipped
        contains_keywords=CriterionConfig.contains_keywords(["refund", "order"], threshold=0.5),
    )
)
EVAL_SET = EvalConfig(
    criteria=CriteriaConfig(
        tool_name_match=CriterionConfig.tool_name_match(),
        trajectory=CriterionConfig.trajectory(check_args=True),
        node_order=CriterionConfig.node_order(),
        rouge_match=CriterionConfig.rouge_match(),
        contains_keywords=CriterionConfig.contains_keywords(["refund", "order"], threshold=0.5),
    )
)


def _stored_traces(path: Path) -> int:
    try:
        with TraceStore(path, read_only=True) as store:
            return int(store.query("SELECT count(*) FROM traces").rows[0][0])
    except Exception:
        return -1


def build_store(path: Path, traces: int, seed: int = 7) -> None:
    """Write ``traces`` loadgen traces in chunks and rebuild their trajectories (into a temp file, then move)."""
    partial = path.with_name(path.name + ".building")
    for stale in (partial, Path(f"{partial}.wal")):
        stale.unlink(missing_ok=True)
    with TraceStore(partial) as store:
        fill_store(store, traces, seed)
    partial.replace(path)


def fill_store(store: TraceStore, traces: int, seed: int = 7) -> None:
    """Write ``traces`` loadgen traces into ``store`` (a file or a lake) in chunks, with their trajectories."""
    factory = TraceFactory(seed)
    resource = resource_pb2.Resource(attributes=[])
    started = time.perf_counter()
    done = 0
    while done < traces:
        count = min(WRITE_CHUNK_TRACES, traces - done)
        spans = [span for _ in range(count) for span in factory.trace(SPANS_PER_TRACE)]
        request = trace_service_pb2.ExportTraceServiceRequest(
            resource_spans=[trace_pb2.ResourceSpans(resource=resource, scope_spans=[trace_pb2.ScopeSpans(spans=spans)])]
        )
        decoded = decode_traces_message(request)
        for span in decoded.spans:
            span.resource = {"service.name": "bench-agent"}
        written = store.write(decoded.spans)
        store.rebuild_trajectories(sorted(written.trace_ids))
        done += count
        rate = done / (time.perf_counter() - started)
        print(f"  built {done:,}/{traces:,} traces ({rate:,.0f} traces/s)", file=sys.stderr, flush=True)


class CollectorTimes:
    """Collections per generation and the seconds they took, while registered in ``gc.callbacks``."""

    def __init__(self) -> None:
        self.count = [0, 0, 0]
        self.seconds = [0.0, 0.0, 0.0]
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.count[info["generation"]] += 1
            self.seconds[info["generation"]] += time.perf_counter() - self._started

    def __str__(self) -> str:
        return ", ".join(f"generation {g}: {n:,} in {s:.2f}s" for g, (n, s) in enumerate(zip(self.count, self.seconds)))


def _timed(label: str, grade, runs: int, traces: int, profile: bool) -> float:
    rates = []
    for run in range(runs):
        profiler = cProfile.Profile() if profile and run == 0 else None
        collector = CollectorTimes()
        gc.callbacks.append(collector)
        started, cpu_started = time.perf_counter(), time.process_time()
        if profiler:
            profiler.enable()
        report: EvalReport = grade()
        if profiler:
            profiler.disable()
        gc.callbacks.remove(collector)
        seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - cpu_started
        assert len(report.results) == traces, f"graded {len(report.results)} of {traces}"
        rates.append(traces / seconds)
        s = report.summary
        print(
            f"  {label} run {run + 1}: {seconds:.2f}s = {rates[-1]:,.0f} traces/s wall-clock; "
            f"{cpu_seconds:.2f}s CPU = {traces / cpu_seconds:,.0f} traces per CPU-second "
            f"(passed {s.passed_cases:,}, failed {s.failed_cases:,}, errors {s.error_cases:,})",
            flush=True,
        )
        print(f"    garbage collections: {collector}", flush=True)
        if profiler:
            pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)
    return statistics.median(rates)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traces", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--store", type=Path, default=None, help=f"cached store (default {DEFAULT_STORE})")
    parser.add_argument("--profile", action="store_true", help="cProfile the first run of each path")
    parser.add_argument("--paths", default="reference_free,eval_set", help="which grading paths to time")
    parser.add_argument(
        "--plain-collection", action="store_true", help="collect garbage as CPython does (no collection_pace)"
    )
    args = parser.parse_args(argv)
    if args.plain_collection:
        from tracegrade.evaluation import collection_pace

        collection_pace.FULL_COLLECTION_EVERY = 0
        collection_pace.SET_ASIDE_LONG_LIVED = False
    path = args.store or DEFAULT_STORE.with_name(f"{DEFAULT_STORE.stem}_{args.traces}.duckdb")
    if _stored_traces(path) != args.traces:
        print(f"building {path} with {args.traces:,} traces (cached for later runs)…", file=sys.stderr)
        build_store(path, args.traces)
    print(f"store {path}: {args.traces:,} traces, {SPANS_PER_TRACE} spans each")

    results: dict[str, float] = {}
    with TraceStore(path, read_only=True) as store:
        paths = args.paths.split(",")
        if "reference_free" in paths:
            grader = TraceGrader(store, REFERENCE_FREE)
            results["reference-free"] = _timed(
                "reference-free",
                lambda: grader.grade_traces_sync(TraceSelection()),
                args.runs,
                args.traces,
                args.profile,
            )
        if "eval_set" in paths:
            eval_set = cases_from_traces(store, TraceSelection(), name="bench")
            grader = TraceGrader(store, EVAL_SET)
            results["eval set"] = _timed(
                "eval set", lambda: grader.grade_eval_set_sync(eval_set), args.runs, args.traces, args.profile
            )
    print()
    for label, rate in results.items():
        verdict = "meets" if rate >= TARGET_TRACES_PER_SECOND else "BELOW"
        print(f"{label:>15}: median {rate:,.0f} traces/s ({verdict} the {TARGET_TRACES_PER_SECOND:,}/s target)")


if __name__ == "__main__":
    main()
