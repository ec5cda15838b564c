"""OTLP response bodies: Export*ServiceResponse (with partial success) and google.rpc Status / RetryInfo.

Status and RetryInfo are two- and one-field messages; they are encoded here by hand so the receiver does
not depend on googleapis-common-protos.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from enum import Enum

from google.protobuf import json_format
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

__all__ = [
    "ExportOutcome",
    "Signal",
    "WireFormat",
    "encode_export_response",
    "encode_retry_info",
    "encode_status",
]


class Signal(str, Enum):
    TRACES = "traces"
    LOGS = "logs"


class WireFormat(str, Enum):
    PROTOBUF = "protobuf"
    JSON = "json"

    @property
    def content_type(self) -> str:
        return "application/x-protobuf" if self is WireFormat.PROTOBUF else "application/json"


@dataclass(frozen=True, slots=True)
class ExportOutcome:
    """What one export request achieved: ``accepted`` items are durable, ``rejected`` were refused."""

    accepted: int
    rejected: int = 0
    error_message: str = ""


def _export_response(signal: Signal, outcome: ExportOutcome) -> object:
    if signal is Signal.TRACES:
        response = trace_service_pb2.ExportTraceServiceResponse()
        if outcome.rejected or outcome.error_message:
            response.partial_success.rejected_spans = outcome.rejected
            response.partial_success.error_message = outcome.error_message
        return response
    response = logs_service_pb2.ExportLogsServiceResponse()
    if outcome.rejected or outcome.error_message:
        response.partial_success.rejected_log_records = outcome.rejected
        response.partial_success.error_message = outcome.error_message
    return response


def encode_export_response(signal: Signal, outcome: ExportOutcome, fmt: WireFormat) -> bytes:
    """The success body; ``partial_success`` is set only when something was rejected."""
    message = _export_response(signal, outcome)
    if fmt is WireFormat.JSON:
        return json_format.MessageToJson(message, indent=None).encode()  # type: ignore[arg-type]
    return message.SerializeToString()  # type: ignore[attr-defined]


def _varint(value: int) -> bytes:
    out = bytearray()
    value &= (1 << 64) - 1
    while True:
        low = value & 0x7F
        value >>= 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def _varint_field(number: int, value: int) -> bytes:
    return _varint(number << 3) + _varint(value) if value else b""


def _bytes_field(number: int, data: bytes) -> bytes:
    return _varint((number << 3) | 2) + _varint(len(data)) + data


def encode_status(code: int, message: str, fmt: WireFormat) -> bytes:
    """A ``google.rpc.Status`` (gRPC code number + message) in the request's encoding."""
    if fmt is WireFormat.JSON:
        return json.dumps({"code": code, "message": message}).encode()
    return _varint_field(1, code) + (_bytes_field(2, message.encode("utf-8")) if message else b"")


def encode_retry_info(seconds: float) -> bytes:
    """A ``google.rpc.RetryInfo`` for the ``google.rpc.retryinfo-bin`` trailer: retry after ``seconds``."""
    whole = math.floor(seconds)
    nanos = round((seconds - whole) * 1e9)
    duration = _varint_field(1, whole) + _varint_field(2, nanos)
    return _bytes_field(1, duration)
