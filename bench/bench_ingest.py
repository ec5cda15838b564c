"""End-to-end ingest benchmark: ``tracegrade serve`` in a subprocess, bench/loadgen.py exporters in others.

For each protocol (OTLP/gRPC, OTLP/HTTP protobuf) and run: start a receiver on a fresh store, send
``--spans`` realistic agent spans (batches of 512, 4 exporter processes, requests pre-serialized), and
measure spans/s from the first send until every span is stored AND queryable (``count(*)`` polled
through the server's /v1/query endpoint), the server's peak RSS (sampled every 50 ms until it has
exited: the receiver plus its trajectory-mapping child, and the receiver alone), its CPU time, and spans
lost. The decode-only and store-write-only ceilings are measured in this process on the same kind of
requests. Trajectory mapping runs behind ingestion at low priority; ``shutdown`` is how long SIGTERM
took (committing, then rebuilding pending trajectories for up to the shutdown timeout).

    python bench/bench_ingest.py                      # 3 runs x 2 protocols x 200,000 spans
    python bench/bench_ingest.py --runs 1 --spans 50000 --protocols http

Side-by-side with the shared generator (the one behind the reference figure), against a running server:

    tracegrade serve --store /tmp/cmp.duckdb &
    python ../shared/tools/otlp_loadgen.py --endpoint 127.0.0.1:4317 --protocol grpc --spans 200000 \
        --batch 512 --concurrency 4
    python ../shared/tools/otlp_loadgen.py --endpoint http://127.0.0.1:4318/v1/traces --protocol http \
        --spans 200000 --batch 512 --concurrency 4

It reports acknowledged spans/s; stored spans are ``tracegrade sql --store /tmp/cmp.duckdb
"SELECT count(*) FROM spans"`` (through the running server). bench/profile_ingest.py shows where the
receiver's time goes.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import psutil

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent))  # tests.support, when run as a script from anywhere
sys.path.insert(0, str(BENCH))

from loadgen import build_requests  # noqa: E402
from tests.support.server_process import ServerProcess  # noqa: E402

TARGET_SPANS_PER_SECOND = 20_000
TARGET_PEAK_RSS_MB = 400
POLL_SECONDS = 0.25
STALL_TIMEOUT = 60.0


class PeakRss(threading.Thread):
    """Samples the resident set size of a process and its children (the receiver's trajectory mapping
    process) every 50 ms and keeps the peak of their sum."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.process = psutil.Process(pid)
        self.peak = 0  # receiver + children, sampled together
        self.peak_receiver = 0
        self.cpu_seconds: dict[str, float] = {}  # CPU time of the receiver and of its children, at the last sample
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(0.05):
            try:
                total = self.process.memory_info().rss
                self.peak_receiver = max(self.peak_receiver, total)
                times = self.process.cpu_times()
                cpu = {"receiver": times.user + times.system, "children": 0.0}
                for child in self.process.children(recursive=True):
                    try:
                        total += child.memory_info().rss
                        times = child.cpu_times()
                        cpu["children"] += times.user + times.system
                    except psutil.Error:
                        pass  # a child ending between listing and sampling
                self.peak = max(self.peak, total)
                self.cpu_seconds = cpu
            except psutil.Error:
                return


def query_number(http_url: str, sql: str) -> int:
    """The single number ``sql`` selects, asked through the running server's query endpoint."""
    request = urllib.request.Request(
        f"{http_url}/v1/query", data=json.dumps({"sql": sql}).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        return int(json.loads(response.read())["rows"][0][0])


def _stored_count(http_url: str) -> int:
    return query_number(http_url, "SELECT count(*) FROM spans")


def one_run(
    protocol: str, spans: int, batch: int, concurrency: int, seed: int, server_args: tuple[str, ...] = ()
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="tracegrade-bench-") as directory:
        server = ServerProcess(Path(directory) / "bench.duckdb", extra_args=server_args).start()
        rss = PeakRss(server.pid)
        rss.start()
        target = server.grpc_target if protocol == "grpc" else server.http_url
        loadgen = subprocess.Popen(
            [
                sys.executable,
                str(BENCH / "loadgen.py"),
                "--protocol",
                protocol,
                "--target",
                target,
                "--spans",
                str(spans),
                "--batch",
                str(batch),
                "--concurrency",
                str(concurrency),
                "--seed",
                str(seed),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            stored, all_stored_at = _wait_until_stored(server.http_url, spans, loadgen)
            cpu_at_stored = dict(rss.cpu_seconds)
            summary = json.loads(loadgen.communicate(timeout=600)[0].strip().splitlines()[-1])
            stopping = time.monotonic()
            exit_code = server.terminate(timeout=1800)
            shutdown_seconds = time.monotonic() - stopping
        finally:
            loadgen.kill()
            server.kill()
            rss.stopped.set()
    elapsed = (all_stored_at or time.time()) - summary["first_send"]
    return {
        "protocol": protocol,
        "spans": spans,
        "stored": stored,
        "lost": spans - stored,
        "spans_per_second": stored / elapsed if all_stored_at else 0.0,
        "seconds": elapsed,
        "acked_seconds": summary["last_ack"] - summary["first_send"],
        "peak_rss_mb": rss.peak / 2**20,
        "peak_receiver_rss_mb": rss.peak_receiver / 2**20,
        "receiver_cpu_seconds": cpu_at_stored.get("receiver", 0.0),
        "mapping_cpu_seconds": cpu_at_stored.get("children", 0.0),
        "retries": summary["retries"],
        "failed_requests": summary["failed_requests"],
        "shutdown_seconds": shutdown_seconds,
        "exit_code": exit_code,
    }


def _wait_until_stored(http_url: str, spans: int, loadgen: subprocess.Popen[str]) -> tuple[int, float | None]:
    """Poll count(*) until every span is stored; give up once nothing changes for STALL_TIMEOUT after the load."""
    stored, changed_at = -1, time.monotonic()
    while True:
        count = _stored_count(http_url)
        now = time.monotonic()
        if count >= spans:
            return count, time.time()
        if count != stored:
            stored, changed_at = count, now
        elif loadgen.poll() is not None and now - changed_at > STALL_TIMEOUT:
            return count, None
        time.sleep(POLL_SECONDS)


def decode_ceiling(spans: int, batch: int) -> float:
    """Spans/s of decode_traces_proto alone, one thread, on the load generator's requests."""
    from tracegrade.ingest.decode import decode_traces_proto

    bodies = build_requests(spans, batch, seed=99)
    started = time.perf_counter()
    decoded = sum(len(decode_traces_proto(body).spans) for body in bodies)
    return decoded / (time.perf_counter() - started)


def store_write_ceiling(spans: int, batch: int) -> float:
    """Spans/s of the store writer's own work alone: the receiver's store (no WAL, under the journal),
    transactions of 4 requests, a checkpoint every DEFAULT_CHECKPOINT_BYTES, on a fresh file. The
    Arrow conversion, done on the receiver's decode threads, is done before the clock starts."""
    from tracegrade.ingest.decode import decode_traces_proto
    from tracegrade.store import TraceStore
    from tracegrade.store.prepared import prepare_write
    from tracegrade.store.writer import DEFAULT_CHECKPOINT_BYTES

    prepared = [prepare_write(decode_traces_proto(body).spans) for body in build_requests(spans, batch, seed=98)]
    with tempfile.TemporaryDirectory(prefix="tracegrade-bench-") as directory:
        store = TraceStore(Path(directory) / "write.duckdb", wal=False)
        try:
            started = time.perf_counter()
            for first in range(0, len(prepared), 4):
                store.write_batch(prepared[first : first + 4])
                if store.uncheckpointed_bytes >= DEFAULT_CHECKPOINT_BYTES:
                    store.checkpoint()
            store.checkpoint()
            seconds = time.perf_counter() - started
        finally:
            store.close()
    return spans / seconds


def _summary(values: list[float]) -> str:
    return f"median {statistics.median(values):,.0f}  min {min(values):,.0f}  max {max(values):,.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spans", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--protocols", nargs="+", default=["grpc", "http"], choices=["grpc", "http"])
    parser.add_argument("--json", type=Path, help="also write every run's figures to this file")
    parser.add_argument(
        "--server-arg", action="append", default=[], help="extra `tracegrade serve` argument (repeatable)"
    )
    args = parser.parse_args()

    print(f"machine: {psutil.cpu_count()} CPUs, load average {psutil.getloadavg()[0]:.2f}")
    ceiling_spans = min(args.spans, 50_000)
    print(f"decode-only ceiling      : {decode_ceiling(ceiling_spans, args.batch):,.0f} spans/s (1 thread)")
    print(f"store-write-only ceiling : {store_write_ceiling(ceiling_spans, args.batch):,.0f} spans/s")
    runs: list[dict[str, Any]] = []
    for protocol in args.protocols:
        for run in range(args.runs):
            result = one_run(
                protocol, args.spans, args.batch, args.concurrency, seed=run + 1, server_args=tuple(args.server_arg)
            )
            runs.append(result)
            print(
                f"{protocol:4} run {run + 1}: {result['spans_per_second']:>9,.0f} spans/s stored+queryable "
                f"({result['seconds']:.1f} s; acked in {result['acked_seconds']:.1f} s), peak RSS "
                f"{result['peak_rss_mb']:.0f} MB (receiver alone {result['peak_receiver_rss_mb']:.0f}), "
                f"CPU {result['receiver_cpu_seconds']:.1f} s receiver + "
                f"{result['mapping_cpu_seconds']:.1f} s mapping, lost {result['lost']}, retries {result['retries']}, "
                f"shutdown {result['shutdown_seconds']:.1f} s (exit {result['exit_code']})"
            )
    for protocol in args.protocols:
        mine = [r for r in runs if r["protocol"] == protocol]
        rates = [r["spans_per_second"] for r in mine]
        print(f"{protocol:4} spans/s : {_summary(rates)}   (target >= {TARGET_SPANS_PER_SECOND:,})")
        print(
            f"{protocol:4} peak RSS: {_summary([r['peak_rss_mb'] for r in mine])} MB   (target < {TARGET_PEAK_RSS_MB})"
        )
        print(f"{protocol:4} lost    : {sum(r['lost'] for r in mine)} spans over {len(mine)} runs (target 0)")
    if args.json:
        args.json.write_text(json.dumps(runs, indent=2))


if __name__ == "__main__":
    main()
