"""``/mcp`` on the receiver's HTTP port: the tools of ``tracegrade mcp`` over MCP's streamable HTTP transport.

The official ``mcp`` SDK serves that transport as an ASGI app; the receiver speaks aiohttp, so each request is
handed to the SDK's session manager as one ASGI call (the body read whole, the response streamed back); the SDK
parses the body, once (what tracegrade needs of the message it reads from the SDK's request middleware). The
manager runs stateless with JSON responses: every POST carries one JSON-RPC message and is answered on its
own, so any number of clients and receivers' restarts need no session state. Nor does the server send any
message of its own, so it offers no SSE stream: GET (and DELETE, a session's end) answer 405 with ``Allow: POST``,
as the MCP streamable-HTTP spec has a server without that stream answer. Requests pass the receiver's
bearer-token check first, and the tools read through the same store provider as the web UI (its query gate,
limits and scoping to the token's tenant), resolved once per request. A call of a reading tool (any but ``grade``)
waits on the event loop for a query turn before the SDK gives it a thread, and its queries run in that turn, as the
web UI's pages do: a crowd of waiting calls holds none of the SDK's threads, which other tenants' calls need. The
turn is taken in the SDK's request middleware (``MCPServer(middleware=...)``, which mcp 2.3 calls provisional: the
tests of query turns, ``tests/test_ui_mcp_query_turns.py``, fail should its meaning change).
``grade`` waits for a turn per query on its own grading thread instead (it may spend minutes between queries on
LLM judges, and holds no turn meanwhile). A query of a request whose client hung up is cancelled, as
``POST /v1/query`` cancels its own, rather than hold one of the gate's turns until its time limit while other
callers wait. Its callers are remote: ``grade``
takes no server path, no judge endpoint or key, calls the server's LLM judges only for a token with the
``judge`` scope, and runs SQL assertions within the receiver's limits (see :mod:`tracegrade.mcp_server`).
Without the ``mcp`` extra installed ``/mcp`` answers 501.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

from aiohttp import web
from multidict import CIMultiDict

from tracegrade.ingest.expect_continue import add_post, read_body
from tracegrade.ingest.http_app import client_connected
from tracegrade.ingest.intake import Overloaded
from tracegrade.ingest.query_gate import GatedStore
from tracegrade.ingest.tokens import Authorize
from tracegrade.store.query_control import QueryControl
from tracegrade.store.readonly import SandboxLimits
from tracegrade.store.results import QueryResult
from tracegrade.store.tenancy import grading_for

__all__ = ["add_mcp_route"]

StoreProvider = Callable[[str | None], GatedStore]  # the caller's tenant -> what it reads

_PATH = "/mcp"
_GRADE = "grade"  # the one tool that waits for a query turn per query (see the module docstring)
_REQUEST_STORE: contextvars.ContextVar[Any] = contextvars.ContextVar("tracegrade_mcp_store")
# the request being answered and the store it reads, for the SDK's request middleware (``_reading_turn``)
_REQUEST: contextvars.ContextVar[tuple[web.Request, GatedStore]] = contextvars.ContextVar("tracegrade_mcp_request")
# why the current request's token may not call the server's judges (its scope refusal), or None when it may
_JUDGING_REFUSED: contextvars.ContextVar[str | None] = contextvars.ContextVar("tracegrade_mcp_judging_refused")


class _RequestStore:
    """The store the current MCP request resolved (the tools are built once, the store is per request)."""

    def __getattr__(self, name: str) -> Any:
        return getattr(_REQUEST_STORE.get(), name)


class _HangUpCancels:
    """One request's store, whose queries (running, or started later by the same tool call) are cancelled once
    ``cancel`` says the client hung up. The tools run on worker threads, so the request's handler cannot stop them;
    the query they wait on can be."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self._running: set[QueryControl] = set()
        self._reason: str | None = None
        self._lock = threading.Lock()

    def query(
        self, sql: str, params: Sequence[Any] | None = None, *, control: QueryControl | None = None
    ) -> QueryResult:
        control = control if control is not None else QueryControl()
        with self._lock:
            if self._reason is not None:
                control.cancel(self._reason)  # refused before it starts
            self._running.add(control)
        try:
            result: QueryResult = self._store.query(sql, params, control=control)
            return result
        finally:
            with self._lock:
                self._running.discard(control)

    def cancel(self, reason: str) -> None:
        with self._lock:
            self._reason = reason
            running = list(self._running)
        for control in running:
            control.cancel(reason)

    def __getattr__(self, name: str) -> Any:  # everything else is the store's own
        return getattr(self._store, name)


def add_mcp_route(
    app: web.Application,
    store_provider: StoreProvider,
    authorize: Authorize,
    authorize_judging: Authorize,
    host: str,
    limits: SandboxLimits,
) -> None:
    """Serve the MCP tools at ``/mcp`` of ``app`` (before it starts), over the stores ``store_provider`` gives.

    ``authorize`` admits a caller; ``authorize_judging`` says whether its token may also have ``grade`` call the
    server's LLM judges (a refusal with ``http_status`` 403 says why not). ``host`` is the address the receiver
    listens on: on a loopback address the SDK also refuses requests whose Host or Origin header names another
    host (DNS-rebinding protection). ``limits`` bound the SQL assertions ``grade`` runs. The SDK loads with the
    first request, so a receiver nobody asks over MCP never imports it.
    """
    mount = _McpMount(host, limits)

    async def handle(request: web.Request) -> web.StreamResponse:
        header = request.headers.get("Authorization")
        try:
            tenant = authorize(header)
            store = store_provider(tenant)
            judging_refused = _refusal(authorize_judging, header)
        except Exception as exc:
            status = int(getattr(exc, "http_status", 0) or 0)
            if not status:
                raise
            return web.json_response({"error": str(exc)}, status=status)
        manager = await mount.manager()
        if manager is None:
            return web.json_response(
                {"error": "this receiver has no MCP SDK: pip install 'tracegrade[mcp]' and restart it to serve /mcp"},
                status=501,
            )
        # what the tools read through, unless the message calls a reading tool (``_reading_turn``): a client that
        # hangs up has its queries cancelled
        reads = _HangUpCancels(store)
        watching = asyncio.create_task(_cancel_on_hang_up(request, reads))
        bound, asked = _REQUEST_STORE.set(reads), _REQUEST.set((request, store))
        judging = _JUDGING_REFUSED.set(judging_refused)
        try:
            # what grade caches (judge replies) is the caller's tenant's alone, as for the worker and the CLI
            with grading_for(tenant):
                return await _asgi_call(manager.handle_request, request)
        finally:
            watching.cancel()
            _JUDGING_REFUSED.reset(judging)
            _REQUEST.reset(asked)
            _REQUEST_STORE.reset(bound)

    async def stop_on_cleanup(app: web.Application) -> AsyncIterator[None]:
        yield
        await mount.stop()

    app.cleanup_ctx.append(stop_on_cleanup)
    add_post(app, _PATH, handle)  # any other method: 405 with Allow: POST (see the module docstring)


async def _reading_turn(ctx: Any, call_next: Callable[[Any], Awaitable[Any]]) -> Any:
    """The SDK's request middleware: a call of a tool other than ``grade`` (all of which read the store in a few
    queries) takes a query turn on the loop first, and the tool reads in it; any other message goes on as it is."""
    params = ctx.params or {}
    if ctx.method != "tools/call" or params.get("name") == _GRADE:
        return await call_next(ctx)
    request, store = _REQUEST.get()
    try:
        held: Any = await store.take_turn(request)
    except Overloaded as refused:  # the tool answers with it, as when it waited for the turn itself
        held = _Refused(refused)
    bound = _REQUEST_STORE.set(held)
    try:
        return await call_next(ctx)
    finally:
        _REQUEST_STORE.reset(bound)
        held.close()


class _Refused:
    """What a tool call that got no query turn reads: every query raises the refusal."""

    def __init__(self, refusal: Exception) -> None:
        self._refusal = refusal

    def query(
        self, sql: str, params: Sequence[Any] | None = None, *, control: QueryControl | None = None
    ) -> QueryResult:
        raise self._refusal

    def close(self) -> None:
        """Nothing to hand back."""


async def _cancel_on_hang_up(request: web.Request, store: _HangUpCancels) -> None:
    """Cancel ``store``'s queries once the client that sent ``request`` has closed its connection."""
    from tracegrade.ingest.server import CLIENT_CHECK_SECONDS  # the server imports this module

    while client_connected(request):
        await asyncio.sleep(CLIENT_CHECK_SECONDS)
    store.cancel("its client closed the connection")


def _refusal(authorize: Authorize, header: str | None) -> str | None:
    """Why ``authorize`` refuses ``header`` as forbidden (403), or None when it admits it."""
    try:
        authorize(header)
    except Exception as exc:
        if getattr(exc, "http_status", 0) != 403:
            raise
        return str(exc)
    return None


class _McpMount:
    """The SDK's session manager, started on first use in a task of its own (its task group must start and
    end in one task) and stopped with the app."""

    def __init__(self, host: str, limits: SandboxLimits) -> None:
        self.host = host
        self.limits = limits
        self._manager: Any = None
        self._unavailable = False
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self._lock = asyncio.Lock()

    async def manager(self) -> Any:
        """The running manager; None when the SDK is not installed."""
        async with self._lock:
            if self._manager is None and not self._unavailable:
                await self._start()
        return self._manager

    async def _start(self) -> None:
        try:
            from tracegrade.mcp_server import build_server

            server = build_server(
                _RequestStore(), self.limits, judging_refused=_JUDGING_REFUSED.get, middleware=[_reading_turn]
            )
        except ImportError:
            self._unavailable = True
            return
        server.streamable_http_app(json_response=True, stateless_http=True, host=self.host)
        manager = server.session_manager
        started = asyncio.Event()

        async def run() -> None:
            async with manager.run():
                started.set()
                await self._stop.wait()

        self._task = asyncio.create_task(run())
        waiting = asyncio.create_task(started.wait())
        await asyncio.wait([self._task, waiting], return_when=asyncio.FIRST_COMPLETED)
        if not started.is_set():
            waiting.cancel()
            self._task.result()  # raises why the manager could not start
        self._manager = manager

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            await self._task


async def _asgi_call(asgi_app: Callable[..., Any], request: web.Request) -> web.StreamResponse:
    """Run one aiohttp request through an ASGI app and stream its response back. A client that hung up gets
    nothing more: what is left of the exchange is dropped, as aiohttp drops a response it cannot send, rather than
    fail the SDK's handler and log its traceback (a caller that gives up waiting is no error of the server's)."""
    try:
        body = await read_body(request)  # the SDK reads it from here: its client is told to send it now
    except ConnectionError:
        return web.Response(status=400, text="the client closed the connection before its request was read")
    delivered = False
    finished = asyncio.Event()
    response: web.StreamResponse | None = None
    peer = request.transport.get_extra_info("peername") if request.transport else None
    sock = request.transport.get_extra_info("sockname") if request.transport else None
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": f"{request.version.major}.{request.version.minor}",
        "method": request.method,
        "scheme": request.scheme,
        "path": request.path,
        "raw_path": request.raw_path.split("?", 1)[0].encode("latin-1"),
        "query_string": request.query_string.encode("latin-1"),
        "root_path": "",
        "headers": [(name.lower(), value) for name, value in request.raw_headers],
        "client": tuple(peer[:2]) if peer else None,
        "server": tuple(sock[:2]) if sock else None,
    }

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await finished.wait()  # nothing more comes: the next event is the end of the exchange
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        nonlocal response
        try:
            if message["type"] == "http.response.start":
                headers = CIMultiDict((k.decode("latin-1"), v.decode("latin-1")) for k, v in message.get("headers", []))
                response = web.StreamResponse(status=message["status"], headers=headers)
                await response.prepare(request)
            elif message["type"] == "http.response.body" and response is not None:
                await response.write(message.get("body", b""))
                if not message.get("more_body", False):
                    await response.write_eof()
        except ConnectionError:
            pass  # the client hung up (see above); aiohttp ends the response it returns quietly

    try:
        await asgi_app(scope, receive, send)
    finally:
        finished.set()
    if response is None:
        return web.json_response({"error": "the MCP server sent no response"}, status=500)
    return response
