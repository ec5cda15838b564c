"""Operating the receiver: health, readiness, metrics, the query endpoint, bearer tokens, the sidecar,
graceful SIGTERM of a ``tracegrade serve`` process, and clean errors for bad settings."""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path
from typing import Any

import grpc
import pytest
from click.testing import CliRunner
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.support.server_inprocess import running_server
from tests.support.server_otlp import get_text, post
from tests.support.server_process import ServerProcess
from tests.support.server_requests import count_spans, query, span_json, status_of, traces_proto, unique_trace_id
from tracegrade.cli.main import cli
from tracegrade.cli.serve import command as serve_command
from tracegrade.store import TraceStore

TRACE_EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
TOKEN = "s3cret-token"


def _metric_value(page: str, name: str, labels: str = "") -> float:
    match = re.search(rf"^{re.escape(name + labels)} (\S+)$", page, re.MULTILINE)
    assert match, f"{name}{labels} missing from\n{page}"
    return float(match.group(1))


def test_health_readiness_and_metrics(tmp_path: Path) -> None:
    with running_server(tmp_path / "store.duckdb") as server:
        assert get_text(f"{server.http_url}/healthz") == (200, json.dumps({"status": "ok", "server": "tracegrade"}))
        status, body = get_text(f"{server.http_url}/readyz")
        assert (status, json.loads(body)["ready"]) == (200, True)

        trace_id = unique_trace_id()
        spans = [span_json(trace_id, i) for i in range(4)] + [span_json(trace_id, 9, spanId="00")]
        assert post(f"{server.http_url}/v1/traces", traces_proto(spans)).status == 200
        assert post(f"{server.http_url}/v1/traces", b"\xff\xff", "application/x-protobuf").status == 400
        assert post(f"{server.http_url}/v1/traces", traces_proto(spans[:1])).status == 200  # a retry: duplicate
        assert count_spans(server.http_url, trace_id) == 4  # a query sees every acknowledged span committed

        status, page = get_text(f"{server.http_url}/metrics")
    assert status == 200
    prefix = "tracegrade_receiver_"
    assert _metric_value(page, prefix + "spans_received_total") == 6
    assert _metric_value(page, prefix + "spans_rejected_total") == 1
    assert _metric_value(page, prefix + "spans_stored_total") == 4
    assert _metric_value(page, prefix + "spans_duplicate_total") == 1
    assert _metric_value(page, prefix + "requests_total", '{protocol="http",signal="traces",status="200"}') == 2
    assert _metric_value(page, prefix + "requests_total", '{protocol="http",signal="traces",status="400"}') == 1
    assert _metric_value(page, prefix + "write_latency_seconds_count") == 2
    assert _metric_value(page, prefix + "write_latency_seconds_bucket", '{le="+Inf"}') == 2
    assert _metric_value(page, prefix + "queue_depth_spans") == 0
    assert "# TYPE tracegrade_receiver_write_latency_seconds histogram" in page
    sample = re.compile(r'^[a-z_]+(\{[a-z_]+="[^"]*"(,[a-z_]+="[^"]*")*\})? [-+0-9.eInf]+$')
    for line in page.splitlines():
        assert line.startswith("# ") or sample.match(line), line


def test_query_endpoint_answers_read_only_sql_and_refuses_the_rest(tmp_path: Path) -> None:
    with running_server(tmp_path / "store.duckdb") as server:
        trace_id = unique_trace_id()
        assert (
            post(f"{server.http_url}/v1/traces", traces_proto([span_json(trace_id, i) for i in range(2)])).status == 200
        )
        rows = query(server.http_url, "SELECT name, start_ns FROM spans WHERE trace_id = ? ORDER BY name", [trace_id])
        assert rows == [["span 0", 1_700_000_000_000_000_000], ["span 1", 1_700_000_000_000_001_000]]
        reply = post(
            f"{server.http_url}/v1/query",
            json.dumps({"sql": "SELECT start_time FROM spans"}).encode(),
            "application/json",
        )
        assert reply.json()["columns"] == ["start_time"]
        assert reply.json()["rows"][0][0].startswith("2023-11-14T22:13:20")

        refusals = {
            json.dumps({"sql": "DELETE FROM spans"}): "DELETE statements are not allowed",
            json.dumps({"sql": "SELECT nope FROM spans"}): "query failed: Binder Error",
            json.dumps({"sql": "SELECT 1", "limit": 3}): "unknown query keys",
            json.dumps({"sql": "SELECT ?", "params": "x"}): "'params' must be a JSON array",
            json.dumps({"sql": 5}): "'sql' must be a string holding the query (it is a JSON number)",
            json.dumps({}): "'sql' must be a string holding the query (it is missing)",
            json.dumps(["SELECT 1"]): "the query body must be a JSON object",
            "{not json": "not valid JSON",
        }
        for body, fragment in refusals.items():
            reply = post(f"{server.http_url}/v1/query", body.encode(), "application/json")
            assert reply.status == 400, body
            assert fragment in status_of(reply).message
            assert "query failed: query failed" not in status_of(reply).message
        assert count_spans(server.http_url, trace_id) == 2


def _grpc_export(target: str, body: bytes, token: str | None) -> None:
    with grpc.insecure_channel(target) as channel:
        metadata = (("authorization", f"Bearer {token}"),) if token is not None else None
        channel.unary_unary(TRACE_EXPORT)(body, metadata=metadata, timeout=30)


def test_bearer_token_is_required_on_both_protocols(tmp_path: Path) -> None:
    with running_server(tmp_path / "store.duckdb", token=TOKEN) as server:
        url = f"{server.http_url}/v1/traces"
        trace_id = unique_trace_id()
        body = traces_proto([span_json(trace_id, 0)])
        missing = post(url, body)
        assert missing.status == 401
        assert "missing bearer token" in status_of(missing).message
        assert "invalid bearer token" in status_of(post(url, body, token="wrong")).message
        assert post(url, body, headers={"Authorization": f"Basic {TOKEN}"}).status == 401
        assert post(f"{server.http_url}/v1/query", b'{"sql": "SELECT 1"}', "application/json").status == 401

        for token, fragment in ((None, "missing bearer token"), ("wrong", "invalid bearer token")):
            with pytest.raises(grpc.RpcError) as refused:
                _grpc_export(server.grpc_target, body, token)
            assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
            assert fragment in refused.value.details()

        assert post(url, body, token=TOKEN).status == 200
        _grpc_export(server.grpc_target, traces_proto([span_json(trace_id, 1)]), TOKEN)
        sent = _export_with_real_exporters(server, headers={"authorization": f"Bearer {TOKEN}"})
        assert count_spans(server.http_url, trace_id, token=TOKEN) == 2
        stored = query(server.http_url, "SELECT count(*) FROM spans WHERE trace_id = ?", [sent], token=TOKEN)
        assert stored == [[2]]


def _export_with_real_exporters(server: Any, headers: dict[str, str]) -> str:
    """One span through each real exporter, with ``headers``; returns their (shared) trace id."""
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("tests.auth")
    with tracer.start_as_current_span("root"):
        tracer.start_span("child").end()
    spans = memory.get_finished_spans()
    grpc_exporter = GrpcSpanExporter(endpoint=server.grpc_target, insecure=True, headers=headers)
    http_exporter = HttpSpanExporter(endpoint=f"{server.http_url}/v1/traces", headers=headers)
    assert grpc_exporter.export(spans[:1]) == SpanExportResult.SUCCESS
    assert http_exporter.export(spans[1:]) == SpanExportResult.SUCCESS
    return f"{spans[0].context.trace_id:032x}"


def test_sigterm_flushes_everything_acknowledged_and_removes_the_sidecar(tmp_path: Path) -> None:
    store = tmp_path / "serve.duckdb"
    with ServerProcess(store) as server:
        sidecar = json.loads(server.sidecar.read_text())
        assert sidecar["pid"] == server.pid
        assert sidecar["http_url"] == server.http_url
        assert sidecar["grpc_target"] == server.grpc_target
        assert "OTLP/gRPC" in server.log()
        trace_ids = []
        for index in range(5):
            trace_id = unique_trace_id()
            trace_ids.append(trace_id)
            spans = [span_json(trace_id, i) for i in range(20)]
            spans[0].pop("parentSpanId", None)
            assert post(f"{server.http_url}/v1/traces", traces_proto(spans), gzip_body=index % 2 == 0).status == 200
        assert server.terminate() == 0
    assert not server.sidecar.exists()
    reader = TraceStore(store, read_only=True)
    try:
        assert reader.query("SELECT count(*) FROM spans").rows == [(100,)]
        placeholders = ", ".join("?" for _ in trace_ids)
        built = reader.query(f"SELECT count(*) FROM traces WHERE trace_id IN ({placeholders})", trace_ids).rows
        assert built == [(5,)]
    finally:
        reader.close()


def test_the_receiver_process_is_set_up_for_low_memory(tmp_path: Path) -> None:
    """By default ``serve`` maps even a large rebuild job in its own process (no child), and its DuckDB
    returns bulk frees to the system."""
    import time

    import psutil

    from tracegrade.store.mapping_process import IN_PROCESS_SPANS

    with ServerProcess(tmp_path / "store.duckdb") as server:
        trace_id = unique_trace_id()
        spans = [span_json(trace_id, i) for i in range(IN_PROCESS_SPANS + 1)]  # more than a child would take
        spans[0].pop("parentSpanId", None)
        assert post(f"{server.http_url}/v1/traces", traces_proto(spans)).status == 200
        deadline = time.monotonic() + 30
        while not query(server.http_url, "SELECT count(*) FROM traces WHERE trace_id = ?", [trace_id])[0][0]:
            assert time.monotonic() < deadline, "the trace's trajectory was never built"
            time.sleep(0.1)
        assert psutil.Process(server.pid).children(recursive=True) == []
        # the settings themselves are not readable through the query sandbox: test_store_writes checks them
        assert server.terminate() == 0


def _invoke_serve(args: list[str], env: dict[str, str] | None = None) -> Any:
    return CliRunner().invoke(serve_command, args, env=env)


def test_serve_rejects_bad_settings_clearly(tmp_path: Path) -> None:
    store = str(tmp_path / "s.duckdb")
    cases = [
        (["--store", store, "--tls-cert", str(tmp_path / "cert.pem")], "TLS needs both --tls-cert and --tls-key"),
        (["--store", store, "--max-request-bytes", "lots"], "is not a size"),
        (["--store", store, "--grpc-port", "70000"], "--grpc-port (TRACEGRADE_GRPC_PORT)"),
        (["--store", store, "--worker-rules", str(tmp_path / "missing.yaml")], "does not exist"),
    ]
    for args, fragment in cases:
        result = _invoke_serve(args)
        assert result.exit_code == 2, result.output
        assert fragment in result.output
    # the check runs before every command (the group's callback), so the command is invoked through it
    result = CliRunner().invoke(cli, ["serve", "--store", store], env={"TRACEGRADE_GRPC_PROT": "1"})
    assert result.exit_code == 2
    assert "did you mean TRACEGRADE_GRPC_PORT" in result.output


def test_serve_reports_a_port_in_use(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = _invoke_serve(["--store", str(tmp_path / "s.duckdb"), "--http-port", str(port), "--grpc-port", "0"])
    assert result.exit_code == 2, result.output
    assert "cannot listen for OTLP/HTTP" in result.output
    assert not (tmp_path / "s.duckdb.server.json").exists()


def test_settings_take_size_units_and_every_setting_has_an_env_var(tmp_path: Path) -> None:
    from tracegrade.ingest.settings import ENV_VARS, ServeSettings

    values = {"store": tmp_path / "e.duckdb", "max_request_bytes": "2MiB", "queue_spans": "9"}
    settings = ServeSettings.build(values)
    assert (settings.max_request_bytes, settings.queue_spans) == (2 * 1024 * 1024, 9)
    assert settings.sidecar_path == tmp_path / "e.duckdb.server.json"
    assert set(ENV_VARS) == set(ServeSettings.model_fields)
