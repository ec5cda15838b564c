"""Send decoded spans and log records through a running `tracegrade serve` (OTLP/HTTP protobuf, in chunks).

Used by ``tracegrade import`` when the server holds the store file: the server's receiver journals,
stores and maps what it accepts, exactly as from any exporter. A chunk the server is too busy for
(503 with Retry-After) is sent again after the delay it names; one it finds too large (413: its
--max-request-bytes is below the chunk's size) is sent again in halves.
"""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from tracegrade.cli.otlp_encode import logs_requests, traces_requests
from tracegrade.errors import TracegradeError
from tracegrade.ingest.settings import ENV_VARS
from tracegrade.models.span import LogRecordData, SpanRecord

__all__ = ["RemoteImportError", "SentCounts", "send_to_server"]

# A chunk stays well below the receiver's default --max-request-bytes (16 MiB) and its write queue
# (--queue-spans, 10,000 spans), so one request never has to wait for more room than the queue has.
_MAX_ITEMS = 2_000
_MAX_BYTES = 4 * 1024 * 1024
_BUSY_RETRIES = 30
_TIMEOUT = 60.0
T = TypeVar("T")


class RemoteImportError(TracegradeError):
    """The running server refused the import (bad token, a body it could not decode, gone away…)."""


class _TooLarge(RemoteImportError):
    """The server refused a request as too large (413); smaller ones may pass."""


@dataclass
class SentCounts:
    """What the server answered for one file's records."""

    spans_accepted: int = 0
    spans_rejected: int = 0
    logs_accepted: int = 0
    logs_rejected: int = 0
    messages: list[str] = field(default_factory=list)  # the server's partial_success explanations


def send_to_server(
    http_url: str, token: str | None, spans: Sequence[SpanRecord], logs: Sequence[LogRecordData]
) -> SentCounts:
    """POST ``spans`` to ``{http_url}/v1/traces`` and ``logs`` to ``/v1/logs``; the server's counts."""
    counts = SentCounts()
    url = http_url.rstrip("/")

    def span_requests(items: Sequence[SpanRecord]) -> Iterator[tuple[bytes, int]]:
        return traces_requests(items, max_items=_MAX_ITEMS, max_bytes=_MAX_BYTES)

    def log_requests(items: Sequence[LogRecordData]) -> Iterator[tuple[bytes, int]]:
        return logs_requests(items, max_items=_MAX_ITEMS, max_bytes=_MAX_BYTES)

    for answer, size in _posted(f"{url}/v1/traces", token, spans, span_requests):
        reply = ExportTraceServiceResponse.FromString(answer)
        rejected = reply.partial_success.rejected_spans
        counts.spans_accepted += size - rejected
        counts.spans_rejected += rejected
        _keep_message(counts, reply.partial_success.error_message)
    for answer, size in _posted(f"{url}/v1/logs", token, logs, log_requests):
        log_reply = ExportLogsServiceResponse.FromString(answer)
        rejected = log_reply.partial_success.rejected_log_records
        counts.logs_accepted += size - rejected
        counts.logs_rejected += rejected
        _keep_message(counts, log_reply.partial_success.error_message)
    return counts


def _posted(
    url: str, token: str | None, items: Sequence[T], requests: Callable[[Sequence[T]], Iterator[tuple[bytes, int]]]
) -> Iterator[tuple[bytes, int]]:
    """(the server's answer, records sent) for each request ``requests`` makes of ``items``, in order. A request the
    server finds too large (413: a receiver started with a lower --max-request-bytes than this chunk's size) is
    sent again as two, halving down to one record, which the server then refuses with its reason."""
    offset = 0
    for body, size in requests(items):  # the requests hold consecutive slices of ``items``
        chunk = items[offset : offset + size]
        offset += size
        try:
            answer = _post(url, body, token)
        except _TooLarge:
            if size == 1:
                raise
            middle = size // 2
            yield from _posted(url, token, chunk[:middle], requests)
            yield from _posted(url, token, chunk[middle:], requests)
            continue
        yield answer, size


def _keep_message(counts: SentCounts, message: str) -> None:
    if message and message not in counts.messages:
        counts.messages.append(message)


def _post(url: str, body: bytes, token: str | None) -> bytes:
    headers = {"Content-Type": "application/x-protobuf"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    for _ in range(_BUSY_RETRIES):
        request = urllib.request.Request(url, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=_TIMEOUT) as response:
                return response.read()
        except urllib.error.HTTPError as error:
            reply = error.read()
            if error.code == 503 and error.headers.get("Retry-After"):
                time.sleep(_retry_delay(error.headers["Retry-After"]))
                continue
            if error.code == 413:
                raise _TooLarge(_refusal(url, error.code, reply)) from None
            raise RemoteImportError(_refusal(url, error.code, reply)) from None
        except OSError as exc:
            raise RemoteImportError(f"could not send to the server at {url}: {exc}") from None
    raise RemoteImportError(f"the server at {url} stayed busy (503) through {_BUSY_RETRIES} retries; try again later")


def _retry_delay(header: str) -> float:
    try:
        return min(30.0, max(0.1, float(header)))
    except ValueError:
        return 1.0


def _refusal(url: str, code: int, reply: bytes) -> str:
    reason = _status_message(reply)
    if reason is None:  # not a Status body (a proxy's error page, say): show what it is
        reason = reply.decode("utf-8", "replace")[:200]
    hint = f" (pass the server's token with --token or {ENV_VARS['token']})" if code == 401 else ""
    return f"the server at {url} refused the import with HTTP {code}: {reason or 'no reason given'}{hint}"


def _status_message(body: bytes) -> str | None:
    """The message (field 2) of a protobuf ``google.rpc.Status``, or None when ``body`` is not one.

    Read by hand: the generated Status class lives in googleapis-common-protos, not a dependency.
    """
    offset = 0
    while offset < len(body):
        tag, offset = _varint(body, offset)
        if tag == (1 << 3):  # code: a varint
            _, offset = _varint(body, offset)
        elif tag == (2 << 3) | 2:  # message: length-delimited UTF-8
            size, offset = _varint(body, offset)
            if offset + size > len(body):
                return None
            return body[offset : offset + size].decode("utf-8", "replace")
        else:
            return None
    return None


def _varint(body: bytes, offset: int) -> tuple[int, int]:
    value = shift = 0
    while offset < len(body):
        byte = body[offset]
        offset += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            break
    return value, offset
