"""Read OTLP dumps from disk: OTLP/JSON, the Collector file exporter's JSON lines, and protobuf.

Formats, recognised by content (the suffix forces JSON lines for ``.jsonl``/``.ndjson`` and JSON for ``.json``):

- one OTLP/JSON ExportTraceServiceRequest or ExportLogsServiceRequest (``resourceSpans`` /
  ``resourceLogs``);
- JSON lines, one request per line, traces and logs mixed, as the Collector's ``file`` exporter writes
  them (lines holding metrics or profiles are skipped); likewise requests one after another however they
  are laid out (``cat a.json b.json``), each placed by the line it starts on;
- one binary protobuf request, or the Collector file exporter's protobuf format: a sequence of
  messages each preceded by its length as a 4-byte big-endian integer. Traces and logs are told apart
  by content.

Any of these may be gzip-compressed (one or more members, as ``gzip`` and ``cat a.gz b.gz`` write them); the
suffix under ``.gz`` then decides as above.

Problems raise FileFormatError naming the file and the line (JSON) or byte offset (protobuf).
Rejected spans keep their place in the file in ``Rejection.where`` (``line 3: resourceSpans[0]...``).
"""

from __future__ import annotations

import gzip
import json
import zlib
from pathlib import Path
from typing import Any

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tracegrade.errors import DecodeError, FileFormatError
from tracegrade.ingest.decode.json_form import decode_logs_json, decode_traces_json, load_json
from tracegrade.ingest.decode.limits import DEFAULT_LIMITS, DecodeLimits
from tracegrade.ingest.decode.proto import decode_logs_message, decode_traces_message, parse_proto
from tracegrade.ingest.decode.results import DecodedLogs, DecodedTraces, Rejection

__all__ = ["read_otlp_file"]

_KIND = "OTLP file"
_LINE_SUFFIXES = {".jsonl", ".ndjson"}
_JSON_SUFFIX = ".json"
_BOM = b"\xef\xbb\xbf"
_SKIPPED_SIGNALS = ("resourceMetrics", "resource_metrics", "resourceProfiles", "resource_profiles")
_GZIP_MAGIC = b"\x1f\x8b"
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_JSON_WHITESPACE = " \t\n\r"


def read_otlp_file(
    path: str | Path, limits: DecodeLimits = DEFAULT_LIMITS, *, data: bytes | None = None
) -> tuple[DecodedTraces, DecodedLogs]:
    """Decode every span and log record in an OTLP file (see the module docstring for the formats); with
    ``data`` (what standard input held, say), decode that, ``path`` naming it in errors (its suffix decides as a
    file's would)."""
    path = Path(path)
    data = _uncompressed(path, path.read_bytes() if data is None else data)
    traces, logs = DecodedTraces(), DecodedLogs()
    suffix = path.suffix.lower()
    if suffix == ".gz":  # a.jsonl.gz is JSON lines
        suffix = Path(path.stem).suffix.lower()
    if suffix in _LINE_SUFFIXES:
        _read_json_lines(path, data, limits, traces, logs)
    elif not data.strip():
        pass  # an empty file holds nothing
    elif suffix == _JSON_SUFFIX or data.lstrip()[:1] == b"{" or data[:3] == _BOM:
        try:
            request = load_json(data)
        except DecodeError as exc:
            if "Extra data" not in str(exc):
                raise FileFormatError(str(path), [("JSON", str(exc))], kind=_KIND) from None
            # more than one request: JSON lines, or documents one after another (``cat a.json b.json``)
            _read_json_documents(path, data, limits, traces, logs)
        else:
            _add_json_request(path, "document", request, limits, traces, logs)
    else:
        _read_protobuf(path, data, limits, traces, logs)
    return traces, logs


def _read_json_lines(path: Path, data: bytes, limits: DecodeLimits, traces: DecodedTraces, logs: DecodedLogs) -> None:
    for number, line in enumerate(data.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"line {number}"
        try:
            request = load_json(line)
        except DecodeError as exc:
            raise FileFormatError(str(path), [(where, str(exc))], kind=_KIND) from None
        _add_json_request(path, where, request, limits, traces, logs)


def _uncompressed(path: Path, data: bytes) -> bytes:
    """``data`` as it was before gzip compressed it (every member), or as it is when not compressed."""
    if data[:4] == _ZSTD_MAGIC:
        raise FileFormatError(
            str(path),
            [
                (
                    "byte offset 0",
                    "the file is zstd-compressed, which import does not read: decompress it first "
                    f"(zstd -d {path}) and import the result",
                )
            ],
            kind=_KIND,
        )
    if data[:2] != _GZIP_MAGIC:
        return data
    try:
        return gzip.decompress(data)
    except (OSError, EOFError, zlib.error) as exc:
        raise FileFormatError(
            str(path),
            [("gzip", f"the gzip stream is damaged or cut short ({exc}): check it with gzip -t {path}")],
            kind=_KIND,
        ) from None


def _read_json_documents(
    path: Path, data: bytes, limits: DecodeLimits, traces: DecodedTraces, logs: DecodedLogs
) -> None:
    """Each JSON document of ``data`` in turn, however they are laid out, placed by the line it starts on."""
    text = data.decode("utf-8")  # the first document decoded, so the whole of it is UTF-8
    if text.startswith("\ufeff"):
        text = text[1:]
    boundaries = json.JSONDecoder(parse_int=len)  # only finds where each document ends: no number is kept
    position, line = 0, 1
    while True:
        start = len(text) - len(text[position:].lstrip(_JSON_WHITESPACE))
        if start == len(text):
            return
        line += text.count("\n", position, start)
        where = f"line {line}"
        try:
            end = boundaries.raw_decode(text, start)[1]
        except json.JSONDecodeError as exc:
            problem = f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
            raise FileFormatError(str(path), [(where, problem)], kind=_KIND) from None
        except RecursionError:
            end = len(text)  # load_json below says where it is nested too deeply
        try:
            request = load_json(text[start:end])
        except DecodeError as exc:
            raise FileFormatError(str(path), [(where, str(exc))], kind=_KIND) from None
        _add_json_request(path, where, request, limits, traces, logs)
        line += text.count("\n", start, end)
        position = end


def _add_json_request(
    path: Path, where: str, request: Any, limits: DecodeLimits, traces: DecodedTraces, logs: DecodedLogs
) -> None:
    if not isinstance(request, dict):
        raise FileFormatError(
            str(path), [(where, f"expected an OTLP/JSON request object, got {type(request).__name__}")], kind=_KIND
        )
    has_spans = "resourceSpans" in request or "resource_spans" in request
    has_logs = "resourceLogs" in request or "resource_logs" in request
    if not (has_spans or has_logs or any(key in request for key in _SKIPPED_SIGNALS) or not request):
        raise FileFormatError(
            str(path),
            [
                (
                    where,
                    "not an OTLP traces or logs request: no 'resourceSpans' or 'resourceLogs' "
                    f"(keys: {sorted(request)[:5]})",
                )
            ],
            kind=_KIND,
        )
    try:
        if has_spans:
            _merge(traces, decode_traces_json(request, limits), where)
        if has_logs:
            _merge(logs, decode_logs_json(request, limits), where)
    except DecodeError as exc:
        raise FileFormatError(str(path), [(where, str(exc))], kind=_KIND) from None


def _merge(into: DecodedTraces | DecodedLogs, decoded: DecodedTraces | DecodedLogs, where: str) -> None:
    if where != "document":
        decoded.rejected = [Rejection(f"{where}: {r.where}", r.reason, r.span_id) for r in decoded.rejected]
    into.extend(decoded)  # type: ignore[arg-type]


def _frames(data: bytes) -> list[tuple[int, bytes]] | None:
    """Split the Collector's length-prefixed protobuf stream, or None if ``data`` is not one."""
    frames = []
    offset = 0
    while offset < len(data):
        if offset + 4 > len(data):
            return None
        size = int.from_bytes(data[offset : offset + 4], "big")
        if offset + 4 + size > len(data):
            return None
        frames.append((offset, data[offset + 4 : offset + 4 + size]))
        offset += 4 + size
    return frames


def _read_protobuf(path: Path, data: bytes, limits: DecodeLimits, traces: DecodedTraces, logs: DecodedLogs) -> None:
    frames = _frames(data)
    if frames is None:
        frames = [(0, data)]
        describe = "protobuf message"
    else:
        describe = "length-prefixed message"
    for index, (offset, message) in enumerate(frames):
        where = f"{describe} {index + 1} at byte offset {offset}"
        try:
            decoded = _decode_protobuf_request(message, limits)
        except DecodeError as exc:
            problem = str(exc)
            if _is_text(data):
                problem += (
                    "; the file is text, not protobuf: OTLP/JSON starts with '{' (one request) or holds one "
                    "request per line (name it .jsonl)"
                )
            raise FileFormatError(str(path), [(where, problem)], kind=_KIND) from None
        _merge(
            traces if isinstance(decoded, DecodedTraces) else logs, decoded, where if len(frames) > 1 else "document"
        )


def _is_text(data: bytes) -> bool:
    """Is ``data`` UTF-8 text without control characters other than whitespace (so surely not protobuf)?"""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return all(ch.isprintable() or ch in "\t\n\r" for ch in text)


def _decode_protobuf_request(message: bytes, limits: DecodeLimits) -> DecodedTraces | DecodedLogs:
    """Traces and logs requests share their outer wire layout; real spans always carry a span id."""
    trace_error: DecodeError | None = None
    try:
        request = parse_proto(message, ExportTraceServiceRequest)
    except DecodeError as exc:
        trace_error = exc
    else:
        spans = [span for rs in request.resource_spans for ss in rs.scope_spans for span in ss.spans]
        if not spans or any(span.span_id for span in spans):
            return decode_traces_message(request, limits)
    try:
        return decode_logs_message(parse_proto(message, ExportLogsServiceRequest), limits)
    except DecodeError:
        if trace_error is not None:
            raise trace_error from None
        raise
