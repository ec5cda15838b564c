"""The limit on wrong credentials, through a real receiver on loopback.

Clients bind to other loopback addresses (127.0.0.2, 127.0.0.3) to be other clients: HTTP with
``source_address``, gRPC through a small TCP relay that connects from the address given (grpc cannot pick its
source address). An address that presents ``--auth-failure-limit`` wrong tokens, over gRPC and HTTP together,
gets 429 with ``Retry-After`` / ``RESOURCE_EXHAUSTED`` with a ``RetryInfo`` for every request, a right token
included, until its window ends; the real OTLP exporters of another address are served all along, and the
throttled address is served again once the window is over. The window is driven by replacing the limiter's
clock, never by waiting.
"""

from __future__ import annotations

import http.client
import json
import logging
import socket
import threading
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import grpc
import pytest
from click.testing import CliRunner
from google.rpc import error_details_pb2
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter

from tests.support.server_inprocess import RunningServer, running_server
from tests.support.server_otlp import HttpReply
from tests.support.server_requests import span_json, traces_proto, unique_trace_id
from tests.support.tenant_traffic import export_one_span, stored_trace_ids
from tests.support.waiting import wait_until
from tracegrade.cli.main import cli
from tracegrade.errors import ConfigError
from tracegrade.ingest.auth_throttle import AuthThrottle, TooManyAuthFailures
from tracegrade.ingest.client_address import TrustedProxies
from tracegrade.ingest.settings import ServeSettings

GOOD = "the-right-token-0123456789"
TRACE_EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
RETRY_INFO_KEY = "google.rpc.retryinfo-bin"
THROTTLE_LOG = "tracegrade.ingest.auth_throttle"


class Clock:
    """The limiter's clock, moved on by the test."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@contextmanager
def _server(tmp_path: Path, **settings: object) -> Iterator[tuple[RunningServer, Clock]]:
    """A receiver with ``--token GOOD`` whose limiter runs on a test clock."""
    with running_server(tmp_path / "store.duckdb", token=GOOD, **settings) as server:
        throttle = server.server.auth_throttle
        assert isinstance(throttle, AuthThrottle)
        clock = Clock()
        throttle.clock = clock
        yield server, clock


def _http(
    server: RunningServer,
    path: str,
    *,
    source: str = "127.0.0.1",
    token: str | None = None,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
    method: str = "POST",
) -> HttpReply:
    """One HTTP request to the receiver from the loopback address ``source``."""
    port = server.server.http_port
    assert port is not None
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30, source_address=(source, 0))
    sent = {"Content-Type": "application/x-protobuf", **(headers or {})}
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"
    if body is None and method == "POST":
        body = traces_proto([span_json(unique_trace_id(), 0)])
    try:
        connection.request(method, path, body=body, headers=sent)
        response = connection.getresponse()
        return HttpReply(response.status, dict(response.getheaders()), response.read())
    finally:
        connection.close()


@contextmanager
def _relay(server: RunningServer, source: str) -> Iterator[str]:
    """A gRPC target whose connections reach the receiver's gRPC port from the loopback address ``source``."""
    port = server.server.grpc_port
    assert port is not None
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    open_sockets: list[socket.socket] = [listener]
    stopping = threading.Event()

    def pump(source_socket: socket.socket, target: socket.socket) -> None:
        with suppress(OSError):
            while data := source_socket.recv(65536):
                target.sendall(data)
        with suppress(OSError):
            target.shutdown(socket.SHUT_WR)

    def accept() -> None:
        while not stopping.is_set():
            try:
                client, _ = listener.accept()
            except (TimeoutError, OSError):
                continue
            upstream = socket.create_connection(("127.0.0.1", port), timeout=30, source_address=(source, 0))
            client.settimeout(None)
            upstream.settimeout(None)
            open_sockets.extend((client, upstream))
            threading.Thread(target=pump, args=(client, upstream), daemon=True).start()
            threading.Thread(target=pump, args=(upstream, client), daemon=True).start()

    acceptor = threading.Thread(target=accept, daemon=True)
    acceptor.start()
    try:
        yield f"127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stopping.set()
        acceptor.join(10)
        for sock in open_sockets:
            with suppress(OSError):
                sock.close()


def _grpc_export(target: str, token: str) -> grpc.RpcError | None:
    """Export one span over gRPC to ``target`` with ``token``: the error, or None when it was accepted."""
    body = traces_proto([span_json(unique_trace_id(), 0)])
    with grpc.insecure_channel(target) as channel:
        try:
            channel.unary_unary(TRACE_EXPORT)(body, metadata=(("authorization", f"Bearer {token}"),), timeout=30)
        except grpc.RpcError as error:
            return error
    return None


def _metric(server: RunningServer, name: str, protocol: str) -> float:
    page = _http(server, "/metrics", method="GET").body.decode()
    prefix = f'tracegrade_receiver_{name}{{protocol="{protocol}"}} '
    return next((float(line.removeprefix(prefix)) for line in page.splitlines() if line.startswith(prefix)), 0.0)


def _warnings(caplog: pytest.LogCaptureFixture, address: str) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == THROTTLE_LOG and r.levelno == logging.WARNING and f" {address} " in r.getMessage()
    ]


def _retry_delay(error: grpc.RpcError) -> float:
    trailers = dict(error.trailing_metadata() or ())  # type: ignore[attr-defined]
    info = error_details_pb2.RetryInfo.FromString(trailers[RETRY_INFO_KEY])
    return info.retry_delay.seconds + info.retry_delay.nanos / 1e9


def test_an_address_that_guesses_is_refused_on_both_ports_until_its_window_ends_and_others_are_served(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger=THROTTLE_LOG)
    with _server(tmp_path, auth_failure_window=300) as (server, clock), _relay(server, "127.0.0.2") as from_two:
        # ten wrong tokens (the default limit) from 127.0.0.2, half over HTTP and half over gRPC
        for guess in range(5):
            assert _http(server, "/v1/traces", source="127.0.0.2", token=f"guess-http-{guess}").status == 401
            error = _grpc_export(from_two, f"guess-grpc-{guess}")
            assert error is not None and error.code() is grpc.StatusCode.UNAUTHENTICATED
        clock.now += 10

        # now every request from 127.0.0.2 is refused, the right token too, on every endpoint that takes one
        refused = _http(server, "/v1/traces", source="127.0.0.2", token=GOOD)
        assert refused.status == 429, refused.body
        assert refused.headers["Retry-After"] == "290"
        error = _grpc_export(from_two, GOOD)
        assert error is not None and error.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "too many wrong credentials from 127.0.0.2" in (error.details() or "")
        assert _retry_delay(error) == pytest.approx(290)
        query = json.dumps({"sql": "SELECT 1"}).encode()
        sent = {"Content-Type": "application/json"}
        assert _http(server, "/v1/query", source="127.0.0.2", token=GOOD, body=query, headers=sent).status == 429
        assert _http(server, "/ui/", source="127.0.0.2", method="GET").status == 429
        assert _http(server, "/mcp", source="127.0.0.2", token=GOOD, body=b"{}", headers=sent).status == 429
        assert _http(server, "/healthz", source="127.0.0.2", method="GET").status == 200  # health checks pass

        # one warning, when the limit was reached, names the address and the count; more refusals within the
        # minute add none
        (warning,) = _warnings(caplog, "127.0.0.2")
        assert "10 wrong credentials" in warning
        for _ in range(3):
            assert _http(server, "/v1/traces", source="127.0.0.2", token="yet-another-guess").status == 429
        assert len(_warnings(caplog, "127.0.0.2")) == 1
        clock.now += 61
        assert _http(server, "/v1/traces", source="127.0.0.2", token=GOOD).status == 429
        assert len(_warnings(caplog, "127.0.0.2")) == 2

        # another address is never refused: the real exporters with the right token are served throughout
        by_grpc = export_one_span(
            GrpcSpanExporter(
                endpoint=server.grpc_target, insecure=True, headers=(("authorization", f"Bearer {GOOD}"),)
            ),
            "throttle-test",
            "grpc",
        )
        by_http = export_one_span(
            HttpSpanExporter(endpoint=f"{server.http_url}/v1/traces", headers={"Authorization": f"Bearer {GOOD}"}),
            "throttle-test",
            "http",
        )
        wait_until(
            lambda: {by_grpc, by_http} <= stored_trace_ids(server.http_url, GOOD),
            "the other address's spans stored",
            30,
        )
        assert _http(server, "/v1/traces", source="127.0.0.3", token=GOOD).status == 200

        # once the window is over, the right token from 127.0.0.2 is served again, over both protocols
        clock.now += 300
        assert _http(server, "/v1/traces", source="127.0.0.2", token=GOOD).status == 200
        assert _grpc_export(from_two, GOOD) is None

        assert _metric(server, "auth_failures_total", "http") == 5
        assert _metric(server, "auth_failures_total", "grpc") == 5
        assert _metric(server, "auth_throttled_total", "http") == 8
        assert _metric(server, "auth_throttled_total", "grpc") == 1


def test_a_repeated_wrong_token_counts_once_and_a_request_without_one_not_at_all(tmp_path: Path) -> None:
    with _server(tmp_path, auth_failure_limit=3) as (server, _):
        # an exporter left with a rotated-away token, retrying: never refused for it
        for _ in range(12):
            assert _http(server, "/v1/traces", source="127.0.0.2", token="rotated-away-token").status == 401
        # a browser's first visits, with no credential, guessed nothing
        for _ in range(12):
            assert _http(server, "/ui/", source="127.0.0.2", method="GET").status == 401
        assert _http(server, "/v1/traces", source="127.0.0.2", token=GOOD).status == 200
        # a success does not buy fresh guesses: two more distinct ones reach the limit of three
        assert _http(server, "/v1/traces", source="127.0.0.2", token="second-guess").status == 401
        assert _http(server, "/v1/traces", source="127.0.0.2", token="third-guess").status == 401
        assert _http(server, "/v1/traces", source="127.0.0.2", token=GOOD).status == 429


def test_ui_sign_ins_and_cookies_count_as_guesses(tmp_path: Path) -> None:
    with _server(tmp_path, auth_failure_limit=3) as (server, _):
        form = {"Content-Type": "application/x-www-form-urlencoded", "Sec-Fetch-Site": "same-origin"}
        for guess in ("one", "two"):
            body = urllib.parse.urlencode({"token": f"sign-in-{guess}", "next": "/ui/"}).encode()
            assert _http(server, "/ui/login", source="127.0.0.3", body=body, headers=form).status == 401
        cookie = {"Cookie": "tracegrade_ui_session=s1.made-up-session"}
        assert _http(server, "/ui/api/traces", source="127.0.0.3", method="GET", headers=cookie).status == 401
        body = urllib.parse.urlencode({"token": GOOD, "next": "/ui/"}).encode()
        assert _http(server, "/ui/login", source="127.0.0.3", body=body, headers=form).status == 429
        assert _http(server, "/ui/login", source="127.0.0.2", body=body, headers=form).status == 303


def test_x_forwarded_for_is_believed_only_from_a_trusted_proxy(tmp_path: Path) -> None:
    # by default the header is ignored: rotating it does not escape the limit
    with _server(tmp_path, auth_failure_limit=3) as (server, _):
        for guess in range(3):
            sent = {"X-Forwarded-For": f"198.51.100.{guess}"}
            assert _http(server, "/v1/traces", source="127.0.0.2", token=f"g{guess}", headers=sent).status == 401
        sent = {"X-Forwarded-For": "198.51.100.99"}
        assert _http(server, "/v1/traces", source="127.0.0.2", token=GOOD, headers=sent).status == 429

    # behind a trusted proxy, the client is the address the proxy appended, not the proxy nor what the client wrote
    with _server(tmp_path, auth_failure_limit=3, trusted_proxies="127.0.0.2") as (server, _):
        for guess in range(3):
            sent = {"X-Forwarded-For": f"10.9.9.{guess}, 203.0.113.7"}  # the left entry is the client's own
            assert _http(server, "/v1/traces", source="127.0.0.2", token=f"g{guess}", headers=sent).status == 401
        sent = {"X-Forwarded-For": "203.0.113.7"}
        assert _http(server, "/v1/traces", source="127.0.0.2", token=GOOD, headers=sent).status == 429
        sent = {"X-Forwarded-For": "203.0.113.8"}
        assert _http(server, "/v1/traces", source="127.0.0.2", token=GOOD, headers=sent).status == 200
        assert _http(server, "/v1/traces", source="127.0.0.2", token=GOOD).status == 200  # the proxy itself
        # an untrusted peer's header is still ignored
        sent = {"X-Forwarded-For": "203.0.113.7"}
        assert _http(server, "/v1/traces", source="127.0.0.3", token=GOOD, headers=sent).status == 200


def test_the_limit_can_be_turned_off(tmp_path: Path) -> None:
    with _server(tmp_path, auth_failure_limit=0) as (server, _):
        for guess in range(15):
            assert _http(server, "/v1/traces", source="127.0.0.2", token=f"guess-{guess}").status == 401
        assert _http(server, "/v1/traces", source="127.0.0.2", token=GOOD).status == 200


def test_the_table_of_addresses_is_bounded() -> None:
    clock = Clock()
    throttle = AuthThrottle(2, 60.0, clock=clock, max_clients=100)
    for n in range(1000):
        address = throttle.client(f"10.0.{n // 256}.{n % 256}")
        throttle.check(address, "http")
        throttle.failed(address, f"guess-{n}", "http")
    assert throttle.tracked == 100
    # an IPv6 host counts by its /64, however many of its addresses it uses
    for n in range(50):
        throttle.failed(throttle.client(f"2001:db8:1:2::{n:x}"), f"v6-guess-{n}", "http")
    assert throttle.client("2001:db8:1:2::ffff") == "2001:db8:1:2::/64"
    with pytest.raises(TooManyAuthFailures, match="too many wrong credentials from 2001:db8:1:2::/64"):
        throttle.check("2001:db8:1:2::/64", "http")


def test_trusted_proxies_are_checked_and_documented() -> None:
    with pytest.raises(ConfigError, match=r"--trusted-proxies \(TRACEGRADE_TRUSTED_PROXIES\).*'10\.0\.0\.x'"):
        ServeSettings.build({"store": "s.duckdb", "trusted_proxies": "10.0.0.1, 10.0.0.x"})
    assert TrustedProxies.parse("10.0.0.0/8, fd00::/8").client_of("10.1.2.3", ["192.0.2.1"]) == "192.0.2.1"
    assert TrustedProxies.parse(None).client_of("10.1.2.3", ["192.0.2.1"]) == "10.1.2.3"
    help_text = " ".join(CliRunner().invoke(cli, ["serve", "--help"]).output.split())
    for flag in ("--auth-failure-limit", "--auth-failure-window", "--trusted-proxies"):
        assert flag in help_text
    assert "(default: 10)" in help_text and "TRACEGRADE_AUTH_FAILURE_LIMIT" in help_text
