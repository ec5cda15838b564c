"""The OTLP/gRPC front end: ``TraceService/Export`` and ``LogsService/Export`` on a grpc.aio server.

The methods take the raw request bytes (no generated deserializer), so an undecodable message gets
``INVALID_ARGUMENT`` with the decoder's reason instead of grpc's generic deserialization failure. For the
same reason a message over ``--max-request-bytes`` is refused here, saying so: grpc's own limit is set a quarter
higher (``grpc_receive_limit``), and only what goes past that gets grpc's message, which names no flag.
Retryable refusals carry a ``google.rpc.RetryInfo`` trailer that OTel exporters honour. The limit on wrong
credentials (``auth_throttle``), shared with the HTTP front end, refuses a call from an address over it before
its token is looked at, and counts a wrong token against the caller's address.

A message counts in the body budget shared with OTLP/HTTP bodies (:class:`~tracegrade.ingest.body_budget.BodyBudget`)
from before it is read: the methods are served as client streams (on the wire a unary call is the same), so a call
waits in line for room before it reads its one message, and the server runs without grpc's BDP probing
(``GRPC_FLOW_CONTROL``), so a message not read yet stays with its sender instead of in grpc's receive buffers
(measured: 8 MB of each waiting 15 MB message with probing, 0 without). A call that gets no room before its
deadline, or that finds as many calls waiting as may, is refused with ``RESOURCE_EXHAUSTED`` and a ``RetryInfo``,
as OTLP says for backpressure; so is a call that finds every in-flight slot taken, before it waits or reads. grpc's
own limit on concurrent calls is not used: its refusal carries no ``RetryInfo``, so exporters drop the batch. grpc
cancels the handler of a call whose client cancels it or whose deadline passes: the call leaves the line, or its
export is dropped if it was not handed to the writer yet (``Intake.export``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import grpc

from tracegrade.ingest.body_budget import BUDGET_RETRY_AFTER, BodyBudget
from tracegrade.ingest.client_address import grpc_peer_host
from tracegrade.ingest.intake import (
    TOO_LARGE_HINT,
    ExportRefused,
    Intake,
    Overloaded,
    PayloadTooLarge,
    Unauthenticated,
    Undecodable,
)
from tracegrade.ingest.metrics import ReceiverMetrics
from tracegrade.ingest.otlp_responses import Signal, WireFormat, encode_export_response, encode_retry_info
from tracegrade.ingest.tokens import presented_token

if TYPE_CHECKING:
    from tracegrade.ingest.auth_throttle import AuthThrottle

__all__ = ["GRPC_FLOW_CONTROL", "LOGS_SERVICE", "TRACE_SERVICE", "OtlpGrpcServices", "grpc_receive_limit"]

TRACE_SERVICE = "opentelemetry.proto.collector.trace.v1.TraceService"
LOGS_SERVICE = "opentelemetry.proto.collector.logs.v1.LogsService"
RETRY_INFO_KEY = "google.rpc.retryinfo-bin"
# grpc's BDP probing widens a call's flow-control window to megabytes whether or not its message is being read;
# without it a call takes in 64 KiB until its handler reads (then as much as the message needs)
GRPC_FLOW_CONTROL = (("grpc.http2.bdp_probe", 0),)
# a call waiting for room is refused this long before its deadline (at most half its time), so that the refusal,
# which says when to retry, reaches its client before the client gives up on its own
REFUSAL_MARGIN = 0.5
NO_DEADLINE_WAIT = 30.0  # how long a call without a deadline waits for room


def grpc_receive_limit(max_request_bytes: int) -> int:
    """grpc's ``max_receive_message_length``: a quarter over ours, so a batch a little too large reaches
    ``Export`` and is refused with a message that says what to change."""
    return max_request_bytes + max_request_bytes // 4


class OtlpGrpcServices:
    """The two export services, sharing one :class:`Intake` with the HTTP front end."""

    def __init__(
        self,
        intake: Intake,
        metrics: ReceiverMetrics,
        max_request_bytes: int,
        *,
        body_budget: BodyBudget,
        max_waiting_calls: int,
        auth_throttle: AuthThrottle | None = None,
    ) -> None:
        """``body_budget``: the bytes request bodies and messages may hold, shared with the HTTP front end;
        ``max_waiting_calls``: how many calls may wait for room in it (more are refused retryably).
        ``auth_throttle``: the limit on wrong credentials, shared with the HTTP front end (None: no limit)."""
        self._intake = intake
        self._metrics = metrics
        self._limit = max_request_bytes
        self._budget = body_budget
        self._max_waiting = max_waiting_calls
        self._throttle = auth_throttle

    def handlers(self) -> list[grpc.GenericRpcHandler]:
        def export_method(signal: Signal) -> grpc.RpcMethodHandler:
            async def export(_: AsyncIterator[bytes], context: grpc.aio.ServicerContext) -> bytes:
                return await self._export(signal, context)

            # a client stream, so that the handler runs before the message is read (``_message``)
            return grpc.stream_unary_rpc_method_handler(export)

        return [
            grpc.method_handlers_generic_handler(TRACE_SERVICE, {"Export": export_method(Signal.TRACES)}),
            grpc.method_handlers_generic_handler(LOGS_SERVICE, {"Export": export_method(Signal.LOGS)}),
        ]

    async def _export(self, signal: Signal, context: grpc.aio.ServicerContext) -> bytes:
        try:
            tenant = self._authorize(context)
            self._intake.check_admission(tenant)  # before its message is read, only to be thrown away
            async with self._message(context) as request, self._intake.admit(tenant):
                outcome = await self._intake.export(signal, request, WireFormat.PROTOBUF, tenant)
        except ExportRefused as refused:
            self._count(signal, refused.grpc_code)
            trailers: tuple[tuple[str, bytes], ...] = ()
            if refused.retry_after is not None:
                trailers = ((RETRY_INFO_KEY, encode_retry_info(refused.retry_after)),)
            await context.abort(refused.grpc_code, refused.message, trailing_metadata=trailers)
        self._count(signal, grpc.StatusCode.OK)
        return encode_export_response(signal, outcome, WireFormat.PROTOBUF)

    @asynccontextmanager
    async def _message(self, context: grpc.aio.ServicerContext) -> AsyncIterator[bytes]:
        """The call's request message, read once the body budget has room for the largest one grpc lets
        through; it counts in the budget until the request ends."""
        room = grpc_receive_limit(self._limit)
        await self._wait_for_room(room, context)
        try:
            request = await context.read()
            if request is grpc.aio.EOF:
                raise Undecodable("the call ended without a request message; send one Export request per call")
            self._budget.release(room - len(request))
            room = len(request)
            if len(request) > self._limit:
                raise PayloadTooLarge(
                    f"the request message has {len(request)} bytes; the limit is {self._limit}: {TOO_LARGE_HINT}"
                )
            yield request
        finally:
            self._budget.release(room)

    async def _wait_for_room(self, size: int, context: grpc.aio.ServicerContext) -> None:
        """Wait in line for ``size`` bytes of the body budget, refusing the call retryably shortly before its
        deadline (a client that hangs up meanwhile leaves the line)."""
        if self._budget.waiting >= self._max_waiting:
            raise Overloaded(
                f"{self._budget.waiting} calls wait for room in the body budget, as many as may; retry later",
                BUDGET_RETRY_AFTER,
            )
        remaining = context.time_remaining()
        patience = NO_DEADLINE_WAIT if remaining is None else remaining - min(REFUSAL_MARGIN, remaining / 2)
        try:
            await asyncio.wait_for(self._budget.acquire(size), patience)
        except asyncio.CancelledError:  # its client hung up
            self._intake.count_abandoned("body_room")
            raise
        except asyncio.TimeoutError:
            raise Overloaded(
                f"request bodies and messages being received hold {self._budget.held} of their "
                f"{self._budget.capacity}-byte budget, and {self._budget.waiting} calls wait for room; none was "
                f"free for this call's message (up to {size} bytes) before its deadline; retry later",
                BUDGET_RETRY_AFTER,
            ) from None

    def _authorize(self, context: grpc.aio.ServicerContext) -> str:
        """The caller's tenant; refused first if its address is over the limit on wrong credentials, and a wrong
        token counted against that address."""
        throttle = self._throttle
        if throttle is None:
            return self._intake.authorize(_authorization(context), scope="ingest")
        metadata = context.invocation_metadata() or ()
        forwarded = [_text(value) for name, value in metadata if name == "x-forwarded-for"]
        address = throttle.client(grpc_peer_host(context.peer() or ""), forwarded)
        throttle.check(address, "grpc")
        try:
            return self._intake.authorize(_authorization(context), scope="ingest")
        except Unauthenticated:
            presented = ",".join(_text(value) for name, value in metadata if name == "authorization")
            if presented:  # a call without a token guessed nothing
                throttle.failed(address, presented_token(presented), "grpc")
            raise

    def _count(self, signal: Signal, code: grpc.StatusCode) -> None:
        self._metrics.requests.inc(protocol="grpc", signal=signal.value, status=code.name)


def _authorization(context: grpc.aio.ServicerContext) -> str | None:
    """The request's one ``authorization`` metadata value (None without one); several are refused, as over HTTP."""
    values = [value for name, value in context.invocation_metadata() or () if name == "authorization"]
    if len(values) > 1:
        raise Unauthenticated("the request has several authorization metadata entries; send one: 'Bearer <token>'")
    if not values:
        return None
    return _text(values[0])


def _text(value: str | bytes) -> str:
    return value if isinstance(value, str) else value.decode("latin-1")
