"""Floods of maximal OTLP trace requests for the receiver's memory tests and benchmark: requests written on the
wire directly, clients that export patiently (OTLP/HTTP) or hang up on their requests (OTLP/gRPC), and what a
decode costs in memory."""

from __future__ import annotations

import http.client
import struct
import subprocess
import sys
import threading
from pathlib import Path

import grpc

from tests.support.decode_builders import _length_delimited, _varint

__all__ = ["AbandoningClient", "PatientClient", "decode_cost", "request_body", "status_bytes"]

SPANS_PER_TRACE = 10
MIB = 1024 * 1024
TRACE_EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"

_ATTRIBUTES = b"".join(  # KeyValue{key: "k<n>", value: AnyValue{int_value: n}}, n = 0..9
    _length_delimited(9, _length_delimited(1, f"k{n}".encode()) + _length_delimited(2, b"\x18" + _varint(n)))
    for n in range(10)
)


def request_body(number: int, count: int) -> tuple[bytes, list[tuple[str, str]]]:
    """An OTLP/protobuf traces request of ``count`` spans whose ids are the request's own; returns it and their
    (trace_id, span_id) pairs in hex. Written on the wire directly: protobuf's Python objects take seconds."""
    spans, ids = [], []
    for index in range(count):
        trace_id = struct.pack(">QQ", number + 1, index // SPANS_PER_TRACE)
        span_id = struct.pack(">II", number + 1, index)
        span = (
            _length_delimited(1, trace_id)
            + _length_delimited(2, span_id)
            + _length_delimited(5, b"flood")
            + b"\x39"  # start_time_unix_nano (fixed64)
            + struct.pack("<Q", 1_700_000_000_000_000_000 + index)
            + b"\x41"  # end_time_unix_nano (fixed64)
            + struct.pack("<Q", 1_700_000_000_000_000_000 + index + 5)
            + _ATTRIBUTES
        )
        spans.append(_length_delimited(2, span))  # ScopeSpans.spans
        ids.append((trace_id.hex(), span_id.hex()))
    return _length_delimited(1, _length_delimited(2, b"".join(spans))), ids


_DECODE_COST = """
import sys
from tracegrade.ingest.decode import decode_traces_proto
from tracegrade.store.prepared import prepare_write
def status(field):
    return int(open("/proc/self/status").read().split(field + ":")[1].split()[0]) * 1024
body = open(sys.argv[1], "rb").read()
before = status("VmRSS")
decoded = decode_traces_proto(body)
prepared = prepare_write(decoded.spans, (), fresh=True)
print(status("VmHWM") - before)
"""


def decode_cost(body: bytes, where: Path) -> int:
    """Bytes a process grows by while it decodes ``body`` and converts its spans for the store, as a decode
    thread of the receiver does (in a fresh process, after its imports)."""
    path = where / "request.pb"
    path.write_bytes(body)
    measured = subprocess.run([sys.executable, "-c", _DECODE_COST, str(path)], capture_output=True, text=True)
    assert measured.returncode == 0, measured.stderr
    return int(measured.stdout)


def status_bytes(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no {field} in /proc/{pid}/status")


class PatientClient(threading.Thread):
    """Posts its requests over OTLP/HTTP one after the other, each until it is acknowledged (retrying a
    retryable refusal after its Retry-After); records what was acknowledged and every refusal."""

    def __init__(self, port: int, bodies: list[tuple[bytes, list[tuple[str, str]]]]) -> None:
        super().__init__()
        self.port = port
        self.bodies = bodies
        self.acked: list[tuple[str, str]] = []
        self.refusals: list[tuple[int, str | None, bytes]] = []

    def run(self) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        headers = {"Content-Type": "application/x-protobuf"}
        for body, ids in self.bodies:
            while True:
                connection.request("POST", "/v1/traces", body=body, headers=headers)
                reply = connection.getresponse()
                detail = reply.read()
                if reply.status == 200:
                    self.acked.extend(ids)
                    break
                retry_after = reply.getheader("Retry-After")
                self.refusals.append((reply.status, retry_after, detail[:200]))
                if reply.status != 503 or retry_after is None:
                    return
                threading.Event().wait(float(retry_after))


class AbandoningClient(threading.Thread):
    """Sends one request over OTLP/gRPC after the other, each with a deadline of ``after`` seconds (shorter
    than its decode), until ``stop`` is set and it sent ``at_least``; counts the outcomes by status code."""

    def __init__(self, target: str, body: bytes, stop: threading.Event, *, after: float, at_least: int) -> None:
        super().__init__()
        self.target = target
        self.body = body
        self.stop = stop
        self.after = after
        self.at_least = at_least
        self.outcomes: dict[str, int] = {}

    def run(self) -> None:
        options = [("grpc.max_send_message_length", 64 * MIB)]
        with grpc.insecure_channel(self.target, options=options) as channel:
            export = channel.unary_unary(TRACE_EXPORT)
            while not self.stop.is_set() or sum(self.outcomes.values()) < self.at_least:
                try:
                    export(self.body, timeout=self.after)
                    code = grpc.StatusCode.OK
                except grpc.RpcError as error:
                    code = error.code()  # type: ignore[attr-defined]
                self.outcomes[code.name] = self.outcomes.get(code.name, 0) + 1
