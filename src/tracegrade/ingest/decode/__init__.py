"""Pure OTLP decoders: protobuf, OTLP/JSON, parsed gRPC messages and files -> SpanRecord / LogRecordData.

Every public decoder raises only ``tracegrade.errors.DecodeError`` (whole request undecodable);
individual bad spans or log records come back as ``Rejection`` entries while the rest are kept.
Attribute values decode to plain Python values (bytes as base64 text); hostile sizes are bounded by
``DecodeLimits`` (see ``tracegrade.ingest.decode.limits`` for what each limit does).
"""

from tracegrade.ingest.decode.files import read_otlp_file
from tracegrade.ingest.decode.json_form import decode_logs_json, decode_traces_json
from tracegrade.ingest.decode.limits import DEFAULT_LIMITS, DecodeLimits
from tracegrade.ingest.decode.proto import (
    decode_logs_message,
    decode_logs_proto,
    decode_traces_message,
    decode_traces_proto,
)
from tracegrade.ingest.decode.results import DecodedLogs, DecodedTraces, Rejection

__all__ = [
    "DEFAULT_LIMITS",
    "DecodeLimits",
    "DecodedLogs",
    "DecodedTraces",
    "Rejection",
    "decode_logs_json",
    "decode_logs_message",
    "decode_logs_proto",
    "decode_traces_json",
    "decode_traces_message",
    "decode_traces_proto",
    "read_otlp_file",
]
