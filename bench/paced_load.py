"""OTLP/gRPC agent spans at a fixed rate, for measuring visibility below a receiver's capacity.

The spans and requests are otlp_loadgen's (/work/shared/tools/otlp_loadgen.py, built and serialized
before the clock starts); a request of ``--batch`` spans leaves every ``batch / rate`` seconds, on a
schedule (a few in flight at most: a receiver slower than the rate makes the schedule slip, reported as
``behind_seconds``). A refused request (backpressure, a store reopening) is sent again after a pause.
Prints one JSON line with otlp_loadgen's summary fields that bench_lake.py reads.

    python bench/paced_load.py --endpoint 127.0.0.1:4317 --rate 1000 --seconds 30
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType

LOADGEN = Path(os.environ.get("TRACEGRADE_LOADGEN", "/work/shared/tools/otlp_loadgen.py"))
IN_FLIGHT = 4
RETRIES = 20
RETRY_PAUSE = 0.25


def _loadgen() -> ModuleType:
    spec = importlib.util.spec_from_file_location("otlp_loadgen", LOADGEN)
    assert spec is not None and spec.loader is not None, f"no load generator at {LOADGEN}"
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--endpoint", required=True, help="the receiver's OTLP/gRPC host:port")
    parser.add_argument("--rate", type=float, required=True, help="spans per second")
    parser.add_argument("--seconds", type=float, required=True, help="how long to send")
    parser.add_argument("--batch", type=int, default=128, help="spans per request")
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()

    loadgen = _loadgen()
    spans = max(args.batch, int(args.rate * args.seconds))
    payloads = loadgen.make_payloads(spans, args.batch, "grpc", {"service.name": "bench-paced"}, seed=args.seed)
    factory, channel = loadgen.grpc_sender_factory(args.endpoint, {}, 30.0, "none")
    send = factory()
    counts = {"spans_ok": 0, "spans_failed": 0, "retries": 0}
    lock = threading.Lock()
    slots = threading.BoundedSemaphore(IN_FLIGHT)

    def deliver(size: int, body: bytes) -> None:
        try:
            for attempt in range(RETRIES + 1):
                ok, _ = send(body)
                if ok:
                    with lock:
                        counts["spans_ok"] += size
                    return
                if attempt < RETRIES:
                    with lock:
                        counts["retries"] += 1
                    time.sleep(RETRY_PAUSE)
            with lock:
                counts["spans_failed"] += size
        finally:
            slots.release()

    interval = args.batch / args.rate
    behind = 0.0
    started_unix, started = time.time(), time.monotonic()
    with ThreadPoolExecutor(IN_FLIGHT) as pool:
        for index, (size, body) in enumerate(payloads):
            due = started + index * interval
            pause = due - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            slots.acquire()
            behind = max(behind, time.monotonic() - due)
            pool.submit(deliver, size, body)
    wall = time.monotonic() - started
    channel.close()
    summary = counts | {
        "rate_requested": args.rate,
        "spans_per_s_acked": round(counts["spans_ok"] / wall, 1),
        "behind_seconds": round(behind, 3),
        "send_start_unix": started_unix,
    }
    print(json.dumps(summary))
    sys.exit(0 if counts["spans_failed"] == 0 else 1)


if __name__ == "__main__":
    main()
