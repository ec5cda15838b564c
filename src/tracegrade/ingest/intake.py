"""The protocol-neutral core of the receiver: admit, authorize, decode, hand to the writer, await durability.

``authorize`` turns a request's bearer token into its tenant (``TokenTable``); an export is stored as that
tenant's, and its journal record says so (``journal_record``), so a replay stores it for the same tenant.

Both front ends (OTLP/HTTP and OTLP/gRPC) call :class:`Intake`; they only translate its outcome and its
:class:`ExportRefused` errors into their own status codes. Memory stays bounded: a fixed number of
requests are admitted at once (the rest are told to retry), an admitted request waits undecoded while
the writer's queue (a capacity in spans) is full (:class:`~tracegrade.ingest.queue_gate.QueueGate`; told
to retry after ``queue_wait`` seconds), and decoding runs on a small thread pool, handed as many bytes at a
time as its threads' share of ``--max-request-bytes`` (:class:`~tracegrade.ingest.decode_budget.DecodeBudget`,
held until a decode ends even when its client hung up); the decoded records, many times their request's size,
are converted to Arrow and let go on the decode thread.

A client that hangs up cancels its export (gRPC does so itself; the HTTP front end watches the connection). Until
its request is handed to the writer nothing of it was acknowledged, and no answer can reach the client any more,
so it is dropped where it is: it leaves the queue gate's or the decode threads' line, and a decode under way
stops once the protobuf or JSON is parsed, before its records are converted and written (most of a request's
cost: bench/RESULTS.md). ``requests_abandoned_total{stage}`` counts them. A request already handed to the writer
is written all the same (a retry of it is stored once: the store keeps the first copy of each span).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import grpc

from tracegrade.errors import DecodeError, TracegradeError
from tracegrade.ingest.decode_budget import DecodeBudget
from tracegrade.ingest.metrics import ReceiverMetrics
from tracegrade.ingest.otlp_responses import ExportOutcome, Signal, WireFormat
from tracegrade.ingest.queue_gate import QueueGate, QueueGateTimeout
from tracegrade.ingest.tokens import SCOPES, Grant, Scope, TokenTable
from tracegrade.store.tenancy import DEFAULT_TENANT

if TYPE_CHECKING:  # types only: the receiver imports the decoders and the store lazily
    from tracegrade.ingest.decode.limits import DecodeLimits
    from tracegrade.ingest.decode.results import Rejection
    from tracegrade.store.prepared import PreparedWrite
    from tracegrade.store.results import WriteResult
    from tracegrade.store.trace_deletion import Deleted

__all__ = [
    "TOO_LARGE_HINT",
    "BodyTimeout",
    "ClientGone",
    "ExportRefused",
    "Forbidden",
    "Intake",
    "Overloaded",
    "PayloadTooLarge",
    "ShuttingDown",
    "StoreUnavailable",
    "Unauthenticated",
    "Undecodable",
    "UnsupportedMediaType",
    "journal_record",
    "journal_request",
]

MAX_LISTED_REJECTIONS = 5
SHUTDOWN_RETRY_AFTER = 5.0
RECOVERY_RETRY_AFTER = 1.0  # a store reopens in about a second plus its journal's replay
# While a failed store is being reopened, an export is told to retry after twice as long as the failure has
# lasted so far (from 1 s up to this cap): an exporter that makes a fixed number of attempts and takes the
# advice as its delay (OpenTelemetry Python's gRPC exporter: 6) then spans an outage of about a minute,
# where a fixed 1 s would have had it give up after about 5 s; the cap bounds the wait once the store is back.
RECOVERY_RETRY_AFTER_MAX = 30.0


class ExportRefused(TracegradeError):
    """A request refused as a whole; carries the HTTP status and gRPC code that say so."""

    http_status = 500
    grpc_code = grpc.StatusCode.INTERNAL

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.retry_after = retry_after


class Unauthenticated(ExportRefused):
    http_status = 401
    grpc_code = grpc.StatusCode.UNAUTHENTICATED


class Forbidden(ExportRefused):
    """The token is in force but its scopes do not include what the request does."""

    http_status = 403
    grpc_code = grpc.StatusCode.PERMISSION_DENIED


class Undecodable(ExportRefused):
    http_status = 400
    grpc_code = grpc.StatusCode.INVALID_ARGUMENT


class ClientGone(ExportRefused):
    """The client hung up before its request was answered, so no answer reaches it (HTTP 499, as nginx logs a
    request its client closed); nothing of it is kept unless it was handed to the writer already."""

    http_status = 499
    grpc_code = grpc.StatusCode.CANCELLED


class UnsupportedMediaType(ExportRefused):
    http_status = 415
    grpc_code = grpc.StatusCode.INVALID_ARGUMENT


class PayloadTooLarge(ExportRefused):
    http_status = 413
    grpc_code = grpc.StatusCode.INVALID_ARGUMENT


#: how a request over ``--max-request-bytes`` is fixed, said by every refusal of one
TOO_LARGE_HINT = "send smaller batches (the exporter's max export batch size) or raise --max-request-bytes"


class BodyTimeout(ExportRefused):
    """Retryable: the request body did not arrive in time (OTLP exporters retry 408)."""

    http_status = 408
    grpc_code = grpc.StatusCode.DEADLINE_EXCEEDED


class Overloaded(ExportRefused):
    """Retryable: the write queue or the in-flight request limit is full.

    OTLP allows 429 or 503 (with Retry-After) for backpressure. 503 is the one every standard exporter
    retries: the OpenTelemetry Python OTLP/HTTP exporter retries 408 and 5xx but drops a batch on 429.
    """

    http_status = 503
    grpc_code = grpc.StatusCode.RESOURCE_EXHAUSTED


class ShuttingDown(ExportRefused):
    """Retryable: the receiver is stopping (or not ready yet)."""

    http_status = 503
    grpc_code = grpc.StatusCode.UNAVAILABLE


class StoreUnavailable(ExportRefused):
    """Retryable: the store failed to write; nothing of the request was acknowledged."""

    http_status = 503
    grpc_code = grpc.StatusCode.UNAVAILABLE


# the journal record kind of each request type (stored on disk: never renumber)
RECORD_KINDS = {
    (Signal.TRACES, WireFormat.PROTOBUF): 1,
    (Signal.TRACES, WireFormat.JSON): 2,
    (Signal.LOGS, WireFormat.PROTOBUF): 3,
    (Signal.LOGS, WireFormat.JSON): 4,
}
# A record kind with this bit set holds a request of a tenant other than the default one: its payload is
# the tenant name's length (one byte), the name (ASCII) and then the request. The default tenant's records
# keep the plain form, which is also what journals written before tenants existed hold.
TENANT_RECORD = 0x80


def journal_record(kind: int, payload: bytes, tenant: str) -> tuple[int, bytes]:
    """The journal record of ``tenant``'s request of ``kind`` (one of ``RECORD_KINDS``)."""
    if tenant == DEFAULT_TENANT:
        return kind, payload
    name = tenant.encode("ascii")
    return kind | TENANT_RECORD, bytes([len(name)]) + name + payload


def _record_tenant(kind: int, payload: bytes) -> tuple[int, bytes, str]:
    """A journal record's request kind, request and tenant (see ``journal_record``)."""
    if not kind & TENANT_RECORD:
        return kind, payload, DEFAULT_TENANT
    length = payload[0] if payload else 0
    name = payload[1 : 1 + length]
    if not length or len(name) < length:
        raise DecodeError(f"journal record of kind {kind} is cut short inside its tenant name")
    return kind & ~TENANT_RECORD, payload[1 + length :], name.decode("ascii", "replace")


def journal_request(record: tuple[int, bytes]) -> tuple[bytes, str, str]:
    """A journal record's request as its exporter sent it, the file suffix ``tracegrade import`` reads it
    under (``.json`` or ``.pb``) and its tenant: what a dead letter holds (``JournaledWriter.recover``)."""
    kind, payload, tenant = _record_tenant(*record)
    json_kinds = {value for (_, fmt), value in RECORD_KINDS.items() if fmt is WireFormat.JSON}
    return payload, ".json" if kind in json_kinds else ".pb", tenant


def _decoders() -> dict[tuple[Signal, WireFormat], Callable[..., Any]]:
    from tracegrade.ingest import decode

    return {
        (Signal.TRACES, WireFormat.PROTOBUF): decode.decode_traces_proto,
        (Signal.TRACES, WireFormat.JSON): decode.decode_traces_json,
        (Signal.LOGS, WireFormat.PROTOBUF): decode.decode_logs_proto,
        (Signal.LOGS, WireFormat.JSON): decode.decode_logs_json,
    }


def _records(signal: Signal, decoded: Any) -> tuple[list[Any], list[Any]]:
    """The (spans, log records) of a decoded request of ``signal``."""
    return (decoded.spans, []) if signal is Signal.TRACES else ([], decoded.records)


# a decoded request as it leaves its decode thread: records kept, records refused, and the kept ones for the store
DecodeResult = tuple[int, "list[Rejection]", "PreparedWrite | None"]


def summarize_rejections(rejected: Sequence[Rejection], noun: str) -> str:
    """``"2 spans rejected: resourceSpans[0]…: reason; …"`` listing the first few with where and why."""
    listed = "; ".join(f"{item.where}: {item.reason}" for item in rejected[:MAX_LISTED_REJECTIONS])
    more = len(rejected) - MAX_LISTED_REJECTIONS
    tail = f"; and {more} more" if more > 0 else ""
    return f"{len(rejected)} {noun}{'s' if len(rejected) != 1 else ''} rejected: {listed}{tail}"


class Intake:
    """Admission, authorization and the decode -> journal -> acknowledge path shared by both protocols.

    ``writer`` is a :class:`~tracegrade.ingest.journaled_writer.JournaledWriter`.
    """

    def __init__(
        self,
        writer: Any,
        metrics: ReceiverMetrics,
        *,
        tokens: TokenTable,
        max_inflight_requests: int,
        max_inflight_per_tenant: int | None = None,
        decode_threads: int = 2,
        decode_limits: DecodeLimits | None = None,
        queue_wait: float = 0.0,
        max_queue_spans: int | None = None,
        max_request_bytes: int = 16 * 1024 * 1024,  # the default --max-request-bytes
    ) -> None:
        from tracegrade.store import QueueFull

        self._writer = writer  # None until ``replace_writer`` (a receiver opens its store after binding)
        self._queue_full = QueueFull
        self._metrics = metrics
        self.tokens = tokens  # replaced as a whole when the tokens file is reloaded
        self._max_inflight = max_inflight_requests
        self._max_per_tenant = max_inflight_per_tenant
        self._limits = () if decode_limits is None else (decode_limits,)
        self._decoders = _decoders()
        self._executor = ThreadPoolExecutor(decode_threads, thread_name_prefix="tracegrade-decode")
        self._decoding = DecodeBudget(decode_threads * max_request_bytes)  # a maximal request for each thread
        capacity = max_queue_spans if max_queue_spans is not None else writer.writer.max_queue_spans
        self._gate = QueueGate(self._free_records, capacity, queue_wait)
        self._inflight = 0
        self._inflight_by_tenant: dict[str, int] = {}
        self._idle = asyncio.Event()
        self._idle.set()
        self.draining = False
        self.recovering: str | None = None  # why exports are refused while the store is reopened
        self._recovering_since = 0.0  # time.monotonic() when the store failed

    def _free_records(self) -> int:
        return self._writer.free_records() if self._writer is not None else 0

    def replace_writer(self, writer: Any) -> None:
        """Hand exports to ``writer`` (a JournaledWriter) from now on: the store was (re)opened."""
        self._writer = writer
        self._gate.room_freed()

    def begin_recovery(self, reason: str) -> None:
        """Refuse exports retryably (503 / UNAVAILABLE) until ``end_recovery``: the store is reopened."""
        self.recovering = reason
        self._recovering_since = time.monotonic()

    def end_recovery(self) -> None:
        self.recovering = None

    def recovery_retry_after(self) -> float:
        """The delay a refused export is told to wait while the store is reopened (RECOVERY_RETRY_AFTER_MAX)."""
        lasted = time.monotonic() - self._recovering_since if self.recovering is not None else 0.0
        return min(RECOVERY_RETRY_AFTER_MAX, max(RECOVERY_RETRY_AFTER, 2 * lasted))

    @property
    def inflight(self) -> int:
        return self._inflight

    @property
    def waiting_for_room(self) -> int:
        """Admitted requests held until the write queue has room for them."""
        return self._gate.waiting

    @property
    def decoding_bytes(self) -> int:
        """Bytes of the requests handed to the decode threads now."""
        return self._decoding.held

    @property
    def waiting_to_decode(self) -> int:
        """Requests waiting for their turn to decode (DecodeBudget)."""
        return self._decoding.waiting

    # -- admission -------------------------------------------------------------------------------------

    def authorize(self, authorization: str | None, *, scope: Scope) -> str:
        """The tenant of an ``Authorization: Bearer <token>`` value whose token may act in ``scope`` (the default
        tenant when no token is configured); Unauthenticated when it names no token in force, Forbidden when the
        token's scopes do not include ``scope``."""
        tokens = self.tokens
        if tokens.open:
            return DEFAULT_TENANT
        if not authorization:
            raise Unauthenticated("missing bearer token: send the header 'Authorization: Bearer <token>'")
        scheme, _, credential = authorization.strip().partition(" ")
        if scheme.lower() != "bearer" or not credential.strip():
            raise Unauthenticated("the Authorization header must be 'Bearer <token>'")
        grant = tokens.grant_of(credential.strip())
        if grant is None:
            raise Unauthenticated("invalid bearer token")
        return self._within_scope(grant, scope)

    def authorize_ui_session(self, session: str | None) -> str:
        """The tenant of a web UI cookie (``tokens.ui_session`` of a token in force that may read);
        Unauthenticated if none, Forbidden when its token may no longer read."""
        tokens = self.tokens
        if tokens.open:
            return DEFAULT_TENANT
        grant = tokens.grant_of_session(session) if session else None
        if grant is None:
            raise Unauthenticated("this browser's sign-in is no longer valid (its token was changed): sign in again")
        return self._within_scope(grant, "read")

    def _within_scope(self, grant: Grant, scope: Scope) -> str:
        if scope not in grant.scopes:
            where = f" in {self.tokens.source}" if self.tokens.source else ""
            raise Forbidden(
                f"this token may not {SCOPES[scope]}: its scopes are {', '.join(sorted(grant.scopes))}; use a "
                f"token whose scopes include {scope!r} (or add it to this token's scopes{where})"
            )
        return grant.tenant

    @property
    def tenant_share(self) -> int:
        """In-flight requests one tenant may hold (``max_inflight_per_tenant``; by default half of them, rounded
        up, while the tokens name two tenants or more, so that one tenant's flood cannot take every slot)."""
        if self._max_per_tenant is not None:
            return min(self._max_per_tenant, self._max_inflight)
        if len(self.tokens.tenants) >= 2:
            return -(-self._max_inflight // 2)
        return self._max_inflight

    @asynccontextmanager
    async def admit(self, tenant: str = DEFAULT_TENANT) -> AsyncIterator[None]:
        """Hold one of the in-flight slots for the duration of ``tenant``'s request, or refuse it (retryably)."""
        self.check_admission(tenant)
        self._inflight += 1
        self._inflight_by_tenant[tenant] = self._inflight_by_tenant.get(tenant, 0) + 1
        self._idle.clear()
        try:
            yield
        finally:
            self._inflight -= 1
            left = self._inflight_by_tenant.pop(tenant) - 1
            if left:
                self._inflight_by_tenant[tenant] = left
            if self._inflight == 0:
                self._idle.set()

    def check_admission(self, tenant: str = DEFAULT_TENANT) -> None:
        """Refuse ``tenant``'s request, as ``admit`` would now, when no slot is free for it (or the receiver is
        stopping, or its store is being reopened)."""
        if self.draining:
            raise ShuttingDown("the receiver is shutting down; retry later", SHUTDOWN_RETRY_AFTER)
        if self.recovering is not None or self._writer is None:
            reason = self.recovering or "the store is opening"
            raise StoreUnavailable(f"{reason}; retry shortly", self.recovery_retry_after())
        if self._inflight >= self._max_inflight:
            raise Overloaded(f"{self._inflight} requests in flight (the limit); retry later", 1.0)
        held = self._inflight_by_tenant.get(tenant, 0)
        share = self.tenant_share
        if held >= share:
            raise Overloaded(
                f"tenant {tenant!r} has {held} requests in flight, its share of the {self._max_inflight} this "
                "receiver handles at once; retry later",
                1.0,
            )

    def begin_drain(self) -> None:
        """Refuse new requests from now on; those already admitted run to completion."""
        self.draining = True

    async def wait_idle(self, timeout: float) -> bool:
        """Wait until no request is in flight; False when ``timeout`` passed first."""
        try:
            await asyncio.wait_for(self._idle.wait(), timeout)
        except asyncio.TimeoutError:
            return False
        return True

    def close(self) -> None:
        self._executor.shutdown(wait=True)

    # -- the export path -------------------------------------------------------------------------------

    def decode_record(self, record: tuple[int, bytes]) -> tuple[list[Any], list[Any], str]:
        """The spans, log records and tenant a journal record holds (for replaying the journal at start)."""
        kind, payload, tenant = _record_tenant(*record)
        found = [key for key, value in RECORD_KINDS.items() if value == kind]
        if not found:
            raise DecodeError(f"unknown journal record kind {kind} (known: {sorted(RECORD_KINDS.values())})")
        signal, fmt = found[0]
        spans, logs = _records(signal, self._decoders[(signal, fmt)](payload, *self._limits))
        return spans, logs, tenant

    def room_freed(self) -> None:
        """The writer took records from its queue: requests waiting for room may go on (on the loop)."""
        self._gate.room_freed()

    async def export(
        self, signal: Signal, payload: bytes, fmt: WireFormat, tenant: str = DEFAULT_TENANT
    ) -> ExportOutcome:
        """Wait for room in the write queue, decode ``payload``, journal what is valid as ``tenant``'s, and
        return once it is durable. Cancelled (its client hung up), it is dropped unless it was handed to the
        writer already."""
        try:
            reserved = await self._gate.enter(tenant)
        except QueueGateTimeout as exc:
            retry_after = self._writer.retry_after(self._gate.estimate)
            raise Overloaded(f"the write queue is full ({exc}); retry later", retry_after) from None
        except asyncio.CancelledError:
            self.count_abandoned("queue")
            raise
        queued: int | None = None
        durable: tuple[Any, float] | None = None
        try:
            accepted, rejected, prepared = await self._decode(signal, payload, fmt, tenant)
            message = self._count_received(signal, accepted, rejected)
            if prepared is not None:
                durable = self._submit(prepared, journal_record(RECORD_KINDS[(signal, fmt)], payload, tenant))
                queued = prepared.size
        finally:
            self._gate.leave(reserved, queued)
        if durable is not None:
            await self._until_durable(durable)
        return ExportOutcome(accepted=accepted, rejected=len(rejected), error_message=message)

    async def _decode(self, signal: Signal, payload: bytes, fmt: WireFormat, tenant: str) -> DecodeResult:
        """Decode and prepare ``payload`` on a decode thread once its bytes fit the DecodeBudget."""
        decoder = self._decoders[(signal, fmt)]
        loop = asyncio.get_running_loop()
        size = len(payload)
        try:
            await self._decoding.acquire(size)
        except asyncio.CancelledError:
            self.count_abandoned("decode_wait")
            raise
        abandoned = threading.Event()
        try:
            job = self._executor.submit(self._decode_and_prepare, signal, decoder, payload, tenant, abandoned)
        except BaseException:
            self._decoding.release(size)
            raise

        def decode_ended(_: object) -> None:  # on the decode thread (on the loop if cancelled before it ran)
            if not loop.is_closed():  # a stopped receiver's loop closes before the decodes of abandoned requests end
                loop.call_soon_threadsafe(self._decoding.release, size)

        # given back when the decode ends, not when its request does: a client hanging up stops it once parsed
        job.add_done_callback(decode_ended)
        try:
            return await asyncio.wrap_future(job)  # cancelled: a job not started yet is taken off the pool
        except DecodeError as exc:
            raise Undecodable(f"undecodable OTLP {fmt.value} {signal.value} request: {exc}") from None
        except asyncio.CancelledError:
            abandoned.set()
            self.count_abandoned("decoding")
            raise

    def _decode_and_prepare(
        self, signal: Signal, decoder: Callable[..., Any], payload: bytes, tenant: str, abandoned: threading.Event
    ) -> DecodeResult:
        """Decode a request and convert what it holds for the store as ``tenant``'s (on a decode thread); stops
        with ClientGone, its result unread, once ``abandoned`` is set (checked when the parsing ends).

        Returns counts and Arrow tables only: the decoded records, many times the request's size in Python
        objects, are let go here, before the DecodeBudget counts their bytes as free again."""
        from tracegrade.store.prepared import prepare_write

        decoded = decoder(payload, *self._limits)
        if abandoned.is_set():  # the conversion costs a quarter of the parsing, and the write several times both
            raise ClientGone("the client hung up while its request was decoded")
        spans, logs = _records(signal, decoded)
        prepared = prepare_write(spans, logs, tenant, fresh=True) if spans or logs else None
        return len(spans) + len(logs), decoded.rejected, prepared

    def _count_received(self, signal: Signal, accepted: int, rejected: list[Rejection]) -> str:
        """Count a decoded request's records; returns the message listing its rejected ones ("" if none)."""
        if signal is Signal.TRACES:
            self._metrics.spans_received.inc(accepted + len(rejected))
            self._metrics.spans_rejected.inc(len(rejected))
            noun = "span"
        else:
            self._metrics.logs_received.inc(accepted + len(rejected))
            self._metrics.logs_rejected.inc(len(rejected))
            noun = "log record"
        return summarize_rejections(rejected, noun) if rejected else ""

    def _submit(self, prepared: Any, record: tuple[int, bytes]) -> tuple[Any, float]:
        """Hand a prepared request to the writer; returns its durability Future and when it was handed."""
        started = time.perf_counter()
        try:
            return self._writer.submit(prepared, record), started
        except self._queue_full as exc:
            retry_after = float(getattr(exc, "retry_after", 1.0) or 1.0)
            raise Overloaded(f"the write queue is full ({exc}); retry later", retry_after) from None
        except Exception as exc:  # the writer is closed or broken: nothing was accepted
            raise StoreUnavailable(f"the store is not accepting writes: {exc}", SHUTDOWN_RETRY_AFTER) from None

    async def _until_durable(self, submitted: tuple[Any, float]) -> None:
        future, started = submitted
        try:
            # shielded: a client that hangs up must not cancel a write the journal already owns
            await asyncio.shield(asyncio.wrap_future(future))
        except Exception as exc:
            raise StoreUnavailable(f"the request could not be made durable: {exc}", 1.0) from None
        self._metrics.write_latency.observe(time.perf_counter() - started)

    def count_abandoned(self, stage: str) -> None:
        """Count a request dropped at ``stage`` because its client hung up (call on the event loop)."""
        self._metrics.requests_abandoned.inc(stage=stage)

    def count_expired(self, expired: Deleted) -> None:
        """Count what a retention pass deleted (call on the event loop)."""
        self._metrics.traces_expired.inc(expired.traces)
        self._metrics.spans_expired.inc(expired.spans)
        self._metrics.logs_expired.inc(expired.logs)

    def count_forgotten(self, forgotten: Deleted) -> None:
        """Count the traces a request forgot (call on the event loop)."""
        self._metrics.traces_forgotten.inc(forgotten.traces)

    def count_stored(self, result: WriteResult) -> None:
        """Count a committed submission's new, duplicate and dropped records (call on the event loop)."""
        self._metrics.spans_dropped_forgotten.inc(result.spans_forgotten)
        self._metrics.spans_stored.inc(result.spans_inserted)
        self._metrics.spans_duplicate.inc(result.spans_duplicate)
        self._metrics.logs_stored.inc(result.logs_inserted)
