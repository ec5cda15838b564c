"""Lake ingest benchmark: one receiver into a DuckDB file vs one into a lake vs two into one lake.

Each configuration gets the same load, ``--spans`` agent spans from /work/shared/tools/otlp_loadgen.py
(OTLP/gRPC, batches of 512, 4 requests in flight in all; with two receivers each gets half from its own
generator), and the configurations run interleaved (file, lake, lake x2, file, …). Measured per run:

- spans/s stored and queryable: from the first send until ``count(*)`` of ``spans`` (as queried: the
  deduplicating view on a lake) reaches ``--spans``, asked by a reader in this process (a read-only
  LakeStore, as a third node would; through the receiver's query endpoint for the file);
- CPU-seconds per 100,000 spans per receiver (the receiver and its children, user + system, when every
  span is stored);
- visibility under saturation: a marker span is exported every 0.25 s over OTLP/HTTP during the load (to
  the receivers in turn) and the reader polls for it; p50/p95 of the time from its acknowledgement until
  a query sees it (the receiver's gathering of a commit included), mostly queueing at this load;
- lake data files before and after one ``maintain`` pass (``--keep 0s``);
- lost spans and spans visible twice (both must be 0);
- where the machine's CPU went from the first send until every span was stored: the cores busy (from
  /proc/stat, every process on the machine) and the CPU-seconds of the receivers (with their children),
  the load generators, PostgreSQL's processes (the whole cluster's) and this process (the reader and
  the samplers; ``cpu_reader_statements`` in the JSON is its queries alone); with ``--thread-cpu``, the
  receivers' CPU by thread (the writer, the rebuilder, the decoders: bench/thread_names names their
  threads for the OS).

Then, as issue 22 defines visibility (commit-to-query at a rate the receivers carry), each configuration
runs again for ``--sustained-seconds`` at ``--sustained-fraction`` (default 0.6) of the spans/s it stored
in the saturation runs above (or at ``--sustained-rate``), from bench/paced_load.py (OTLP/gRPC on a fixed
schedule, split evenly over the receivers), with the same markers: their p50/p95 is the visibility
figure. This process is the third one that queries (a read-only LakeStore, as another node would).

PostgreSQL: $TRACEGRADE_TEST_PG_DSN (a new database per run), else a private cluster for the benchmark.

    python bench/bench_lake.py                       # 3 rounds x 3 configurations x (200,000 spans + 30 s paced)
    python bench/bench_lake.py --rounds 1 --spans 50000 --configs lake lake2
    python bench/bench_lake.py --rounds 0 --sustained-rate 800 --configs lake lake2   # visibility only
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from datetime import timedelta
from pathlib import Path
from typing import Any

import psutil

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent))  # tests.support, when run as a script from anywhere
sys.path.insert(0, str(BENCH))

from bench_ingest import PeakRss  # noqa: E402
from tests.support.lake_serve import LakeServerProcess  # noqa: E402
from tests.support.pg_cluster import PgServer, PrivateCluster  # noqa: E402
from tests.support.server_otlp import post  # noqa: E402
from tests.support.server_process import ServerProcess  # noqa: E402
from tests.support.server_requests import span_json, traces_proto  # noqa: E402

LOADGEN = Path(os.environ.get("TRACEGRADE_LOADGEN", BENCH.parents[1] / "shared" / "tools" / "otlp_loadgen.py"))
if not LOADGEN.exists():
    LOADGEN = Path("/work/shared/tools/otlp_loadgen.py")
MARKER_SECONDS = 0.25
MARKER_PREFIX = "feedfacecafe"  # marker trace ids start so (random loadgen ids do not, but by a 2^-48 chance)
POLL_SECONDS = 0.05
STALL_TIMEOUT = 90.0
TARGETS = "lake CPU/span <= 1.15x file; two lake receivers >= 1.25x one; visibility p95 < 2 s; 0 lost, 0 doubled"


class Reader:
    """Counts spans and finds markers: a read-only LakeStore, or the file receiver's query endpoint.

    Each poll is one statement (on a lake every statement pays its catalog round trips, and the reader
    shares the machine with the receivers): the count of every stored copy (``raw.spans`` on a lake, which
    only grows) and the markers the query view shows. The deduplicating view's count, a sort of every
    stored key, runs only once that raw count says every span may be there.
    """

    def __init__(self, location: str | None, http_url: str | None) -> None:
        self.lake = None
        self.http_url = http_url
        self.copies = "spans"
        self.cpu_seconds = 0.0  # of the statements (their thread's CPU time)
        if location is not None:
            from tracegrade.store.lake import LakeStore
            from tracegrade.store.lake_schema import RAW_SCHEMA

            self.lake = LakeStore(location, read_only=True, threads=1)  # queries on the calling thread: timed
            self.copies = f"{RAW_SCHEMA}.spans"

    def row(self, sql: str) -> list[Any]:
        started = time.thread_time()
        try:
            if self.lake is not None:
                return list(self.lake.query(sql).rows[0])
            from tests.support.server_requests import query

            return list(query(self.http_url or "", sql)[0])
        finally:
            self.cpu_seconds += time.thread_time() - started

    def number(self, sql: str) -> int:
        return int(self.row(sql)[0])

    def poll(self, markers: list[str]) -> tuple[int, list[str]]:
        """How many span copies are stored (markers included), and which of ``markers`` a query sees."""
        found = "NULL"
        if markers:
            listed = ", ".join(f"'{trace_id}'" for trace_id in markers)
            found = f"(SELECT list(DISTINCT trace_id) FROM spans WHERE trace_id IN ({listed}))"
        copies, seen = self.row(f"SELECT (SELECT count(*) FROM {self.copies}), {found}")
        return int(copies), list(seen or [])

    def close(self) -> None:
        if self.lake is not None:
            self.lake.close()


class CpuWatch(threading.Thread):
    """Samples the machine's CPU (/proc/stat) and the CPU time of the benchmark's processes every 0.2 s;
    ``stop`` gives the figures from the first sample after the load generators began sending (they build
    their requests first) to the last."""

    def __init__(self, groups: dict[str, list[int]], *, threads: bool) -> None:
        super().__init__(daemon=True)
        self.threads = threads  # sample the receivers' threads too (named by bench/thread_names)
        self.processes = {role: [psutil.Process(pid) for pid in pids] for role, pids in groups.items()}
        self.last: dict[tuple[str, int], float] = {}  # CPU seconds at the last sample (a process that ended keeps it)
        self.first: dict[tuple[str, int], float] = {}
        self.stopped = threading.Event()
        self.samples: list[tuple[float, tuple[int, int, int], dict[tuple[str, int], float]]] = []

    def _sample(self) -> None:
        groups = dict(self.processes)
        groups["postgres"] = [p for p in psutil.process_iter(["name"]) if (p.info["name"] or "").startswith("postg")]
        for role, processes in groups.items():
            for process in processes:
                try:
                    times = process.cpu_times()
                    seconds = times.user + times.system
                    if role in ("receivers", "loadgens"):  # the reader's children are the other roles
                        seconds += sum(c.cpu_times().user + c.cpu_times().system for c in process.children(True))
                except psutil.Error:
                    continue
                self.first.setdefault((role, process.pid), seconds)
                self.last[(role, process.pid)] = seconds
                if role == "receivers" and self.threads:
                    self._sample_threads(process.pid)
        self.samples.append((time.time(), _machine_times(), dict(self.last)))

    def _sample_threads(self, pid: int) -> None:
        """CPU seconds of each thread of a receiver, summed by thread name (as the OS knows it)."""
        for task in Path(f"/proc/{pid}/task").glob("*"):
            try:
                name = (task / "comm").read_text().strip()
                fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            seconds = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
            self.first.setdefault((f"thread {name}", int(task.name)), seconds)
            self.last[(f"thread {name}", int(task.name))] = seconds

    def run(self) -> None:
        self._sample()
        while not self.stopped.wait(0.2):
            self._sample()

    def stop(self, since: float) -> dict[str, float]:
        """Stop sampling; cores busy on average, and CPU-seconds per role, from the first sample at or after
        ``since`` (a ``time.time()``) to the last."""
        self.stopped.set()
        self.join()
        start = next((sample for sample in self.samples if sample[0] >= since), self.samples[0])
        end = self.samples[-1]
        busy = sum(end[1][:2]) - sum(start[1][:2])
        total = sum(end[1]) - sum(start[1])
        figures = {"cores": float(psutil.cpu_count() or 1), "seconds": end[0] - start[0]}
        figures["cores_busy"] = figures["cores"] * busy / total if total else 0.0
        for (role, pid), seconds in end[2].items():
            before = start[2].get((role, pid), self.first[(role, pid)])
            figures[f"cpu_{role}"] = figures.get(f"cpu_{role}", 0.0) + seconds - before
        return figures


def _machine_times() -> tuple[int, int, int]:
    """Jiffies of the whole machine: busy outside the kernel (user + nice + irq + softirq + steal: steal is
    CPU the hypervisor gave elsewhere, as unavailable as busy), in the kernel (system), idle (idle + iowait)."""
    fields = [int(value) for value in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    user, nice, system, idle, iowait, irq, softirq, steal = fields
    return user + nice + irq + softirq + steal, system, idle + iowait


class Markers(threading.Thread):
    """Exports one marker span every MARKER_SECONDS to the receivers in turn; the reader's thread records
    when each becomes visible."""

    def __init__(self, urls: list[str], reader: Reader) -> None:
        super().__init__(daemon=True)
        self.urls = urls
        self.reader = reader
        self.acked: dict[str, float] = {}
        self.seen: dict[str, float] = {}
        self.stopped = threading.Event()
        self._lock = threading.Lock()

    def run(self) -> None:
        sent = 0
        while not self.stopped.wait(MARKER_SECONDS):
            trace_id = f"{MARKER_PREFIX}{os.getpid():08x}{sent:012x}"
            reply = post(f"{self.urls[sent % len(self.urls)]}/v1/traces", traces_proto([span_json(trace_id, 0)]))
            if reply.status == 200:
                with self._lock:
                    self.acked[trace_id] = time.monotonic()
            sent += 1

    def poll(self) -> int:
        """Look for the acknowledged markers not seen yet (on the reader's thread); how many span copies
        are stored."""
        with self._lock:
            waiting = [trace_id for trace_id in self.acked if trace_id not in self.seen]
        copies, found = self.reader.poll(waiting)
        now = time.monotonic()
        for trace_id in found:
            self.seen.setdefault(trace_id, now)
        return copies

    def delays(self) -> list[float]:
        return sorted(self.seen[t] - self.acked[t] for t in self.seen)


def _loadgen(endpoint: str, spans: int, concurrency: int, seed: int) -> subprocess.Popen[str]:
    command = [sys.executable, str(LOADGEN), "--endpoint", endpoint, "--protocol", "grpc", "--spans", str(spans)]
    command += ["--batch", "512", "--concurrency", str(concurrency), "--seed", str(seed), "--json"]
    return subprocess.Popen(command, stdout=subprocess.PIPE, text=True)


def _paced(endpoint: str, rate: float, seconds: float, seed: int) -> subprocess.Popen[str]:
    command = [sys.executable, str(BENCH / "paced_load.py"), "--endpoint", endpoint, "--rate", f"{rate:.1f}"]
    command += ["--seconds", str(seconds), "--seed", str(seed)]
    environment = os.environ | {"TRACEGRADE_LOADGEN": str(LOADGEN)}
    return subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=environment)


def one_run(
    config: str,
    spans: int,
    seed: int,
    pg: PgServer | None,
    paced: tuple[float, float] | None = None,
    thread_cpu: bool = False,
) -> dict[str, Any]:
    """One configuration under load: ``spans`` as fast as it takes them, or with ``paced`` (spans/s,
    seconds) at that rate; the figures of the module docstring."""
    receivers: list[ServerProcess] = []
    with tempfile.TemporaryDirectory(prefix="tracegrade-bench-lake-") as directory:
        work = Path(directory)
        location = None
        if config == "file":
            receivers.append(ServerProcess(work / "bench.duckdb", env=_thread_names(thread_cpu)).start())
        else:
            assert pg is not None
            location = f"ducklake:postgres:{pg.new_database()}"
            for n in range(2 if config == "lake2" else 1):
                journal = work / f"r{n}.journal"
                receivers.append(
                    LakeServerProcess(location, work / "data", journal, env=_thread_names(thread_cpu)).start()
                )
        samplers = [PeakRss(receiver.pid) for receiver in receivers]
        for sampler in samplers:
            sampler.start()
        reader = Reader(location, receivers[0].http_url if location is None else None)
        markers = Markers([r.http_url for r in receivers], reader)
        if paced is None:
            share, concurrency = spans // len(receivers), 4 // len(receivers)
            loads = [_loadgen(r.grpc_target, share, concurrency, seed * 10 + n) for n, r in enumerate(receivers)]
        else:
            rate = round(paced[0] / len(receivers), 1)  # as paced_load.py is told it
            share = max(128, int(rate * paced[1]))
            spans = share * len(receivers)
            loads = [_paced(r.grpc_target, rate, paced[1], seed * 10 + n) for n, r in enumerate(receivers)]
        watch = CpuWatch(
            {
                "receivers": [r.pid for r in receivers],
                "loadgens": [load.pid for load in loads],
                "reader": [os.getpid()],
            },
            threads=thread_cpu,
        )
        watch.start()
        markers.start()
        try:
            stored, stored_at, summaries = _wait_until_stored(reader, markers, spans, loads)
            machine = watch.stop(min(summary["send_start_unix"] for summary in summaries))
            machine["cpu_reader_statements"] = reader.cpu_seconds
            writers = [_store_stats(receiver.http_url) for receiver in receivers]
            cpu = [sum(sampler.cpu_seconds.values()) for sampler in samplers]
            markers.stopped.set()
            markers.join()
            for _ in range(40):  # the last markers
                markers.poll()
                time.sleep(POLL_SECONDS)
            expected = sum(summary["spans_ok"] for summary in summaries) + len(markers.acked)
            visible = reader.number("SELECT count(*) FROM spans")
            distinct = reader.number("SELECT count(DISTINCT (trace_id, span_id)) FROM spans")
        finally:
            markers.stopped.set()
            reader.close()
            for load in loads:
                load.kill()
        exit_codes = [receiver.terminate(timeout=600) for receiver in receivers]
        for receiver in receivers:
            receiver.kill()
        for sampler in samplers:
            sampler.stopped.set()
        files = _maintain(location, work / "data") if location is not None else (None, None)
    started = min(summary["send_start_unix"] for summary in summaries)
    elapsed = (stored_at or time.time()) - started
    delays = markers.delays()
    return {
        "config": config,
        "phase": "saturation" if paced is None else "sustained",
        "rate_requested": None if paced is None else paced[0],
        "behind_seconds": max((summary.get("behind_seconds", 0.0) for summary in summaries), default=0.0),
        "receivers": len(receivers),
        "spans": spans,
        "stored": stored,
        "lost": expected - visible,
        "visible_twice": visible - distinct,
        "spans_per_second": stored / elapsed if stored_at else 0.0,
        "cpu_per_100k_per_receiver": [c / share * 100_000 for c in cpu],
        "visibility_p50": delays[len(delays) // 2] if delays else None,
        "visibility_p95": delays[min(len(delays) - 1, int(len(delays) * 0.95))] if delays else None,
        "markers": len(delays),
        "files_before": files[0],
        "files_after": files[1],
        "retries": sum(summary["retries"] for summary in summaries),
        "spans_refused": sum(summary["spans_failed"] for summary in summaries),
        "exit_codes": exit_codes,
        "machine": machine,
        "writers": writers,
    }


def _thread_names(wanted: bool) -> dict[str, str] | None:
    """The receivers' environment for ``--thread-cpu``: bench/thread_names first on their PYTHONPATH."""
    if not wanted:
        return None
    return {"PYTHONPATH": os.pathsep.join(filter(None, [str(BENCH / "thread_names"), os.environ.get("PYTHONPATH")]))}


def _store_stats(http_url: str) -> dict[str, float]:
    """A receiver's store-writer figures from its /metrics (commits, traces built, ...), by name."""
    with urllib.request.urlopen(f"{http_url}/metrics", timeout=60) as response:
        lines = response.read().decode().splitlines()
    prefix = "tracegrade_store_"
    pairs = (line.split() for line in lines if line.startswith(prefix))
    return {name.removeprefix(prefix): float(value) for name, value in pairs}


def _wait_until_stored(
    reader: Reader, markers: Markers, spans: int, loads: list[subprocess.Popen[str]]
) -> tuple[int, float | None, list[dict[str, Any]]]:
    """Poll until every span the load generators had acknowledged is stored and queryable (looking for
    markers meanwhile); the count, when it got there (None: it never did), and the generators' summaries."""
    target, summaries = spans, []
    stored, changed_at = -1, time.monotonic()
    while True:
        copies = markers.poll()
        count = copies - len(markers.seen)  # an upper bound of the loadgens' spans a query sees
        if count >= target:
            count = reader.number(f"SELECT count(*) FROM spans WHERE NOT starts_with(trace_id, '{MARKER_PREFIX}')")
        now = time.monotonic()
        if not summaries and all(load.poll() is not None for load in loads):
            summaries = [json.loads(load.communicate()[0].strip().splitlines()[-1]) for load in loads]
            target = sum(summary["spans_ok"] for summary in summaries)
        if count >= target:
            if not summaries:
                summaries = [json.loads(load.communicate(timeout=600)[0].strip().splitlines()[-1]) for load in loads]
            return count, time.time(), summaries
        if count != stored:
            stored, changed_at = count, now
        elif summaries and now - changed_at > STALL_TIMEOUT:
            return count, None, summaries
        time.sleep(POLL_SECONDS)


def _maintain(location: str, data: Path) -> tuple[int, int]:
    from tracegrade.store.lake import LakeStore

    with LakeStore(location, data_path=data) as store:
        done = store.maintain(keep=timedelta(0))
    return done.files_before, done.files_after


def _median_range(values: list[float], fmt: str) -> str:
    if not values:
        return "–"
    return f"{statistics.median(values):{fmt}} ({min(values):{fmt}}–{max(values):{fmt}})"


def _table(runs: list[dict[str, Any]], configs: list[str]) -> None:
    """One row per configuration: medians over the rounds (range in brackets)."""
    print(f"machine: {psutil.cpu_count()} CPUs; targets: {TARGETS}")
    print(
        "| config | saturation spans/s | CPU-s/100k spans/receiver | visibility p95 at saturation (s) "
        "| sustained rate (spans/s) | visibility p50 (s) | visibility p95 (s) | lost | twice | load average |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for config in configs:
        full = [r for r in runs if r["config"] == config and r["phase"] == "saturation"]
        paced = [r for r in runs if r["config"] == config and r["phase"] == "sustained"]
        mine = full + paced
        cells = [
            config,
            _median_range([r["spans_per_second"] for r in full], ",.0f"),
            _median_range([c for r in full for c in r["cpu_per_100k_per_receiver"]], ".1f"),
            _median_range([r["visibility_p95"] for r in full if r["visibility_p95"] is not None], ".2f"),
            _median_range([r["rate_requested"] for r in paced], ",.0f"),
            _median_range([r["visibility_p50"] for r in paced if r["visibility_p50"] is not None], ".2f"),
            _median_range([r["visibility_p95"] for r in paced if r["visibility_p95"] is not None], ".2f"),
            str(sum(r["lost"] for r in mine)),
            str(sum(r["visible_twice"] for r in mine)),
            _median_range([r["load_average"] for r in mine], ".1f"),
        ]
        print("| " + " | ".join(cells) + " |")
    print()
    print(
        "| config | cores busy, whole machine (saturation) | receivers | load generators | PostgreSQL | bench process "
        "(CPU-s per 100k spans from the first request sent until all are stored) |"
    )
    print("|---|---|---|---|---|---|")
    for config in configs:
        full = [r for r in runs if r["config"] == config and r["phase"] == "saturation" and "machine" in r]
        if not full:
            continue
        cells = [config, _median_range([r["machine"]["cores_busy"] for r in full], ".2f")]
        for role in ("receivers", "loadgens", "postgres", "reader"):
            per_100k = [r["machine"].get(f"cpu_{role}", 0.0) / r["spans"] * 100_000 for r in full]
            cells.append(_median_range(per_100k, ".1f"))
        print("| " + " | ".join(cells) + " |")
    threads = sorted({key for r in runs for key in r.get("machine", {}) if key.startswith("cpu_thread ")})
    per_thread: dict[tuple[str, str], list[float]] = {}
    for r in runs:
        if r["phase"] != "saturation" or "machine" not in r:
            continue
        for name in {_thread_kind(key) for key in threads}:
            seconds = sum(v for k, v in r["machine"].items() if k in threads and _thread_kind(k) == name)
            per_thread.setdefault((r["config"], name), []).append(seconds / r["spans"] * 100_000)
    names = sorted({name for (_, name), values in per_thread.items() if max(values) >= 0.05})  # the busy ones
    if names:
        print()
        print("| config | " + " | ".join(names) + " (receivers' CPU-s per 100k spans by thread) |")
        print("|---|" + "---|" * len(names))
        for config in configs:
            cells = [_median_range(per_thread.get((config, name), []), ".2f") for name in names]
            print("| " + " | ".join([config, *cells]) + " |")
    behind = max((r["behind_seconds"] for r in runs if r["phase"] == "sustained"), default=0.0)
    if behind > 1.0:
        print(f"note: a paced sender fell up to {behind:.1f} s behind its schedule (the rate was above capacity)")


def _thread_kind(key: str) -> str:
    """A thread's name without its number (decode_0 and decode_1 are both decode)."""
    return key.removeprefix("cpu_thread ").rstrip("0123456789").rstrip("_") or "?"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spans", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--configs", nargs="+", default=["file", "lake", "lake2"], choices=["file", "lake", "lake2"])
    parser.add_argument("--sustained-fraction", type=float, default=0.6, help="of each saturation spans/s")
    parser.add_argument("--sustained-rate", type=float, help="spans/s of the sustained runs (all receivers)")
    parser.add_argument("--sustained-seconds", type=float, default=30.0)
    parser.add_argument(
        "--sustained-rounds", type=int, help="sustained runs per configuration (default --rounds; 0: none)"
    )
    parser.add_argument("--thread-cpu", action="store_true", help="report the receivers' CPU by thread")
    parser.add_argument("--json", type=Path, help="also write every run's figures to this file")
    args = parser.parse_args()
    if args.rounds == 0 and args.sustained_rate is None:
        parser.error("--rounds 0 measures no capacity: give --sustained-rate")

    dsn = os.environ.get("TRACEGRADE_TEST_PG_DSN")
    cluster = None if dsn or args.configs == ["file"] else PrivateCluster()
    pg = PgServer(dsn) if dsn else (cluster.start() if cluster is not None else None)
    runs: list[dict[str, Any]] = []

    def run(config: str, seed: int, paced: tuple[float, float] | None = None) -> None:
        load = os.getloadavg()[0]
        result = one_run(config, args.spans, seed, pg, paced, args.thread_cpu) | {"load_average": load}
        runs.append(result)
        print(json.dumps(result), flush=True)

    try:
        for round_ in range(args.rounds):
            for config in args.configs:
                run(config, round_ + 1)
        rates = {
            config: args.sustained_rate
            or args.sustained_fraction * statistics.median(r["spans_per_second"] for r in runs if r["config"] == config)
            for config in args.configs
        }
        sustained_rounds = args.rounds or 1 if args.sustained_rounds is None else args.sustained_rounds
        for round_ in range(sustained_rounds):
            for config in args.configs:
                run(config, 100 + round_, (rates[config], args.sustained_seconds))
    finally:
        if cluster is not None:
            cluster.remove()
    _table(runs, args.configs)
    if args.json:
        args.json.write_text(json.dumps(runs, indent=2))


if __name__ == "__main__":
    main()
