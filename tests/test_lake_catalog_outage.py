"""The lake's catalog goes away under a loaded receiver: real OTLP exporters keep sending, the PostgreSQL
cluster (a private one, started for this test) is stopped and started again. Meanwhile the receiver
answers 503 with Retry-After (OTLP/HTTP) and UNAVAILABLE with RetryInfo (OTLP/gRPC), advice that grows as
the outage lasts, and is not ready; once the catalog is back it recovers by itself, and every span it
acknowledged, before, during and after, is visible once. The exporters send a batch again when they give up
on it (as a Collector's queue would), so every trace is complete in the end; a `tracegrade build` process,
building beside it, opens the lake again too and builds every trace."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import grpc

from tests.support.export_load import ExportLoad, make_batches
from tests.support.lake_serve import LakeServerProcess, lake_span_counts
from tests.support.pg_cluster import PrivateCluster
from tests.support.server_otlp import post
from tests.support.server_requests import span_json, traces_proto, unique_trace_id
from tracegrade.store.lake import LakeStore

_WAIT_SECONDS = 120.0  # bound on waiting for background work on a busy machine (not a timing assertion)
_OUTAGE_SO_FAR = 3.0  # seconds the catalog stays away after the receiver is seen reopening its store


def _probe_http(receiver: LakeServerProcess, acked: list[tuple[str, str]]) -> tuple[int, str | None]:
    """One export over OTLP/HTTP; its status and Retry-After (an acknowledged span joins ``acked``)."""
    trace_id = unique_trace_id()
    reply = post(f"{receiver.http_url}/v1/traces", traces_proto([span_json(trace_id, 0)]))
    if reply.status == 200:
        acked.append((trace_id, f"{1:016x}"))
    return reply.status, reply.headers.get("Retry-After")


def _probe_grpc(receiver: LakeServerProcess, acked: list[tuple[str, str]]) -> tuple[grpc.StatusCode, float | None]:
    """One export over OTLP/gRPC; its status and the delay its RetryInfo trailer advises."""
    from google.rpc import error_details_pb2
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

    trace_id = unique_trace_id()
    request = trace_service_pb2.ExportTraceServiceRequest.FromString(traces_proto([span_json(trace_id, 0)]))
    with grpc.insecure_channel(receiver.grpc_target) as channel:
        try:
            trace_service_pb2_grpc.TraceServiceStub(channel).Export(request, timeout=30)
        except grpc.RpcError as error:
            info = dict(error.trailing_metadata()).get("google.rpc.retryinfo-bin")
            if info is None:
                return error.code(), None
            delay = error_details_pb2.RetryInfo.FromString(info).retry_delay
            return error.code(), delay.seconds + delay.nanos / 1e9
    acked.append((trace_id, f"{1:016x}"))
    return grpc.StatusCode.OK, None


def _ready(receiver: LakeServerProcess) -> int:
    return post(f"{receiver.http_url}/readyz", b"", method="GET").status


def _reopening(receiver: LakeServerProcess) -> bool:
    """Whether the receiver is reopening its store (not merely seen failed: it checks a few times a second)."""
    reply = post(f"{receiver.http_url}/readyz", b"", method="GET")
    return reply.status == 503 and "being reopened" in reply.json()["reason"]


def test_the_catalog_going_away_is_a_retryable_refusal_and_nothing_acknowledged_is_lost(tmp_path: Path) -> None:
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter

    cluster = PrivateCluster()
    receiver: LakeServerProcess | None = None
    builder: subprocess.Popen[str] | None = None
    loads: list[ExportLoad] = []
    probed: list[tuple[str, str]] = []
    try:
        location = f"ducklake:postgres:{cluster.start().new_database()}"
        data = tmp_path / "lake-data"
        receiver = LakeServerProcess(
            location, data, tmp_path / "receiver.journal", extra_args=("--no-build-trajectories",)
        ).start()
        build = ["build", "--store", location, "--lake-data", str(data)]
        launch = "from tracegrade.cli.main import main; main()"
        builder = subprocess.Popen(
            [sys.executable, "-c", launch, *build], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        traces = make_batches(60, 10)
        http_exporter = HttpSpanExporter(endpoint=f"{receiver.http_url}/v1/traces", timeout=180)
        grpc_exporter = GrpcSpanExporter(endpoint=receiver.grpc_target, insecure=True, timeout=180)
        loads = [ExportLoad(http_exporter, traces[0::2], 0.1, True), ExportLoad(grpc_exporter, traces[1::2], 0.1, True)]
        for load in loads:
            load.start()
        deadline = time.monotonic() + _WAIT_SECONDS
        while min(load.acked_batches for load in loads) < 3:
            assert time.monotonic() < deadline and all(load.is_alive() for load in loads), "the load never got going"
            time.sleep(0.05)

        cluster.stop()
        http_refusal: tuple[int, str | None] = (200, None)
        grpc_refusal: tuple[grpc.StatusCode, float | None] = (grpc.StatusCode.OK, None)
        deadline = time.monotonic() + _WAIT_SECONDS
        while http_refusal[0] == 200 or grpc_refusal[0] is grpc.StatusCode.OK:
            assert time.monotonic() < deadline, f"no refusal while the catalog was away: {http_refusal}, {grpc_refusal}"
            http_refusal = _probe_http(receiver, probed)
            grpc_refusal = _probe_grpc(receiver, probed)
            time.sleep(0.1)
        assert http_refusal[0] == 503 and float(http_refusal[1] or 0) >= 1, http_refusal
        assert grpc_refusal[0] is grpc.StatusCode.UNAVAILABLE and (grpc_refusal[1] or 0) >= 1, grpc_refusal
        assert _ready(receiver) == 503
        while not _reopening(receiver):  # which cannot succeed while the catalog is away
            assert time.monotonic() < deadline, receiver.log()
            time.sleep(0.05)
        time.sleep(_OUTAGE_SO_FAR)
        # the advice grows with the outage (twice as long as it has lasted), so exporters that make a fixed
        # number of attempts span a long outage instead of giving up after a few seconds
        http_refusal, grpc_refusal = _probe_http(receiver, probed), _probe_grpc(receiver, probed)
        assert http_refusal[0] == 503 and float(http_refusal[1] or 0) >= 2 * _OUTAGE_SO_FAR, http_refusal
        assert grpc_refusal[0] is grpc.StatusCode.UNAVAILABLE and (grpc_refusal[1] or 0) >= 2 * _OUTAGE_SO_FAR
        acked_in_outage = sum(load.acked_batches for load in loads)
        cluster.start()

        for load in loads:
            load.join(2 * _WAIT_SECONDS)
            assert not load.is_alive(), "the exporters never got their spans in"
            assert load.acked_batches == len(load.batches)
        deadline = time.monotonic() + _WAIT_SECONDS
        while _ready(receiver) != 200:  # it recovered by itself
            assert time.monotonic() < deadline, receiver.log()
            time.sleep(0.2)
        assert _probe_http(receiver, probed)[0] == 200
        assert receiver.terminate() == 0, receiver.log()
        with LakeStore(location, read_only=True) as reader:  # the builder, back too, builds every trace
            while reader.stale_trajectories():
                assert time.monotonic() < deadline + _WAIT_SECONDS, "the builder never built the traces"
                time.sleep(0.2)
        builder.send_signal(signal.SIGTERM)
        output = builder.communicate(timeout=_WAIT_SECONDS)[0]
        assert builder.returncode == 0, output
        acked = [ids for load in loads for ids in load.acked] + probed
        # the exporters' retries got through once it was back
        assert sum(load.acked_batches for load in loads) > acked_in_outage
        visible = lake_span_counts(location)
        lost = [ids for ids in acked if ids not in visible]
        assert not lost, f"{len(lost)} of {len(acked)} acknowledged spans lost, e.g. {lost[:3]}"
        assert set(visible.values()) == {1}
        assert "reopening" in receiver.log()
        with LakeStore(location, read_only=True) as reader:
            assert reader.query("SELECT count(*) FROM traces WHERE span_count = 10").rows == [(60,)]
    finally:
        for load in loads:
            load.stop()
        if receiver is not None:
            receiver.kill()
        if builder is not None and builder.poll() is None:
            builder.kill()
        cluster.remove()
