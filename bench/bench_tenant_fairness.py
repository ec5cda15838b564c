"""Benchmark: how long one tenant's exports take while another tenant floods the same receiver.

A real ``tracegrade serve --tokens`` with two tenants and ``--max-inflight-requests 8``. Tenant ``flood`` sends
with ``bench/loadgen.py`` (``--flood-exporters`` processes over OTLP/gRPC, each retrying refusals with the
server's delay); once its spans arrive, tenant ``probe`` sends ``--probe-requests`` requests of 64 agent spans
one after another over OTLP/gRPC, retrying refusals the same way, and times each from its first attempt to its
acknowledgement. Prints one JSON line: the probe's median and 95th-percentile seconds per request, its
refusals, how long it took, and the spans the receiver decoded per second meanwhile (the flood's, mostly).

``--src`` runs the receiver from another tree's ``src`` (``PYTHONPATH``), to compare two versions side by side:

    python bench/bench_tenant_fairness.py                       # this tree
    python bench/bench_tenant_fairness.py --src /tmp/old/src    # another tree
    python bench/bench_tenant_fairness.py --per-tenant 8        # the turns in the queue alone, no share
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from loadgen import RetryableRefusal, build_requests, grpc_sender  # noqa: E402

FLOOD_TOKEN = "flood-tenant-token-0123456789"
PROBE_TOKEN = "probe-tenant-token-0123456789"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _metric(http_url: str, name: str) -> float:
    with urllib.request.urlopen(f"{http_url}/metrics", timeout=10) as response:
        for line in response.read().decode().splitlines():
            if line.startswith(name + " ") or line.startswith(name + "{"):
                return float(line.rsplit(" ", 1)[1])
    return 0.0


def _wait(predicate: object, what: str, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if predicate():  # type: ignore[operator]
                return
        except OSError:
            pass
        time.sleep(0.2)
    sys.exit(f"timed out waiting for {what}")


def run(src: str | None, flood_exporters: int, probe_requests: int, per_tenant: int | None) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as workdir:
        tokens = Path(workdir, "tokens.yaml")
        tokens.write_text(json.dumps({"tenants": {"flood": [FLOOD_TOKEN], "probe": [PROBE_TOKEN]}}))
        grpc_port, http_port = _free_port(), _free_port()
        env = dict(os.environ)
        if src:
            env["PYTHONPATH"] = src
        server = subprocess.Popen(
            [sys.executable, "-m", "tracegrade.cli.main", "serve", "--store", f"{workdir}/store.duckdb",
             "--tokens", str(tokens), "--grpc-port", str(grpc_port), "--http-port", str(http_port),
             "--max-inflight-requests", "8", *(["--max-inflight-per-tenant", str(per_tenant)] if per_tenant else [])],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        http_url, target = f"http://127.0.0.1:{http_port}", f"127.0.0.1:{grpc_port}"
        flood = None
        try:
            _wait(lambda: urllib.request.urlopen(f"{http_url}/readyz", timeout=5).status == 200, "the server", 60)
            flood = subprocess.Popen(
                [sys.executable, str(BENCH / "loadgen.py"), "--protocol", "grpc", "--target", target,
                 "--spans", str(flood_exporters * 40_000), "--concurrency", str(flood_exporters),
                 "--token", FLOOD_TOKEN],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
            bodies = build_requests(probe_requests * 64, 64, seed=7)
            send = grpc_sender(target, PROBE_TOKEN)
            _wait(lambda: _metric(http_url, "tracegrade_receiver_spans_received_total") > 20_000, "the flood", 300)
            flooded_before = _metric(http_url, "tracegrade_receiver_spans_received_total")
            probe_started = time.monotonic()
            seconds, refusals = [], 0
            for body in bodies:
                started = time.monotonic()
                while True:
                    try:
                        send(body)
                        break
                    except RetryableRefusal as refusal:
                        refusals += 1
                        time.sleep(refusal.retry_after if refusal.retry_after is not None else 0.1)
                seconds.append(time.monotonic() - started)
            window = time.monotonic() - probe_started
            received = _metric(http_url, "tracegrade_receiver_spans_received_total") - flooded_before
        finally:
            if flood is not None:
                flood.kill()
                flood.wait()
            server.terminate()
            server.wait(60)
    seconds.sort()
    return {
        "probe_median_s": statistics.median(seconds),
        "probe_p95_s": seconds[int(0.95 * (len(seconds) - 1))],
        "probe_refusals": refusals,
        "probe_seconds": window,
        # the flood's and the probe's spans decoded per second while the probe sent
        "spans_received_per_s": received / window,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--src", help="run the receiver from this tree's src directory")
    parser.add_argument("--flood-exporters", type=int, default=12)
    parser.add_argument("--probe-requests", type=int, default=40)
    parser.add_argument("--per-tenant", type=int, help="serve's --max-inflight-per-tenant (8: no share of its own)")
    args = parser.parse_args()
    print(json.dumps(run(args.src, args.flood_exporters, args.probe_requests, args.per_tenant)))


if __name__ == "__main__":
    main()
