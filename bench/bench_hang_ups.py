"""The CPU a real ``tracegrade serve`` spends on OTLP exports whose clients hung up.

N clients each send one request of ``--spans`` small spans (about 150 bytes each: 66,000 make 10 MB) at once and
hang up ``--deadline`` seconds after sending it, as an exporter whose timeout passed: over OTLP/HTTP a raw
connection closed, over OTLP/gRPC a call whose deadline passed. ``--patient`` waits for each answer instead (the
cost of requests someone waits for). The server's ``--queue-wait`` is long (60 s), so that requests wait for the
writer instead of being refused while their clients are still there. Prints the server's CPU seconds (utime +
stime from ``/proc/<pid>/stat``) from before the clients start until it is idle again, and what its ``/metrics``
counted. Run from the checkout root (``PYTHONPATH=<another checkout>/src`` runs that checkout's server):

    python bench/bench_hang_ups.py --clients 20 --spans 66000
    python bench/bench_hang_ups.py --clients 20 --spans 66000 --protocol grpc
    python bench/bench_hang_ups.py --clients 20 --spans 66000 --patient
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import grpc

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for tests.support when run as a script

from tests.support.decode_flood import MIB, TRACE_EXPORT, request_body
from tests.support.server_process import ServerProcess

IDLE_GAUGES = (
    "inflight_requests",
    "request_body_bytes",
    "decoding_bytes",
    "requests_waiting_to_decode",
    "requests_waiting_for_room",
    "queue_depth_spans",
)


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime and stime


def metrics(http_url: str) -> dict[str, float]:
    """Every tracegrade_receiver_ sample, by its name with labels."""
    with urllib.request.urlopen(f"{http_url}/metrics", timeout=30) as response:
        page = response.read().decode()
    prefix = "tracegrade_receiver_"
    return {
        line[len(prefix) :].rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
        for line in page.splitlines()
        if line.startswith(prefix)
    }


def hang_up_http(port: int, body: bytes, patient: bool, deadline: float) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=600) as client:
        client.sendall(
            b"POST /v1/traces HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-protobuf\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        client.settimeout(600 if patient else deadline)
        try:
            client.recv(65536)
        except TimeoutError:
            pass  # hung up, as an exporter whose timeout passed


def hang_up_grpc(target: str, body: bytes, patient: bool, deadline: float) -> None:
    with grpc.insecure_channel(target, options=[("grpc.max_send_message_length", 64 * MIB)]) as channel:
        try:
            channel.unary_unary(TRACE_EXPORT)(body, timeout=600 if patient else deadline)
        except grpc.RpcError:
            pass


def wait_idle(server: ServerProcess) -> None:
    """Until every budget and queue is empty and the server's CPU stops moving (its builds are done)."""
    last = -1.0
    while True:
        values = metrics(server.http_url)
        used = cpu_seconds(server.pid)
        if all(values[name] == 0 for name in IDLE_GAUGES) and used - last < 0.05:
            return
        last = used
        time.sleep(1.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--spans", type=int, default=66_000, help="spans per request")
    parser.add_argument("--protocol", choices=("http", "grpc"), default="http")
    parser.add_argument("--deadline", type=float, default=5.0, help="seconds from sending to hanging up")
    parser.add_argument("--patient", action="store_true", help="wait for every answer instead of hanging up")
    parser.add_argument("--queue-wait", default="60", help="the server's --queue-wait: long, so requests wait")
    args = parser.parse_args()
    bodies = [request_body(number, args.spans)[0] for number in range(args.clients)]
    with (
        tempfile.TemporaryDirectory() as directory,
        ServerProcess(Path(directory) / "bench.duckdb", extra_args=("--queue-wait", args.queue_wait)) as server,
    ):
        wait_idle(server)
        before = cpu_seconds(server.pid)
        began = time.monotonic()
        clients = [
            threading.Thread(target=hang_up_http, args=(server.http_port, body, args.patient, args.deadline))
            if args.protocol == "http"
            else threading.Thread(target=hang_up_grpc, args=(server.grpc_target, body, args.patient, args.deadline))
            for body in bodies
        ]
        for client in clients:
            client.start()
        for client in clients:
            client.join()
        wait_idle(server)
        counted = metrics(server.http_url)
        report = {
            "protocol": args.protocol,
            "clients": args.clients,
            "patient": args.patient,
            "request_mb": round(len(bodies[0]) / 1e6, 1),
            "server_cpu_s": round(cpu_seconds(server.pid) - before, 2),
            "seconds_until_idle": round(time.monotonic() - began, 1),
            "requests_decoded": counted["spans_received_total"] / args.spans,
            "spans_stored": counted["spans_stored_total"],
            "counters": {
                name: value
                for name, value in counted.items()
                if name.startswith(("requests_total", "requests_abandoned_total")) and value
            },
        }
        print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
