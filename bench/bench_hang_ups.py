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

``--refused`` measures exports refused for want of an in-flight slot instead: a receiver on a lake (PostgreSQL:
$TRACEGRADE_TEST_PG_DSN, else a private cluster) with ``--max-inflight-requests 4``, every slot held by a small
export waiting for write-queue room (the lake's write gate held), then the N clients send ``--requests`` exports
each, one after another on new connections, and read their refusals (503): the body sent straight after the headers,
or with ``--expect`` only once the receiver answers ``100 Continue``. Prints the server's CPU seconds from the first
send until the clients are done and its CPU stops moving:

    python bench/bench_hang_ups.py --refused --clients 8 --requests 10 --spans 66000 [--expect]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import socket
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from pathlib import Path

import grpc

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for tests.support when run as a script

from tests.support.decode_flood import MIB, TRACE_EXPORT, PatientClient, request_body
from tests.support.lake_serve import LakeServerProcess, writer_held_back
from tests.support.pg_cluster import DSN_VARIABLE, PgServer, PrivateCluster
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


def refused_exports(port: int, body: bytes, requests: int, expect: bool, statuses: list[str]) -> None:
    """``requests`` exports of ``body``, each on a new connection, its answer read; adds their final statuses."""
    head = (
        b"POST /v1/traces HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-protobuf\r\n"
        + (b"Expect: 100-continue\r\n" if expect else b"")
        + f"Content-Length: {len(body)}\r\n\r\n".encode()
    )
    for _ in range(requests):
        with socket.create_connection(("127.0.0.1", port), timeout=600) as client, client.makefile("rb") as replies:
            client.sendall(head if expect else head + body)
            status = replies.readline().split()[1].decode()
            if status == "100":  # told to go on
                replies.readline()
                client.sendall(body)
                status = replies.readline().split()[1].decode()
            statuses.append(status)


def flood(server: ServerProcess, body: bytes, args: argparse.Namespace) -> dict[str, object]:
    """Every client's refused exports at once; the server's CPU from the first send until it stops moving."""
    statuses: list[str] = []
    before = cpu_seconds(server.pid)
    began = time.monotonic()
    clients = [
        threading.Thread(target=refused_exports, args=(server.http_port, body, args.requests, args.expect, statuses))
        for _ in range(args.clients)
    ]
    for client in clients:
        client.start()
    for client in clients:
        client.join()
    answered = time.monotonic() - began
    last = -1.0
    while (used := cpu_seconds(server.pid)) - last >= 0.05:  # until what follows the answers is done too
        last = used
        time.sleep(1.0)
    return {
        "refused": True,
        "expect_100_continue": args.expect,
        "clients": args.clients,
        "requests": args.clients * args.requests,
        "request_mb": round(len(body) / 1e6, 1),
        "statuses": dict(Counter(statuses)),
        "server_cpu_s": round(used - before, 2),
        "seconds_until_answered": round(answered, 1),
    }


def refused_flood(args: argparse.Namespace) -> dict[str, object]:
    """The ``--refused`` measurement (see the module docstring)."""
    slots = 4
    body = request_body(10_000, args.spans)[0]
    cluster = None if os.environ.get(DSN_VARIABLE) else PrivateCluster()
    pg = PgServer(os.environ[DSN_VARIABLE]) if cluster is None else cluster.start()
    try:
        with tempfile.TemporaryDirectory() as directory:
            location = f"ducklake:postgres:{pg.new_database()}"
            options = ("--queue-spans", "10", "--queue-wait", "600", "--max-inflight-requests", str(slots))
            tmp = Path(directory)
            with LakeServerProcess(location, tmp / "data", tmp / "journal", extra_args=options) as server:
                with writer_held_back(location):
                    holders, numbers = [], itertools.count()
                    while metrics(server.http_url)["inflight_requests"] < slots:
                        holders.append(PatientClient(server.http_port, [request_body(next(numbers), 5)]))
                        holders[-1].start()
                        time.sleep(0.5)
                    report = flood(server, body, args)
                for holder in holders:
                    holder.join()
                return report
    finally:
        if cluster is not None:
            cluster.remove()


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
    parser.add_argument("--refused", action="store_true", help="exports refused for want of a slot (see above)")
    parser.add_argument("--requests", type=int, default=10, help="--refused: exports each client sends")
    parser.add_argument("--expect", action="store_true", help="--refused: send 'Expect: 100-continue'")
    args = parser.parse_args()
    if args.refused:
        print(json.dumps(refused_flood(args), indent=1))
        return
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
