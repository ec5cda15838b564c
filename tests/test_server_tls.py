"""TLS on both protocols: a self-signed certificate for 127.0.0.1, trusted by the real OTLP exporters."""

from __future__ import annotations

import shutil
import ssl
import subprocess
import urllib.request
from pathlib import Path

import grpc
import pytest
from click.testing import CliRunner
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.support.server_inprocess import running_server
from tracegrade.cli.main import cli
from tracegrade.store import TraceStore


def _self_signed(directory: Path) -> tuple[Path, Path]:
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is needed to make a test certificate")
    directory.mkdir(parents=True, exist_ok=True)
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


def test_both_protocols_serve_tls_with_the_given_certificate(tmp_path: Path) -> None:
    cert, key = _self_signed(tmp_path)
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    with provider.get_tracer("tests.tls").start_as_current_span("over tls"):
        provider.get_tracer("tests.tls").start_span("child").end()
    spans = memory.get_finished_spans()

    with running_server(tmp_path / "tls.duckdb", tls_cert=cert, tls_key=key) as server:
        assert server.http_url.startswith("https://")
        credentials = grpc.ssl_channel_credentials(root_certificates=cert.read_bytes())
        grpc_exporter = GrpcSpanExporter(endpoint=server.grpc_target, credentials=credentials, insecure=False)
        http_exporter = HttpSpanExporter(endpoint=f"{server.http_url}/v1/traces", certificate_file=str(cert))
        assert grpc_exporter.export(spans[:1]) == SpanExportResult.SUCCESS
        assert http_exporter.export(spans[1:]) == SpanExportResult.SUCCESS
        with pytest.raises(OSError):  # plain HTTP is not answered on the TLS port
            urllib.request.urlopen(server.http_url.replace("https://", "http://") + "/healthz", timeout=10)
        context = ssl.create_default_context(cafile=str(cert))
        with urllib.request.urlopen(server.http_url + "/ui/", timeout=10, context=context) as page:
            assert page.headers["Strict-Transport-Security"] == "max-age=31536000"  # browsers keep to HTTPS

    reader = TraceStore(tmp_path / "tls.duckdb", read_only=True)
    try:
        assert reader.query("SELECT count(*) FROM spans").rows == [(2,)]
    finally:
        reader.close()


def test_a_bad_certificate_or_key_is_named_before_any_port_is_bound(tmp_path: Path) -> None:
    first = _self_signed(tmp_path / "first")
    second = _self_signed(tmp_path / "second")
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate\n")
    cases = [
        ((first[0], second[1]), "the key does not belong to the certificate"),
        ((junk, junk), f"--tls-cert {junk} holds no PEM certificate"),
        ((first[1], first[0]), f"--tls-cert {first[1]} holds no PEM certificate (the two files look swapped)"),
        ((first[0], junk), f"--tls-key {junk} holds no PEM private key"),
    ]
    for (cert, key), problem in cases:
        store = tmp_path / "store.duckdb"
        args = ["serve", "--store", str(store), "--grpc-port", "0", "--http-port", "0"]
        result = CliRunner().invoke(cli, [*args, "--tls-cert", str(cert), "--tls-key", str(key)])
        assert result.exit_code == 2, result.output
        assert f"cannot serve TLS with --tls-cert {cert} and --tls-key {key}: {problem}" in result.stderr
        assert "port" not in result.stderr
