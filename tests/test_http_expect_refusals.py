"""A POST whose client waits for ``100 Continue`` and that is refused before its body is asked for is answered at once
with ``Connection: close``, and its connection closed: whatever refuses it, a middleware (several ``Authorization``
headers, the host guard, the failed-authentication limit), the handler (no token, a wrong one, a token without the
scope, a body declared too large, an unsupported type) or the route's ``Expect`` handler (an expectation other than
``100-continue``: 417). That holds on every POST route: the exports, and the query, forget, purge, rebuild, runs,
MCP and UI routes, the UI on a port of its own (``tracegrade ui``) too. Before, every route but the exports had
aiohttp answer ``100 Continue`` before any check, so a refused client uploaded its whole body first.

A request that passes gets ``100 Continue``, and its body sent then is read and answered (an export's is stored, its
connection still usable). A real receiver on loopback, raw sockets for the clients.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from aiohttp import web

from tests.support.raw_http import first_answer, request_head
from tests.support.server_inprocess import RunningServer, running_server
from tests.support.server_requests import count_spans, span_json, traces_proto, unique_trace_id
from tests.support.slow_senders import ANSWER_WAIT
from tests.support.waiting import wait_for_value
from tracegrade.ingest.expect_continue import close_unless_continued, defer_continue
from tracegrade.ui import add_ui_routes

TOKEN = "expect-continue-token-0123456789"
READER = "expect-continue-reader-012345678"  # a token of the read scope alone
AUTH = f"Authorization: Bearer {TOKEN}"
READER_AUTH = f"Authorization: Bearer {READER}"
EXPECT = "Expect: 100-continue"
JSON = "Content-Type: application/json"
TEXT = "Content-Type: text/plain"
FORM = "Content-Type: application/x-www-form-urlencoded"
MCP_ACCEPT = "Accept: application/json, text/event-stream"
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
    pytest.param("/v1/query", (JSON,), b"HTTP/1.1 401 Unauthorized", b"missing bearer token", id="query-no-token"),
    pytest.param(
        "/v1/query", (AUTH, TEXT), b"HTTP/1.1 415 Unsupported Media Type", b"as application/json", id="query-type"
    ),
    pytest.param(
        "/v1/forget", (READER_AUTH, JSON), b"HTTP/1.1 403 Forbidden", b"scopes include 'forget'", id="forget-scope"
    ),
    pytest.param(
        "/v1/purge", (AUTH, TEXT), b"HTTP/1.1 415 Unsupported Media Type", b"application/json", id="purge-type"
    ),
    pytest.param(
        "/v1/rebuild", (READER_AUTH, JSON), b"HTTP/1.1 403 Forbidden", b"scopes include 'record'", id="rebuild-scope"
    ),
    pytest.param("/v1/runs", (JSON,), b"HTTP/1.1 401 Unauthorized", b"missing bearer token", id="runs-no-token"),
    pytest.param("/mcp", (JSON, MCP_ACCEPT), b"HTTP/1.1 401 Unauthorized", b"missing bearer token", id="mcp-no-token"),
    pytest.param("/ui/api/sql", (JSON,), b"HTTP/1.1 401 Unauthorized", b"bearer token", id="ui-sql-no-token"),
    pytest.param("/ui/api/sql", (AUTH, TEXT), b"HTTP/1.1 400 Bad Request", b"application/json", id="ui-sql-type"),
]

# (path, headers, what the refusal says) of requests whose bodies are declared larger than the receiver takes
DECLARED_TOO_LARGE = [
    pytest.param("/v1/traces", (AUTH,), b"the limit is", id="export"),
    pytest.param("/v1/query", (AUTH, JSON), b"the query body is too large", id="query"),
    pytest.param("/v1/runs", (AUTH, JSON), b"too large for this server", id="runs"),
    pytest.param("/mcp", (AUTH, JSON, MCP_ACCEPT), b"Maximum request body size", id="mcp"),
    pytest.param("/ui/api/sql", (AUTH, JSON), b"Maximum request body size", id="ui-sql"),
]

# (path, headers, body, status line) of requests that pass every check that needs no body
CONTINUED = [
    pytest.param("/v1/query", (AUTH, JSON), {"sql": "SELECT 1"}, b"HTTP/1.1 200 OK", id="query"),
    pytest.param("/v1/forget", (AUTH, JSON), {"trace_ids": ["0" * 31 + "1"]}, b"HTTP/1.1 200 OK", id="forget"),
    pytest.param("/v1/purge", (AUTH, JSON), {}, b"HTTP/1.1 200 OK", id="purge"),
    pytest.param("/v1/rebuild", (AUTH, JSON), {}, b"HTTP/1.1 200 OK", id="rebuild"),
    # the body is read, and found wanting: a 400 saying what it lacks
    pytest.param("/v1/runs", (AUTH, JSON), {"kind": "live"}, b"HTTP/1.1 400 Bad Request", id="runs"),
    pytest.param(
        "/mcp",
        (AUTH, JSON, MCP_ACCEPT, "Host: 127.0.0.1:{port}"),  # the MCP SDK wants the port in it
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        b"HTTP/1.1 200 OK",
        id="mcp",
    ),
    pytest.param("/ui/api/sql", (AUTH, JSON), {"sql": "SELECT 1"}, b"HTTP/1.1 200 OK", id="ui-sql"),
    pytest.param("/ui/login", (FORM,), f"token={TOKEN}", b"HTTP/1.1 303 See Other", id="sign-in"),
]


Answer = tuple[bytes, dict[str, str], bytes, bytes]  # status line, headers, body, what came after it


def _port(server: RunningServer | int) -> int:
    return server if isinstance(server, int) else server.server.http_port or 0


def _refused_unread(
    server: RunningServer | int, path: str, headers: tuple[str, ...], length: int = 100, expect: str = EXPECT
) -> Answer:
    """Send a POST's headers with ``expect`` and no body (to ``server``, or a port); its answer, and what the
    connection held after it (b"": the receiver closed it)."""
    with socket.create_connection(("127.0.0.1", _port(server)), timeout=ANSWER_WAIT) as client:
        client.sendall(request_head(path, length, expect, *headers))
        status, answer_headers, body = first_answer(client)  # answered before the client sent anything more
        return status, answer_headers, body, client.recv(1)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    folder = tmp_path_factory.mktemp("expect")
    tokens = folder / "tokens.yaml"
    entries = [TOKEN, {"token": READER, "scopes": ["read"]}]
    tokens.write_text(json.dumps({"tenants": {"acme": entries}}), encoding="utf-8")  # JSON is YAML
    with running_server(folder / "traces.duckdb", tokens=tokens, max_request_bytes=MAX_REQUEST_BYTES) as running:
        yield running


@pytest.mark.parametrize(("path", "headers", "status", "says"), REFUSED_UNREAD)
def test_a_post_refused_before_its_body_is_asked_for_is_answered_at_once_and_its_connection_closed(
    server: RunningServer, path: str, headers: tuple[str, ...], status: bytes, says: bytes
) -> None:
    got, answer_headers, body, closed = _refused_unread(server, path, headers)
    assert got == status, body
    assert says in body, body
    assert answer_headers["connection"] == "close", answer_headers
    assert closed == b""


@pytest.mark.parametrize(("path", "headers", "says"), DECLARED_TOO_LARGE)
def test_a_body_declared_too_large_is_refused_unread(
    server: RunningServer, path: str, headers: tuple[str, ...], says: bytes
) -> None:
    status, headers, body, closed = _refused_unread(server, path, headers, MAX_REQUEST_BYTES + 1)
    assert status == b"HTTP/1.1 413 Request Entity Too Large", body
    assert says in body, body
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


@contextmanager
def _serving(app: web.Application) -> Iterator[int]:
    """``app`` served on a loopback port of its own (yielded) from a thread, as ``tracegrade ui`` serves the UI."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    runner = web.AppRunner(app)
    asyncio.run_coroutine_threadsafe(runner.setup(), loop).result()
    try:
        site = web.SockSite(runner, socket.create_server(("127.0.0.1", 0)))
        asyncio.run_coroutine_threadsafe(site.start(), loop).result()
        yield int(site.name.rsplit(":", 1)[1])
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result()
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()


def test_a_refusal_raised_as_an_http_exception_closes_the_waiting_clients_connection() -> None:
    """aiohttp sends a raised HTTPException itself, after every middleware, and keeps the connection."""
    app = web.Application(middlewares=[close_unless_continued])
    app.router.add_post("/v1/traces", _raises_forbidden, expect_handler=defer_continue)
    with _serving(app) as port:
        status, headers, body, closed = _refused_unread(port, "/v1/traces", ())
    assert status == b"HTTP/1.1 403 Forbidden", body
    assert (headers["connection"], closed) == ("close", b"")


def test_the_ui_on_a_port_of_its_own_refuses_unread_and_closes() -> None:
    """``tracegrade ui``'s app: the UI's routes alone, no middleware of the receiver's (the store is never read)."""
    app = web.Application()
    add_ui_routes(app, lambda _: None, None)
    with _serving(app) as port:
        status, headers, body, closed = _refused_unread(port, "/ui/api/sql", (TEXT,))
    assert status == b"HTTP/1.1 400 Bad Request", body
    assert b"application/json" in body
    assert (headers["connection"], closed) == ("close", b"")


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


@pytest.mark.parametrize(("path", "headers", "body", "answered"), CONTINUED)
def test_a_post_that_passes_is_told_to_go_on_and_answered(
    server: RunningServer, path: str, headers: tuple[str, ...], body: object, answered: bytes
) -> None:
    sent = (body if isinstance(body, str) else json.dumps(body)).encode()
    port = _port(server)
    with socket.create_connection(("127.0.0.1", port), timeout=ANSWER_WAIT) as client:
        client.sendall(request_head(path, len(sent), EXPECT, *(header.format(port=port) for header in headers)))
        assert first_answer(client)[0] == b"HTTP/1.1 100 Continue"
        client.sendall(sent)
        status, _, answer = first_answer(client)
    assert status == answered, answer


def test_an_address_over_the_failed_authentication_limit_is_refused_unread(tmp_path: Path) -> None:
    """Its own receiver: the limit, once reached, refuses every request from the address (127.0.0.1), a sign-in's
    form among them."""
    refused = {"/v1/traces": (AUTH,), "/v1/query": (AUTH, JSON), "/mcp": (AUTH, JSON), "/ui/login": (FORM,)}
    with running_server(tmp_path / "traces.duckdb", token=TOKEN, auth_failure_limit=FAILURES_ALLOWED) as throttled:
        for guess in range(FAILURES_ALLOWED):  # wrong tokens, each refused unread and counted
            status, headers, _, closed = _refused_unread(throttled, "/v1/traces", (f"Authorization: Bearer {guess}",))
            assert (status, headers["connection"], closed) == (b"HTTP/1.1 401 Unauthorized", "close", b"")
        answers = {path: _refused_unread(throttled, path, headers) for path, headers in refused.items()}
    for path, (status, headers, body, closed) in answers.items():
        assert status == b"HTTP/1.1 429 Too Many Requests", (path, body)
        assert b"too many wrong credentials" in body, path
        assert int(headers["retry-after"]) >= 1, path
        assert (headers["connection"], closed) == ("close", b""), path
