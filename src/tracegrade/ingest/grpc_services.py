"""The OTLP/gRPC front end: ``TraceService/Export`` and ``LogsService/Export`` on a grpc.aio server.

The methods take the raw request bytes (no generated deserializer), so an undecodable message gets
``INVALID_ARGUMENT`` with the decoder's reason instead of grpc's generic deserialization failure. For the
same reason a message over ``--max-request-bytes`` is refused here, saying so: grpc's own limit is set a quarter
higher (``grpc_receive_limit``), and only what goes past that gets grpc's message, which names no flag.
Retryable refusals carry a ``google.rpc.RetryInfo`` trailer that OTel exporters honour. The limit on wrong
credentials (``auth_throttle``), shared with the HTTP front end, refuses a call from an address over it before
its token is looked at, and counts a wrong token against the caller's address.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import grpc

from tracegrade.ingest.client_address import grpc_peer_host
from tracegrade.ingest.intake import TOO_LARGE_HINT, ExportRefused, Intake, PayloadTooLarge, Unauthenticated
from tracegrade.ingest.metrics import ReceiverMetrics
from tracegrade.ingest.otlp_responses import Signal, WireFormat, encode_export_response, encode_retry_info
from tracegrade.ingest.tokens import presented_token

if TYPE_CHECKING:
    from tracegrade.ingest.auth_throttle import AuthThrottle

__all__ = ["LOGS_SERVICE", "TRACE_SERVICE", "OtlpGrpcServices", "grpc_receive_limit"]

TRACE_SERVICE = "opentelemetry.proto.collector.trace.v1.TraceService"
LOGS_SERVICE = "opentelemetry.proto.collector.logs.v1.LogsService"
RETRY_INFO_KEY = "google.rpc.retryinfo-bin"


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
        auth_throttle: AuthThrottle | None = None,
    ) -> None:
        """``auth_throttle``: the limit on wrong credentials, shared with the HTTP front end (None: no limit)."""
        self._intake = intake
        self._metrics = metrics
        self._limit = max_request_bytes
        self._throttle = auth_throttle

    def handlers(self) -> list[grpc.GenericRpcHandler]:
        def export_method(signal: Signal) -> grpc.RpcMethodHandler:
            async def export(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
                return await self._export(signal, request, context)

            return grpc.unary_unary_rpc_method_handler(export)

        return [
            grpc.method_handlers_generic_handler(TRACE_SERVICE, {"Export": export_method(Signal.TRACES)}),
            grpc.method_handlers_generic_handler(LOGS_SERVICE, {"Export": export_method(Signal.LOGS)}),
        ]

    async def _export(self, signal: Signal, request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        try:
            tenant = self._authorize(context)
            if len(request) > self._limit:
                raise PayloadTooLarge(
                    f"the request message has {len(request)} bytes; the limit is {self._limit}: {TOO_LARGE_HINT}"
                )
            async with self._intake.admit(tenant):
                outcome = await self._intake.export(signal, request, WireFormat.PROTOBUF, tenant)
        except ExportRefused as refused:
            self._count(signal, refused.grpc_code)
            trailers: tuple[tuple[str, bytes], ...] = ()
            if refused.retry_after is not None:
                trailers = ((RETRY_INFO_KEY, encode_retry_info(refused.retry_after)),)
            await context.abort(refused.grpc_code, refused.message, trailing_metadata=trailers)
        self._count(signal, grpc.StatusCode.OK)
        return encode_export_response(signal, outcome, WireFormat.PROTOBUF)

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
