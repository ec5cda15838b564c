"""OTLP helpers for the receiver tests: raw HTTP posts, OTLP/JSON -> protobuf, OTel SDK pipelines."""

from __future__ import annotations

import base64
import copy
import gzip
import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

from google.protobuf import json_format
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

__all__ = ["HttpReply", "otlp_json_to_proto", "post"]

_ID_KEYS = ("traceId", "spanId", "parentSpanId")


@dataclass
class HttpReply:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def post(
    url: str,
    body: bytes,
    content_type: str = "application/x-protobuf",
    *,
    gzip_body: bool = False,
    token: str | None = None,
    headers: dict[str, str] | None = None,
    method: str = "POST",
) -> HttpReply:
    """One request with urllib; HTTP errors are returned, not raised."""
    all_headers = {"Content-Type": content_type, **(headers or {})}
    if gzip_body:
        body = gzip.compress(body)
        all_headers["Content-Encoding"] = "gzip"
    if token is not None:
        all_headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, data=body, headers=all_headers, method=method)
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return HttpReply(response.status, dict(response.headers), response.read())
    except urllib.error.HTTPError as error:
        return HttpReply(error.code, dict(error.headers), error.read())


def get_text(url: str) -> tuple[int, str]:
    """A GET with urllib: the status and the body as text; HTTP errors are returned, not raised."""
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def _hex_ids_to_base64(node: Any) -> None:
    """OTLP/JSON ids are hex; protobuf's JSON parser wants base64 for bytes fields."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in _ID_KEYS and isinstance(value, str):
                node[key] = base64.b64encode(bytes.fromhex(value)).decode()
            else:
                _hex_ids_to_base64(value)
    elif isinstance(node, list):
        for item in node:
            _hex_ids_to_base64(item)


def otlp_json_to_proto(document: dict[str, Any]) -> bytes:
    """An OTLP/JSON traces or logs request as serialized protobuf (same content)."""
    converted = copy.deepcopy(document)
    _hex_ids_to_base64(converted)
    message_type = ExportLogsServiceRequest if "resourceLogs" in converted else ExportTraceServiceRequest
    return json_format.ParseDict(converted, message_type()).SerializeToString()
