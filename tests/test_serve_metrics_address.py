"""``serve --metrics-address``: the receiver's /metrics, whose series name tenants, moves off the OTLP/HTTP port.

On the port tenants reach, any caller could read every tenant's name and counts (no token: Prometheus scrapes it).
With the option the page is served on the operator's address only, and the OTLP/HTTP port answers 404 saying
where it went. A real ``tracegrade serve`` with two tenants; spans sent by the OpenTelemetry SDK's exporters."""

from __future__ import annotations

import re
import socket
from pathlib import Path

from tests.support.grading_cli import run_cli
from tests.support.server_otlp import get_text
from tests.support.server_process import ServerProcess
from tests.support.tenant_traffic import ACME_TOKENS, GLOBEX_TOKEN, send_agent_traces, write_tokens
from tests.support.waiting import wait_until

_BANNER = re.compile(r"metrics +(http://127\.0\.0\.1:\d+/metrics)")


def _metrics_url(server: ServerProcess) -> str:
    wait_until(lambda: _BANNER.search(server.log()), "the banner naming the metrics address")
    found = _BANNER.search(server.log())
    assert found is not None
    return found.group(1)


def test_metrics_naming_tenants_are_served_on_the_metrics_address_only(tmp_path: Path) -> None:
    tokens = write_tokens(tmp_path / "tokens.yaml", {"acme": list(ACME_TOKENS), "globex": [GLOBEX_TOKEN]})
    extra = ("--tokens", str(tokens), "--metrics-address", "127.0.0.1:0")
    with ServerProcess(tmp_path / "s.duckdb", extra_args=extra) as server:
        send_agent_traces("acme", "m1", http_url=server.http_url, token=ACME_TOKENS[0])
        send_agent_traces("globex", "m2", grpc_target=server.grpc_target, token=GLOBEX_TOKEN)
        status, text = get_text(f"{server.http_url}/metrics")
        assert status == 404 and "--metrics-address" in text
        assert "tracegrade_receiver_" not in text and "acme" not in text
        metrics = _metrics_url(server)
        assert not metrics.startswith(server.http_url)
        status, text = get_text(metrics)
        assert status == 200
        spans = [line for line in text.splitlines() if line.startswith("tracegrade_receiver_spans_received_total")]
        assert spans and sum(float(line.rsplit(" ", 1)[1]) for line in spans) > 0
        status, _ = get_text(f"{server.http_url}/healthz")  # the probes stay where they were
        assert status == 200


def test_without_the_option_metrics_stay_on_the_http_port(tmp_path: Path) -> None:
    with ServerProcess(tmp_path / "s.duckdb") as server:
        status, text = get_text(f"{server.http_url}/metrics")
        assert status == 200 and "tracegrade_receiver_" in text
        assert not _BANNER.search(server.log())


def test_a_metrics_address_that_cannot_be_used_is_refused_at_start(tmp_path: Path) -> None:
    malformed = run_cli("serve", "--store", tmp_path / "a.duckdb", "--metrics-address", "localhost")
    assert malformed.exit_code == 2
    assert "--metrics-address 'localhost': expected HOST:PORT" in malformed.stderr
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        busy = run_cli(
            "serve", "--store", tmp_path / "b.duckdb", "--grpc-port", "0", "--http-port", "0",
            "--metrics-address", f"127.0.0.1:{port}",
        )  # fmt: skip
    assert busy.exit_code != 0
    assert f"cannot serve /metrics on 127.0.0.1:{port}" in busy.stderr and "--metrics-address" in busy.stderr
    assert "Traceback" not in busy.stderr
