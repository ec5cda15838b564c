"""Hand-built OTLP requests for receiver tests (JSON documents and protobuf), and store and metric look-ups
over HTTP."""

from __future__ import annotations

import http.client
import itertools
import json
import urllib.parse
import urllib.request
from typing import Any

from google.rpc import status_pb2

from tests.support.server_otlp import HttpReply, otlp_json_to_proto, post
from tracegrade.ui.auth import COOKIE

__all__ = [
    "count_spans",
    "exchange",
    "query",
    "receiver_metric",
    "send_span",
    "span_json",
    "status_of",
    "traces_json",
    "traces_proto",
    "ui_sign_in",
    "unique_trace_id",
]

_ids = itertools.count(1)


def unique_trace_id() -> str:
    return f"{next(_ids):032x}"


def span_json(trace_id: str, index: int, **fields: Any) -> dict[str, Any]:
    """One valid OTLP/JSON span (hex ids, string nanoseconds); ``fields`` override or add keys."""
    span = {
        "traceId": trace_id,
        "spanId": f"{index + 1:016x}",
        "name": f"span {index}",
        "kind": 1,
        "startTimeUnixNano": str(1_700_000_000_000_000_000 + index * 1000),
        "endTimeUnixNano": str(1_700_000_000_000_000_000 + index * 1000 + 500),
        "attributes": [{"key": "index", "value": {"intValue": str(index)}}],
    }
    span.update(fields)
    return span


def traces_json(spans: list[dict[str, Any]], service: str = "bad-input-test") -> dict[str, Any]:
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": service}}]},
                "scopeSpans": [{"scope": {"name": "tests"}, "spans": spans}],
            }
        ]
    }


def traces_proto(spans: list[dict[str, Any]]) -> bytes:
    return otlp_json_to_proto(traces_json(spans))


def send_span(http_url: str) -> str:
    """One span of a new trace sent as OTLP/JSON, acknowledged (200); the trace's id."""
    trace_id = unique_trace_id()
    reply = post(
        f"{http_url}/v1/traces", json.dumps(traces_json([span_json(trace_id, 0)])).encode(), "application/json"
    )
    assert reply.status == 200, reply.body
    return trace_id


def status_of(reply: HttpReply) -> status_pb2.Status:
    """The google.rpc.Status error body, in whichever encoding the server answered."""
    if reply.headers.get("Content-Type", "").startswith("application/json"):
        document = reply.json()
        return status_pb2.Status(code=document.get("code", 0), message=document.get("message", ""))
    return status_pb2.Status.FromString(reply.body)


def query(http_url: str, sql: str, params: list[Any] | None = None, token: str | None = None) -> list[list[Any]]:
    reply = post(
        f"{http_url}/v1/query", json.dumps({"sql": sql, "params": params}).encode(), "application/json", token=token
    )
    assert reply.status == 200, reply.body
    return reply.json()["rows"]


def count_spans(http_url: str, trace_id: str, token: str | None = None) -> int:
    return query(http_url, "SELECT count(*) FROM spans WHERE trace_id = ?", [trace_id], token=token)[0][0]


def receiver_metric(http_url: str, name: str, prefix: str = "tracegrade_receiver_") -> float:
    """The receiver's ``<prefix><name>`` gauge or counter (unlabelled), read from /metrics."""
    with urllib.request.urlopen(f"{http_url}/metrics", timeout=10) as response:
        page = response.read().decode()
    line = next(x for x in page.splitlines() if x.startswith(f"{prefix}{name} "))
    return float(line.split()[1])


def exchange(url: str, method: str = "GET", body: bytes | None = None, **headers: str) -> tuple[int, dict, bytes]:
    """One HTTP request with no redirect followed (header names with ``_`` for ``-``): status, headers, body."""
    parts = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    try:
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        connection.request(method, path, body=body, headers={k.replace("_", "-"): v for k, v in headers.items()})
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        connection.close()


def ui_sign_in(http_url: str, token: str, next_page: str = "/ui/") -> tuple[int, str, bytes]:
    """Sign in to the web UI with its form, as a browser on the server's own page would: the status, the UI
    cookie's value (empty when none was set) and the body."""
    form = urllib.parse.urlencode({"token": token, "next": next_page}).encode()
    status, headers, body = exchange(
        http_url + "/ui/login",
        "POST",
        form,
        Content_Type="application/x-www-form-urlencoded",
        Sec_Fetch_Site="same-origin",
    )
    cookie_name, _, rest = headers.get("Set-Cookie", "").partition("=")
    return status, rest.split(";")[0] if cookie_name == COOKIE else "", body
