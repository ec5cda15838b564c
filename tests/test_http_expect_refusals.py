"""An OTLP/HTTP export whose client waits for ``100 Continue`` and that is refused before its body is asked for is
answered at once with ``Connection: close``, and its connection closed: whatever refuses it, a middleware (several
``Authorization`` headers, the host guard, the failed-authentication limit), the export handler (no token, a wrong
one, a body declared too large, an unsupported type) or the route's ``Expect`` handler (an expectation other than
``100-continue``: 417). Before, the refusals of the middlewares and the 417 left the connection open with no
``Connection: close``: aiohttp waited up to 10 s for the body the client was never told to send, and a client that
sent its next request on that connection had it read as that body. The handler's refusals closed it already: those
cases guard that they still do, now that the outermost middleware closes for all.

An export that passes gets ``100 Continue``, and its body sent then is stored, its connection still usable.
A real receiver on loopback, raw sockets for the clients.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp import web

from tests.support.raw_http import first_answer, request_head
from tests.support.server_inprocess import RunningServer, running_server
from tests.support.server_requests import count_spans, span_json, traces_proto, unique_trace_id
from tests.support.slow_senders import ANSWER_WAIT
from tests.support.waiting import wait_for_value
from tracegrade.ingest.expect_continue import close_unless_continued, defer_continue

TOKEN = "expect-continue-token-0123456789"
AUTH = f"Authorization: Bearer {TOKEN}"
EXPECT = "Expect: 100-continue"
FAILURES_ALLOWED = 2  # --auth-failure-limit
MAX_REQUEST_BYTES = 1024 * 1024

# (path, headers, status line, what the refusal says) of exports refused before their bodies are asked for
REFUSED_UNREAD = [
    pytest.param(
        "/v1/traces",
        (AUTH, AUTH.replace(TOKEN, "another")),
        b"HTTP/1.1 401 Unauthorized",
        b"several Authorization headers",
        id="several-authorization-headers",
    ),
    pytest.param(
        "/v1/logs",
        (AUTH, "Host: rebinding.example"),
        b"HTTP/1.1 421 Misdirected Request",
        b"answers requests for localhost only",
        id="host-guard",
    ),
    pytest.param("/v1/traces", (), b"HTTP/1.1 401 Unauthorized", b"missing bearer token", id="no-token"),
    pytest.param(
        "/v1/logs",
        (AUTH, "Content-Type: text/plain"),
        b"HTTP/1.1 415 Unsupported Media Type",
        b"unsupported Content-Type",
        id="unsupported-type",
    ),
]


Answer = tuple[bytes, dict[str, str], bytes, bytes]  # status line, headers, body, what came after it


def _refused_unread(
    server: RunningServer, path: str, headers: tuple[str, ...], length: int = 100, expect: str = EXPECT
) -> Answer:
    """Send an export's headers with ``expect`` and no body; its answer, and what the connection held after it
    (b"": the receiver closed it)."""
    with socket.create_connection(("127.0.0.1", server.server.http_port or 0), timeout=ANSWER_WAIT) as client:
        client.sendall(request_head(path, length, expect, *headers))
        status, answer_headers, body = first_answer(client)  # answered before the client sent anything more
        return status, answer_headers, body, client.recv(1)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    store = tmp_path_factory.mktemp("expect") / "traces.duckdb"
    with running_server(store, token=TOKEN, max_request_bytes=MAX_REQUEST_BYTES) as running:
        yield running


@pytest.mark.parametrize(("path", "headers", "status", "says"), REFUSED_UNREAD)
def test_an_export_refused_before_its_body_is_asked_for_is_answered_at_once_and_its_connection_closed(
    server: RunningServer, path: str, headers: tuple[str, ...], status: bytes, says: bytes
) -> None:
    got, answer_headers, body, closed = _refused_unread(server, path, headers)
    assert got == status, body
    assert says in body, body
    assert answer_headers["connection"] == "close", answer_headers
    assert closed == b""


def test_a_body_declared_too_large_is_refused_unread(server: RunningServer) -> None:
    status, headers, body, closed = _refused_unread(server, "/v1/traces", (AUTH,), MAX_REQUEST_BYTES + 1)
    assert status == b"HTTP/1.1 413 Request Entity Too Large", body
    assert b"the limit is" in body
    assert (headers["connection"], closed) == ("close", b"")


def test_an_unsupported_expectation_is_refused_unread(server: RunningServer) -> None:
    status, headers, body, closed = _refused_unread(server, "/v1/traces", (AUTH,), expect="Expect: 200-ok")
    assert status == b"HTTP/1.1 417 Expectation Failed", body
    assert b"send 'Expect: 100-continue' or none" in body
    assert (headers["connection"], closed) == ("close", b"")


def test_a_refused_client_that_sent_its_body_without_waiting_keeps_its_connection(server: RunningServer) -> None:
    """One that asked but sent its body at once (curl does after 1 s): the body is thrown away as it arrives and the
    connection carries the next request. Closed under a client still sending, its send fails, and a client library
    reports that instead of the refusal."""
    body = b"x" * 100
    with socket.create_connection(("127.0.0.1", server.server.http_port or 0), timeout=ANSWER_WAIT) as client:
        client.sendall(request_head("/v1/traces", len(body), EXPECT) + body)
        status, headers, answer = first_answer(client)
        assert status == b"HTTP/1.1 401 Unauthorized", answer
        assert headers.get("connection") != "close"
        client.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert first_answer(client)[0] == b"HTTP/1.1 200 OK"


async def _raises_forbidden(request: web.Request) -> web.Response:
    raise web.HTTPForbidden(text="refused by a raised answer")


def test_a_refusal_raised_as_an_http_exception_closes_the_waiting_clients_connection() -> None:
    """aiohttp sends a raised HTTPException itself, after every middleware, and keeps the connection."""
    app = web.Application(middlewares=[close_unless_continued])
    app.router.add_post("/v1/traces", _raises_forbidden, expect_handler=defer_continue)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    runner = web.AppRunner(app)
    asyncio.run_coroutine_threadsafe(runner.setup(), loop).result()
    try:
        site = web.SockSite(runner, socket.create_server(("127.0.0.1", 0)))
        asyncio.run_coroutine_threadsafe(site.start(), loop).result()
        port = int(site.name.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=ANSWER_WAIT) as client:
            client.sendall(request_head("/v1/traces", 100, EXPECT))
            status, headers, body = first_answer(client)
            assert status == b"HTTP/1.1 403 Forbidden", body
            assert (headers["connection"], client.recv(1)) == ("close", b"")
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result()
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()


def test_an_export_that_passes_is_told_to_go_on_stored_and_its_connection_kept(server: RunningServer) -> None:
    trace_id = unique_trace_id()
    export = traces_proto([span_json(trace_id, index) for index in range(3)])
    with socket.create_connection(("127.0.0.1", server.server.http_port or 0), timeout=ANSWER_WAIT) as client:
        client.sendall(request_head("/v1/traces", len(export), EXPECT, AUTH))
        assert first_answer(client)[0] == b"HTTP/1.1 100 Continue"
        client.sendall(export)
        status, headers, body = first_answer(client)
        assert status == b"HTTP/1.1 200 OK", body
        assert headers.get("connection") != "close"
        client.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert first_answer(client)[0] == b"HTTP/1.1 200 OK"
    wait_for_value(lambda: count_spans(server.http_url, trace_id, TOKEN), 3, "the exported spans stored")


def test_an_address_over_the_failed_authentication_limit_is_refused_unread(tmp_path: Path) -> None:
    """Its own receiver: the limit, once reached, refuses every request from the address (127.0.0.1)."""
    with running_server(tmp_path / "traces.duckdb", token=TOKEN, auth_failure_limit=FAILURES_ALLOWED) as throttled:
        for guess in range(FAILURES_ALLOWED):  # wrong tokens, each refused unread and counted
            status, headers, _, closed = _refused_unread(throttled, "/v1/traces", (f"Authorization: Bearer {guess}",))
            assert (status, headers["connection"], closed) == (b"HTTP/1.1 401 Unauthorized", "close", b"")
        status, headers, body, closed = _refused_unread(throttled, "/v1/traces", (AUTH,))
    assert status == b"HTTP/1.1 429 Too Many Requests", body
    assert b"too many wrong credentials" in body
    assert int(headers["retry-after"]) >= 1
    assert (headers["connection"], closed) == ("close", b"")
