"""Retention while spans arrive: ``tracegrade serve --retain`` fed by a real OTLP exporter, and ``tracegrade
maintain --retain --every`` on a real lake while another process writes. Old traces go, whole; every trace
acknowledged within the retention is there, span by span.

A trace can only be expired by a pass that started more than the retention after the store received it, so a
trace submitted less than the retention before a read ended is certain to be in that read: the tests check
exactly those, whatever the machine's speed, and only require that the oldest traces went at some point.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from click.testing import CliRunner
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from tests.support import pg_cluster
from tests.support.pg_cluster import PgServer
from tests.support.server_otlp import post
from tests.support.server_process import ServerProcess
from tests.support.server_requests import query, receiver_metric, span_json, traces_json
from tests.support.store_records import make_span, trace_hex
from tests.support.waiting import wait_until
from tracegrade.cli.main import cli
from tracegrade.store import StoreWriter, TraceStore
from tracegrade.store.lake import LakeStore

pg_server = pg_cluster.pg_server  # the session's PostgreSQL (a fixture)

RETAIN_SECONDS = 2.0
SPANS_PER_TRACE = 4

SpanKeys = dict[str, set[str]]  # trace id -> span ids


def _check_reads(stored: SpanKeys, sent: SpanKeys, submitted: dict[str, float], read_done: float) -> None:
    """Each trace is there whole or not at all, and those submitted within the retention before the read
    ended are there."""
    for trace_id, span_ids in stored.items():
        assert span_ids == sent[trace_id], f"trace {trace_id} is partly deleted"
    recent = {t for t, at in submitted.items() if at > read_done - RETAIN_SECONDS}
    assert recent <= set(stored), f"recent traces missing: {sorted(recent - set(stored))}"


def _by_trace(rows: list) -> SpanKeys:
    found: SpanKeys = {}
    for trace_id, span_id in rows:
        found.setdefault(trace_id, set()).add(span_id)
    return found


def test_serve_retain_expires_quiet_traces_while_an_exporter_sends(tmp_path: Path) -> None:
    store = tmp_path / "traces.duckdb"
    with ServerProcess(store, extra_args=("--retain", f"{RETAIN_SECONDS}s")) as server:
        provider = TracerProvider(resource=Resource.create({"service.name": "retention-test"}))
        provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=server.grpc_target, insecure=True)))
        tracer = provider.get_tracer("retention-test")
        sent: SpanKeys = {}
        submitted: dict[str, float] = {}

        def send_trace() -> str:
            at = time.time()
            with tracer.start_as_current_span("agent") as root:
                trace_id = f"{root.get_span_context().trace_id:032x}"
                ids = {f"{root.get_span_context().span_id:016x}"}
                for _ in range(SPANS_PER_TRACE - 1):
                    with tracer.start_as_current_span("tool") as tool:
                        ids.add(f"{tool.get_span_context().span_id:016x}")
            sent[trace_id], submitted[trace_id] = ids, at  # every span acknowledged (a simple processor)
            return trace_id

        first = send_trace()

        def read() -> tuple[SpanKeys, float]:
            rows = query(server.http_url, "SELECT trace_id, span_id FROM spans")
            return _by_trace(rows), time.time()

        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # keep sending until the first trace is gone, checking every read
            send_trace()
            stored, read_done = read()
            _check_reads(stored, sent, submitted, read_done)
            if first not in stored:
                break
            time.sleep(0.2)
        assert first not in stored, "the first trace was never expired"
        for _ in range(5):  # and some more traffic after it went
            send_trace()
        stored, read_done = read()
        _check_reads(stored, sent, submitted, read_done)

        def counted() -> bool:  # the metrics hear of a pass just after its commit: read until they agree
            expired = receiver_metric(server.http_url, "traces_expired_total")
            spans = receiver_metric(server.http_url, "spans_expired_total")
            gone = len(sent) - len(read()[0])
            return expired == gone and spans == gone * SPANS_PER_TRACE

        wait_until(counted, "the expiry metrics to count the traces gone")
        provider.shutdown()
        assert server.terminate() == 0
    assert "traces quiet for 0:00:02 are deleted (looked for every 0:00:01)" in server.log()


def _lake_spans(trace: int) -> list:
    root = trace * 100
    return [make_span(trace, root, name="agent")] + [
        make_span(trace, root + n, parent=root, name="tool") for n in range(1, SPANS_PER_TRACE)
    ]


def test_maintain_retain_on_a_lake_while_another_process_writes(pg_server: PgServer, tmp_path: Path) -> None:
    location, data = f"ducklake:postgres:{pg_server.new_database()}", tmp_path / "lake-data"
    # each trace committed at once (a lake's writer would gather for a second)
    store = LakeStore(location, data_path=data)
    writer = StoreWriter(store, commit_seconds=0, settle_seconds=0.05, root_settle_seconds=0.05)
    writer.start()
    sent: SpanKeys = {}
    submitted: dict[str, float] = {}

    def write(trace: int) -> None:
        spans = _lake_spans(trace)
        submitted[trace_hex(trace)] = time.time()
        writer.submit(spans).result(timeout=120)
        sent[trace_hex(trace)] = {s.span_id for s in spans}

    def read() -> tuple[SpanKeys, float]:
        with LakeStore(location, read_only=True) as reader:
            rows = reader.query("SELECT trace_id, span_id FROM spans").rows
        return _by_trace(rows), time.time()

    write(1)
    log = tmp_path / "maintain.out"
    command = [sys.executable, "-m", "tracegrade.cli.main", "maintain", "--store", location, "--lake-data", str(data)]
    with log.open("w") as out:
        maintainer = subprocess.Popen(
            [*command, "--retain", f"{RETAIN_SECONDS}s", "--every", "0.3s", "--keep", "0s"], stdout=out, stderr=out
        )
    try:
        trace = 1
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            trace += 1
            write(trace)
            stored, read_done = read()
            _check_reads(stored, sent, submitted, read_done)
            if trace_hex(1) not in stored:
                break
        assert trace_hex(1) not in stored, "the first trace was never expired:\n" + log.read_text()
        assert maintainer.poll() is None, log.read_text()
    finally:
        writer.close()
        maintainer.send_signal(signal.SIGINT)
        maintainer.wait(60)
    assert maintainer.returncode == 0, log.read_text()
    stored, read_done = read()
    _check_reads(stored, sent, submitted, read_done)
    with LakeStore(location, read_only=True) as reader:  # no trajectory outlives its spans
        built = {row[0] for row in reader.query("SELECT trace_id FROM traces").rows}
    assert built <= set(stored)


def test_maintain_retain_on_a_store_file(tmp_path: Path) -> None:
    path = tmp_path / "traces.duckdb"
    with TraceStore(path) as store:
        store.write(_lake_spans(1))
    time.sleep(0.05)
    with TraceStore(path) as store:
        store.write(_lake_spans(2))
        store.write(_lake_spans(3), tenant="acme")

    kept = CliRunner().invoke(cli, ["maintain", "--store", str(path), "--retain", "1h"])
    assert kept.exit_code == 0, kept.output
    assert "expired 0 trace(s)" in kept.output
    time.sleep(0.05)
    acme = ["--retain-tenants", "acme=0.1s,default=forever"]
    only_acme = CliRunner().invoke(cli, ["maintain", "--store", str(path), *acme])
    assert only_acme.exit_code == 0, only_acme.output
    assert f"expired 1 trace(s): {SPANS_PER_TRACE} span(s)" in only_acme.output
    expired = CliRunner().invoke(cli, ["maintain", "--store", str(path), "--retain", "0.1s"])
    assert expired.exit_code == 0, expired.output
    assert f"expired 2 trace(s): {2 * SPANS_PER_TRACE} span(s)" in expired.output
    with TraceStore(path, read_only=True) as store:
        assert store.query("SELECT count(*) FROM spans").rows == [(0,)]


def test_maintain_retain_refuses_what_it_cannot_do(tmp_path: Path) -> None:
    missing = tmp_path / "missing.duckdb"
    result = CliRunner().invoke(cli, ["maintain", "--store", str(missing), "--retain", "30d"])
    assert result.exit_code != 0 and "store not found" in result.output
    assert not missing.exists()
    bad = CliRunner().invoke(cli, ["maintain", "--store", str(missing), "--retain", "forever"])
    assert bad.exit_code == 2 and "--retain" in bad.output and "not a duration" in bad.output
    served = tmp_path / "served.duckdb"
    with ServerProcess(served):
        held = CliRunner().invoke(cli, ["maintain", "--store", str(served), "--retain", "30d"])
    assert held.exit_code == 2 and "give it --retain instead" in held.output, held.output


def test_serve_retain_tenants_expires_one_tenants_traces_and_keeps_the_others(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text("tenants:\n  acme: [acme-token-0123456789]\n  umbrella: [umbrella-token-0123456789]\n")
    args = ("--tokens", str(tokens), "--retain-tenants", "acme=1s")
    with ServerProcess(tmp_path / "traces.duckdb", extra_args=args) as server:
        trace_id = "0123456789abcdef0123456789abcdef"
        body = json.dumps(traces_json([span_json(trace_id, i) for i in range(SPANS_PER_TRACE)])).encode()
        for token in ("acme-token-0123456789", "umbrella-token-0123456789"):
            assert post(f"{server.http_url}/v1/traces", body, "application/json", token=token).status == 200

        def spans_of(token: str) -> int:
            return len(query(server.http_url, "SELECT span_id FROM spans", token=token))

        wait_until(lambda: spans_of("acme-token-0123456789") == 0, "acme's trace to expire")
        assert spans_of("umbrella-token-0123456789") == SPANS_PER_TRACE  # umbrella's kept: no --retain
        # the metrics hear of a pass just after its commit, which a query can see first
        wait_until(lambda: receiver_metric(server.http_url, "traces_expired_total") == 1, "the expiry to be counted")
        assert server.terminate() == 0
    assert "traces are kept (acme's after 0:00:01) (looked for every 0:00:01)" in server.log()
