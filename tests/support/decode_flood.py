"""Floods of maximal OTLP trace requests for the receiver's memory tests and benchmark: requests written on the
wire directly, clients that export patiently (OTLP/HTTP) or hang up on their requests (OTLP/gRPC), and what a
decode costs in memory."""

from __future__ import annotations

import http.client
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import grpc
from google.rpc import error_details_pb2

from tests.support.decode_builders import _length_delimited, _varint

__all__ = [
    "AbandoningClient",
    "PacedClient",
    "PatientClient",
    "PatientGrpcClient",
    "decode_cost",
    "request_body",
    "status_bytes",
]

SPANS_PER_TRACE = 10
MIB = 1024 * 1024
TRACE_EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
RETRY_INFO = "google.rpc.retryinfo-bin"
# what OTLP says to retry without a RetryInfo (RESOURCE_EXHAUSTED is retryable only with one)
RETRYABLE = {grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.ABORTED}

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
    retryable refusal after its Retry-After); records what was acknowledged and every refusal. ``bodies`` may
    be a generator, so that a client can send until told to stop."""

    def __init__(self, port: int, bodies: Iterable[tuple[bytes, list[tuple[str, str]]]]) -> None:
        super().__init__()
        self.port = port
        self.bodies = bodies
        self.acked: list[tuple[str, str]] = []
        self.refusals: list[tuple[int | str, str | None, bytes]] = []

    def run(self) -> None:
        self._connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        self.send_all()

    def send_all(self) -> None:
        for body, ids in self.bodies:
            while True:
                refusal = self.send(body)
                if refusal is None:
                    self.acked.extend(ids)
                    break
                self.refusals.append(refusal)
                if refusal[1] is None:
                    return
                threading.Event().wait(float(refusal[1]))

    def send(self, body: bytes) -> tuple[int | str, str | None, bytes] | None:
        """None when ``body`` was acknowledged, else the refusal: (status, retry delay if retryable, detail)."""
        headers = {"Content-Type": "application/x-protobuf", "Content-Length": str(len(body))}
        self._connection.request("POST", "/v1/traces", body=self._pieces(body), headers=headers)
        reply = self._connection.getresponse()
        detail = reply.read()
        if reply.status == 200:
            return None
        return reply.status, reply.getheader("Retry-After") if reply.status == 503 else None, detail[:200]

    def _pieces(self, body: bytes) -> bytes | Iterator[bytes]:
        """``body`` as it goes on the wire: all at once."""
        return body


class PacedClient(PatientClient):
    """A :class:`PatientClient` whose bodies go out ``piece`` bytes at a time, ``pause`` seconds apart, as over a
    slow link: each spends a while being received. Like an exporter, it sends the whole body before it reads the
    answer, also when that came early (a refusal)."""

    def __init__(
        self, port: int, bodies: Iterable[tuple[bytes, list[tuple[str, str]]]], *, piece: int, pause: float
    ) -> None:
        super().__init__(port, bodies)
        self.piece = piece
        self.pause = pause

    def _pieces(self, body: bytes) -> Iterator[bytes]:
        for start in range(0, len(body), self.piece):
            if start:
                time.sleep(self.pause)
            yield body[start : start + self.piece]


class PatientGrpcClient(PatientClient):
    """A :class:`PatientClient` exporting over OTLP/gRPC, retrying as OTLP says: after a refusal's ``RetryInfo``
    delay, or a second after a retryable status without one (``RESOURCE_EXHAUSTED`` without one is final)."""

    def __init__(self, target: str, bodies: Iterable[tuple[bytes, list[tuple[str, str]]]]) -> None:
        super().__init__(0, bodies)
        self.target = target

    def run(self) -> None:
        options = [("grpc.max_send_message_length", 64 * MIB)]
        with grpc.insecure_channel(self.target, options=options) as channel:
            self._export = channel.unary_unary(TRACE_EXPORT)
            self.send_all()

    def send(self, body: bytes) -> tuple[int | str, str | None, bytes] | None:
        try:
            self._export(body, timeout=120)
        except grpc.RpcError as error:
            code = error.code()  # type: ignore[attr-defined]
            trailers = dict(error.trailing_metadata() or ())  # type: ignore[attr-defined]
            delay = None
            if RETRY_INFO in trailers:
                info = error_details_pb2.RetryInfo.FromString(trailers[RETRY_INFO])
                delay = str(info.retry_delay.seconds + info.retry_delay.nanos / 1e9)
            elif code in RETRYABLE:  # retried after a second, as OTLP exporters back off
                delay = "1"
            return code.name, delay, (error.details() or "").encode()[:200]  # type: ignore[attr-defined]
        return None


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
