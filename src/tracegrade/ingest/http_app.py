"""The OTLP/HTTP front end (aiohttp): export, query, health, readiness and metrics endpoints.

``POST /v1/traces`` and ``POST /v1/logs`` take ``application/x-protobuf`` or ``application/json``,
optionally gzip-compressed, and answer in the request's encoding. The body is streamed with a byte cap
that applies to the wire size and, for gzip, to the decompressed size (decompressed incrementally, so a
gzip bomb costs at most the cap). A request that would find every in-flight slot taken (or the receiver
stopping, or its store reopening) is refused before a byte of its body is read; a client that sent
``Expect: 100-continue`` is told to send its body only once its request passed those checks, so a refusal costs
it no upload either, and its connection is closed after the refusal (:mod:`~tracegrade.ingest.expect_continue`).
Otherwise the body is read before its request takes the slot, under a byte budget shared by all bodies
(:mod:`~tracegrade.ingest.body_budget`) and read deadlines: one that stalls between chunks, or takes too long in
all, is answered 408. Errors carry a ``google.rpc.Status``
body saying why. aiohttp goes on with a request whose client hung up, so an export watches its connection once
its body is in, and is cancelled when the client is gone (``Intake.export`` drops it if it was not handed to
the writer yet).
"""

from __future__ import annotations

import asyncio
import functools
import math
import zlib
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from aiohttp import StreamReader, web

from tracegrade.errors import StoreError
from tracegrade.ingest.body_budget import BodyBudget
from tracegrade.ingest.decode.checks import type_name
from tracegrade.ingest.expect_continue import add_post, ask_for_body, read_body, send_continue
from tracegrade.ingest.intake import (
    TOO_LARGE_HINT,
    BodyTimeout,
    ClientGone,
    ExportRefused,
    Intake,
    PayloadTooLarge,
    Undecodable,
    UnsupportedMediaType,
)
from tracegrade.ingest.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from tracegrade.ingest.metrics import ReceiverMetrics
from tracegrade.ingest.otlp_responses import (
    ExportOutcome,
    Signal,
    WireFormat,
    encode_export_response,
    encode_status,
)
from tracegrade.json_input import parse_json
from tracegrade.store.remote import HEALTHZ_SERVER

if TYPE_CHECKING:
    from aiohttp.typedefs import Middleware

    from tracegrade.evaluation.worker_metrics import WorkerHealth
    from tracegrade.ingest.auth_throttle import AuthThrottle

__all__ = ["MEDIA_TYPES", "HttpFrontEnd", "client_connected"]

MEDIA_TYPES: dict[str, WireFormat] = {
    "application/x-protobuf": WireFormat.PROTOBUF,
    "application/protobuf": WireFormat.PROTOBUF,
    "application/json": WireFormat.JSON,
}
SUPPORTED_ENCODINGS = ("gzip", "identity")
# answered whatever the failed-authentication limit says: they take no credential, and a load balancer that
# checks them may share its address with a client over the limit
UNLIMITED_PATHS = frozenset({"/healthz", "/healthz/worker", "/readyz", "/metrics"})
READ_CHUNK = 64 * 1024
BODY_IDLE_TIMEOUT = 30.0  # longest wait for a body's next chunk (as nginx's client_body_timeout)
BODY_TOTAL_TIMEOUT = 120.0  # longest a whole body may take to arrive

# (sql, params, is the client still connected?, the caller's tenant) -> QueryResult
QueryRunner = Callable[[str, Sequence[Any] | None, Callable[[], bool], str], Awaitable[Any]]
Readiness = Callable[[], tuple[bool, str]]
T = TypeVar("T")


def client_connected(request: web.Request) -> bool:
    """Is the client that sent ``request`` still connected?"""
    transport = request.transport
    return transport is not None and not transport.is_closing()


async def while_connected(request: web.Request, work: Coroutine[Any, Any, T]) -> T:
    """``work``'s result; ClientGone once ``request``'s client hangs up first (``work`` is cancelled then, and
    has unwound when this raises). A connection that is closing cannot carry an answer: asyncio closes one whose
    client half-closed it too."""
    from tracegrade.ingest.server import CLIENT_CHECK_SECONDS  # the server imports this module

    task = asyncio.ensure_future(work)
    try:
        while not task.done():
            await asyncio.wait((task,), timeout=CLIENT_CHECK_SECONDS)
            if not task.done() and not client_connected(request):
                task.cancel()
                await asyncio.wait((task,))
    except BaseException:  # the handler itself was cancelled (the server stops)
        task.cancel()
        raise
    if task.cancelled():
        raise ClientGone("the client hung up before its request was answered")
    return task.result()


# What a query's parameters may hold: DuckDB converts every value before the query starts, where no time limit stops
# it (about 80 µs a value: 100,000 in a list took 8 s past a 3 s limit), and a value nested 900 levels deep took 15 s
MAX_QUERY_PARAM_VALUES = 10_000
MAX_QUERY_PARAM_DEPTH = 32


def _check_params_size(params: list[Any]) -> None:
    """Refuse parameters past ``MAX_QUERY_PARAM_VALUES`` values (each item of a list or object counts) or nested
    deeper than ``MAX_QUERY_PARAM_DEPTH``."""
    values, pending = 0, [(value, 1) for value in params]
    while pending:
        value, depth = pending.pop()
        values += 1
        if values > MAX_QUERY_PARAM_VALUES:
            raise Undecodable(
                f"'params' holds more than {MAX_QUERY_PARAM_VALUES:,} values (each item of an array or object "
                "counts): DuckDB converts each before the query starts, past its time limit; pass a long list as one "
                "JSON string: x IN (SELECT unnest(from_json(?, '[\"VARCHAR\"]')))"
            )
        if depth > MAX_QUERY_PARAM_DEPTH:
            raise Undecodable(
                f"'params' nests arrays or objects more than {MAX_QUERY_PARAM_DEPTH} levels deep; pass such a value "
                "as a JSON string and read it with from_json(?, …) or json_extract"
            )
        items = value if isinstance(value, list) else value.values() if isinstance(value, dict) else ()
        pending.extend((item, depth + 1) for item in items)


def _media_type(request: web.Request) -> str:
    return request.headers.get("Content-Type", "").split(";", 1)[0].strip().lower()


def _wire_format(request: web.Request) -> WireFormat:
    """The request's encoding; refused with 415 (listing the supported types) when unsupported."""
    media = _media_type(request)
    fmt = MEDIA_TYPES.get(media)
    if fmt is None:
        shown = media or "none"
        raise UnsupportedMediaType(
            f"unsupported Content-Type {shown!r}; send application/x-protobuf or application/json"
        )
    return fmt


class _Gunzip:
    """Inflates a gzip body of one member or several, one after another (RFC 1952 allows that, and Go's and
    Python's readers, the Collector's among them, read them as one body), never to more than ``limit`` bytes."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.member = zlib.decompressobj(16 + zlib.MAX_WBITS)
        self.members = 1

    @property
    def ended(self) -> bool:
        """Did the body end where a member ends (not in the middle of one)?"""
        return bool(self.member.eof)

    def feed(self, out: bytearray, chunk: bytes) -> None:
        """Inflate ``chunk`` into ``out``; PayloadTooLarge past the limit, zlib.error on corrupt data."""
        data = chunk
        while data:
            if self.member.eof:  # another member follows the one that ended
                self.member = zlib.decompressobj(16 + zlib.MAX_WBITS)
                self.members += 1
            try:
                out += self.member.decompress(data, self.limit - len(out) + 1)
            except zlib.error as exc:
                if self.members > 1 and "header" in str(exc):
                    raise Undecodable(
                        "unexpected data after the end of the gzip stream (not another gzip member)"
                    ) from None
                raise
            if len(out) > self.limit:
                raise PayloadTooLarge(
                    f"the request decompresses to more than the {self.limit}-byte limit; {TOO_LARGE_HINT}"
                )
            data = self.member.unused_data if self.member.eof else self.member.unconsumed_tail


def _inflater(request: web.Request, limit: int) -> _Gunzip | None:
    """The gzip decompressor the body needs (None for identity); refused when the headers already say
    the encoding is unsupported (415) or the body too large (413)."""
    encoding = request.headers.get("Content-Encoding", "identity").strip().lower() or "identity"
    if encoding not in SUPPORTED_ENCODINGS:
        raise UnsupportedMediaType(f"unsupported Content-Encoding {encoding!r}; send gzip or identity")
    declared = request.content_length
    if declared is not None and declared > limit:
        raise PayloadTooLarge(f"the request body has {declared} bytes; the limit is {limit}: {TOO_LARGE_HINT}")
    return _Gunzip(limit) if encoding == "gzip" else None


async def _next_chunk(content: StreamReader, within: float) -> bytes:
    """The body's next chunk (b"" at its end); asyncio.TimeoutError when none arrives ``within`` seconds."""
    return await asyncio.wait_for(content.read(READ_CHUNK), within)


def _late_body(idle_timeout: float, total_timeout: float, overdue: bool) -> BodyTimeout:
    if overdue:
        what = f"the request body did not arrive in full within {total_timeout:g} s"
    else:
        what = f"no part of the request body arrived for {idle_timeout:g} s"
    return BodyTimeout(f"{what}; retry, and if this recurs check the network between the exporter and the receiver")


async def read_limited_body(
    request: web.Request, limit: int, take: Callable[[int], None], *, idle_timeout: float, total_timeout: float
) -> bytes:
    """The request body, decompressed; 413 past ``limit`` bytes on the wire or after decompression, 408 when
    a chunk is ``idle_timeout`` seconds late or the body is not in after ``total_timeout``. ``take`` is told
    of every byte the body comes to hold (a :class:`BodyBudget` share, which may refuse it). A client waiting for
    ``100 Continue`` is told to send the body once its headers passed these checks."""
    inflater = _inflater(request, limit)
    await send_continue(request)
    out = bytearray()
    received = 0
    loop = asyncio.get_running_loop()
    deadline = loop.time() + total_timeout
    try:
        while chunk := await _next_chunk(request.content, min(idle_timeout, deadline - loop.time())):
            received += len(chunk)
            if received > limit:
                raise PayloadTooLarge(f"the request body exceeds the {limit}-byte limit; {TOO_LARGE_HINT}")
            held = len(out)
            if inflater is None:
                out += chunk
            else:
                inflater.feed(out, chunk)
            # counted once held: requests run one at a time on the loop, so the budget is only ever exceeded
            # by this one chunk, and only until the refusal frees it
            take(len(out) - held)
    except zlib.error as exc:
        if not out and "header" in str(exc):  # zlib's "incorrect header check": no gzip stream at all
            raise Undecodable(
                "the body is labelled Content-Encoding: gzip but is not gzip (no gzip header at its start): "
                "compress it, or drop the header"
            ) from None
        raise Undecodable(f"the gzip body is corrupt: {exc}") from None
    except asyncio.TimeoutError:
        raise _late_body(idle_timeout, total_timeout, overdue=loop.time() >= deadline) from None
    except ConnectionError:
        # the client closed its connection in the middle of the body (fewer bytes than its Content-Length, or a
        # chunked body without its last chunk): a client that hung up, not a fault of the server's (raised out of
        # the handler, aiohttp logged it with its traceback as a 500)
        raise ClientGone(
            f"the request body ended after {received} bytes, before its end: the client closed the connection"
        ) from None
    if inflater is not None and not inflater.ended:
        raise Undecodable("the gzip body is truncated (the stream did not end)")
    return bytes(out)


@web.middleware
async def _explain_routing_errors(request: web.Request, handler: Any) -> web.StreamResponse:
    """404 and 405 with a JSON Status body that says what this server serves."""
    try:
        return await handler(request)
    except web.HTTPMethodNotAllowed as exc:
        allowed = ", ".join(sorted(exc.allowed_methods))
        message = f"{request.method} is not allowed on {request.path}; use {allowed}"
        body = encode_status(12, message, WireFormat.JSON)  # 12 = UNIMPLEMENTED
        headers = {"Allow": allowed, "Content-Type": WireFormat.JSON.content_type}
        return web.Response(status=405, body=body, headers=headers)
    except web.HTTPNotFound:
        message = f"no endpoint at {request.path}; OTLP is served at /v1/traces and /v1/logs"
        body = encode_status(5, message, WireFormat.JSON)  # 5 = NOT_FOUND
        return web.Response(status=404, body=body, headers={"Content-Type": WireFormat.JSON.content_type})


@web.middleware
async def _one_authorization(request: web.Request, handler: Any) -> web.StreamResponse:
    """401 for a request with several ``Authorization`` headers: each endpoint reads one, and which one a proxy or
    a handler would take differs, so such a request's identity is ambiguous."""
    if len(request.headers.getall("Authorization", ())) > 1:
        message = "the request has several Authorization headers; send one: 'Authorization: Bearer <token>'"
        body = encode_status(16, message, WireFormat.JSON)  # 16 = UNAUTHENTICATED
        return web.Response(status=401, body=body, headers={"Content-Type": WireFormat.JSON.content_type})
    return await handler(request)


def _failed_auth_limit(throttle: AuthThrottle) -> Middleware:
    """The middleware that enforces ``throttle`` on every endpoint (OTLP, query, runs, forget, UI, MCP): a request
    from an address over the limit is refused before anything reads it (a sign-in is checked again once its form
    is in), and a 401 of a request that presented a credential counts against its address."""
    from tracegrade.ingest.auth_throttle import TooManyAuthFailures
    from tracegrade.ui.auth import SIGN_IN_PATH, presented_credential

    @web.middleware
    async def limit(request: web.Request, handler: Any) -> web.StreamResponse:
        if request.path in UNLIMITED_PATHS:
            return await handler(request)
        address = throttle.client(request.remote or "", request.headers.getall("X-Forwarded-For", ()))
        try:
            throttle.check(address, "http")
            if request.method == "POST" and request.path == SIGN_IN_PATH:
                # Every other endpoint checks its credential, a header, at once; a sign-in's is in its body. Checked
                # only before the body, a client could open many sign-ins, then send their forms, each with a
                # guess, once its address was over the limit: every one would still be tried. So the form is
                # read first (aiohttp keeps it for the handler) and the address checked again with it in.
                await ask_for_body(request)
                await request.post()
                throttle.check(address, "http")
        except TooManyAuthFailures as refused:
            return HttpFrontEnd._refusal(refused, MEDIA_TYPES.get(_media_type(request), WireFormat.JSON))
        response = await handler(request)
        if response.status == 401:
            presented, credential = await presented_credential(request)
            if presented:
                throttle.failed(address, credential, "http")
        return response

    return limit


class HttpFrontEnd:
    """Builds the aiohttp application around an :class:`Intake`."""

    def __init__(
        self,
        intake: Intake,
        metrics: ReceiverMetrics,
        *,
        max_request_bytes: int,
        body_budget: BodyBudget,
        run_query: QueryRunner,
        readiness: Readiness,
        body_idle_timeout: float = BODY_IDLE_TIMEOUT,
        body_total_timeout: float = BODY_TOTAL_TIMEOUT,
        auth_throttle: AuthThrottle | None = None,
        worker_health: Callable[[], WorkerHealth | None] = lambda: None,
        metrics_elsewhere: bool = False,
    ) -> None:
        """``auth_throttle``: the limit on wrong credentials, shared with the gRPC front end (None: no limit).
        ``worker_health``: the in-process grading worker's (None when the receiver runs none).
        ``metrics_elsewhere``: ``/metrics`` is served on ``--metrics-address``, and here answers 404 saying so."""
        self._intake = intake
        self._metrics = metrics
        self._limit = max_request_bytes
        self._budget = body_budget
        self._idle_timeout = body_idle_timeout
        self._total_timeout = body_total_timeout
        self._run_query = run_query
        self._readiness = readiness
        self._throttle = auth_throttle
        self._worker_health = worker_health
        self._metrics_elsewhere = metrics_elsewhere

    def build_app(self) -> web.Application:
        middlewares: list[Middleware] = [_one_authorization, _explain_routing_errors]
        if self._throttle is not None:
            middlewares.insert(0, _failed_auth_limit(self._throttle))  # before the other checks: refusing reads nothing
        app = web.Application(client_max_size=self._limit, middlewares=middlewares)
        # told to send their bodies only once their requests passed every check that needs none (read_limited_body)
        add_post(app, "/v1/traces", self._export_traces)
        add_post(app, "/v1/logs", self._export_logs)
        add_post(app, "/v1/query", self._query)
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/healthz/worker", self._worker_healthz)
        app.router.add_get("/readyz", self._readyz)
        app.router.add_get("/metrics", self._metrics_moved if self._metrics_elsewhere else self.metrics_page)
        return app

    # -- export -----------------------------------------------------------------------------------------

    async def _export_traces(self, request: web.Request) -> web.Response:
        return await self._export(request, Signal.TRACES)

    async def _export_logs(self, request: web.Request) -> web.Response:
        return await self._export(request, Signal.LOGS)

    async def _export(self, request: web.Request, signal: Signal) -> web.Response:
        reply_format = MEDIA_TYPES.get(_media_type(request), WireFormat.JSON)
        try:
            tenant = self._intake.authorize(request.headers.get("Authorization"), scope="ingest")
            fmt = _wire_format(request)
            # refused as the slot would refuse it now, before the body is read only to be thrown away
            self._intake.check_admission(tenant)
            # read before a slot is taken, so that slots only count decoding and journaling and slow senders
            # cannot hold them all; the payload stays in the budget until the request ends
            with self._budget.share() as take:
                payload = await read_limited_body(
                    request,
                    self._limit,
                    take,
                    idle_timeout=self._idle_timeout,
                    total_timeout=self._total_timeout,
                )
                outcome = await while_connected(request, self._admitted_export(signal, payload, fmt, tenant))
        except ExportRefused as refused:
            self._count(signal.value, refused.http_status)
            return self._refusal(refused, reply_format)
        self._count(signal.value, 200)
        body = encode_export_response(signal, outcome, fmt)
        return web.Response(body=body, headers={"Content-Type": fmt.content_type})

    async def _admitted_export(self, signal: Signal, payload: bytes, fmt: WireFormat, tenant: str) -> ExportOutcome:
        async with self._intake.admit(tenant):
            return await self._intake.export(signal, payload, fmt, tenant)

    def _count(self, signal: str, status: int) -> None:
        self._metrics.requests.inc(protocol="http", signal=signal, status=str(status))

    @staticmethod
    def _refusal(refused: ExportRefused, fmt: WireFormat) -> web.Response:
        headers = {"Content-Type": fmt.content_type}
        if refused.retry_after is not None:
            headers["Retry-After"] = str(max(1, math.ceil(refused.retry_after)))
        body = encode_status(refused.grpc_code.value[0], refused.message, fmt)
        return web.Response(status=refused.http_status, body=body, headers=headers)

    # -- query ------------------------------------------------------------------------------------------

    async def _query(self, request: web.Request) -> web.Response:
        try:
            tenant = self._intake.authorize(request.headers.get("Authorization"), scope="read")
            sql, params = await self._query_arguments(request)
            result = await self._run_query(sql, params, functools.partial(client_connected, request), tenant)
        except ExportRefused as refused:
            self._count("query", refused.http_status)
            return self._refusal(refused, WireFormat.JSON)
        except StoreError as exc:  # its message says what failed (a refusal, or "query failed: <DuckDB's error>")
            self._count("query", 400)
            return self._refusal(Undecodable(str(exc)), WireFormat.JSON)
        self._count("query", 200)
        # encoding thousands of rows takes a while: off the loop, so exports and health checks go on meanwhile
        body = await asyncio.get_running_loop().run_in_executor(None, result.answer_json)
        return web.Response(body=body, content_type="application/json")

    @staticmethod
    async def _query_arguments(request: web.Request) -> tuple[str, list[Any] | None]:
        if _media_type(request) != "application/json":
            raise UnsupportedMediaType('send the query as application/json: {"sql": "...", "params": [...]}')
        try:
            document = parse_json(await read_body(request))
        except (ValueError, UnicodeDecodeError) as exc:
            raise Undecodable(f"the query body is not valid JSON: {exc}") from None
        except web.HTTPRequestEntityTooLarge as exc:
            raise PayloadTooLarge(f"the query body is too large: {exc.text}") from None
        if not isinstance(document, dict):
            raise Undecodable('the query body must be a JSON object {"sql": "...", "params": [...]}')
        if not isinstance(document.get("sql"), str):
            got = "missing" if "sql" not in document else f"a JSON {type_name(document['sql'])}"
            raise Undecodable(f"'sql' must be a string holding the query (it is {got})")
        unknown = set(document) - {"sql", "params"}
        if unknown:
            raise Undecodable(f"unknown query keys {sorted(unknown)}; only 'sql' and 'params' are accepted")
        params = document.get("params")
        if params is not None and not isinstance(params, list):
            raise Undecodable("'params' must be a JSON array of values")
        _check_params_size(params or [])
        return document["sql"], params

    # -- health, readiness, metrics ---------------------------------------------------------------------

    async def _healthz(self, request: web.Request) -> web.Response:
        # A stalled in-process worker is reported here but never fails the receiver's health: the probes on
        # /healthz and /readyz restart a receiver or take it out of a load balancer, and either would stop
        # ingestion that works, to no avail for grading (a restart runs the same rules against the same judges).
        # ``server`` tells a tracegrade client (``RemoteStore.is_alive``) this receiver from another program that
        # took a killed receiver's port, which a store's sidecar may still name
        body: dict[str, object] = {"status": "ok", "server": HEALTHZ_SERVER}
        worker = self._worker_health()
        if worker is not None:
            body["worker"] = worker.as_json()
        return web.json_response(body)

    async def _worker_healthz(self, request: web.Request) -> web.Response:
        """The in-process worker's health, answered as ``tracegrade worker``'s /healthz is (503 when stalled or
        its store is out of reach), for a probe or monitor that watches grading alone."""
        worker = self._worker_health()
        if worker is None:
            message = "this receiver runs no grading worker; start it with --worker-rules RULES to grade in-process"
            return web.json_response({"status": "absent", "reason": message}, status=404)
        return web.json_response(worker.as_json(), status=200 if worker.healthy else 503)

    async def _readyz(self, request: web.Request) -> web.Response:
        ready, reason = self._readiness()
        status = 200 if ready else 503
        return web.json_response({"ready": ready, "reason": reason}, status=status)

    async def metrics_page(self, request: web.Request) -> web.Response:
        """The receiver's metrics, Prometheus text (here, or on ``--metrics-address``)."""
        return web.Response(body=self._metrics.render().encode(), headers={"Content-Type": METRICS_CONTENT_TYPE})

    async def _metrics_moved(self, request: web.Request) -> web.Response:
        message = "this receiver serves /metrics on its --metrics-address, not on its OTLP/HTTP port"
        return web.json_response({"error": message}, status=404)
