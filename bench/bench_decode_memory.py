"""Peak RSS of a real ``tracegrade serve`` flooded with maximal OTLP trace requests (99,000 spans of ten small
integer attributes, 15 MB of protobuf each).

``--patient N --requests R``: N OTLP/HTTP clients (OTLP/gRPC with ``--protocol grpc``, a channel each) each send
R such requests one after the other, each until it is acknowledged (the same request: the store keeps one copy).
``--abandoning M --seconds S``: M OTLP/gRPC clients send them with a 0.5 s deadline, shorter than a decode, for S
seconds. Prints the server's VmRSS at start and its VmHWM at the end, in MiB. Run from the checkout root:

    python bench/bench_decode_memory.py --patient 8 --requests 3
    python bench/bench_decode_memory.py --patient 64 --requests 1 --protocol grpc
    python bench/bench_decode_memory.py --abandoning 8 --seconds 20
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for tests.support when run as a script

from tests.support.decode_flood import AbandoningClient, PatientClient, PatientGrpcClient, request_body, status_bytes
from tests.support.server_process import ServerProcess

MIB = 1024 * 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--patient", type=int, default=0, help="clients that wait for each answer")
    parser.add_argument("--protocol", choices=("http", "grpc"), default="http", help="the patient clients' OTLP")
    parser.add_argument("--requests", type=int, default=3, help="requests each patient client sends")
    parser.add_argument("--abandoning", type=int, default=0, help="OTLP/gRPC clients that hang up after 0.5 s")
    parser.add_argument("--seconds", type=float, default=20.0, help="how long the abandoning clients go on")
    parser.add_argument("--spans", type=int, default=99_000, help="spans per request")
    args = parser.parse_args()
    body, ids = request_body(0, args.spans)
    with tempfile.TemporaryDirectory() as directory, ServerProcess(Path(directory) / "bench.duckdb") as server:
        started = status_bytes(server.pid, "VmRSS")
        stop = threading.Event()
        clients: list[threading.Thread] = [
            PatientGrpcClient(server.grpc_target, [(body, ids)] * args.requests)
            if args.protocol == "grpc"
            else PatientClient(server.http_port, [(body, ids)] * args.requests)
            for _ in range(args.patient)
        ]
        clients += [
            AbandoningClient(server.grpc_target, body, stop, after=0.5, at_least=1) for _ in range(args.abandoning)
        ]
        began = time.monotonic()
        for client in clients:
            client.start()
        if args.abandoning:
            time.sleep(args.seconds)
            stop.set()
        for client in clients:
            client.join()
        figures = {
            "request_mib": round(len(body) / MIB, 1),
            "started_mib": started // MIB,
            "peak_mib": status_bytes(server.pid, "VmHWM") // MIB,
            "seconds": round(time.monotonic() - began, 1),
            "spans_acknowledged": sum(len(c.acked) for c in clients if isinstance(c, PatientClient)),
            "patient_refusals": dict(
                Counter(str(r[0]) for c in clients if isinstance(c, PatientClient) for r in c.refusals)
            ),
        }
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
