"""Two tenants' agent traffic for the tenant tests: sent through the real OpenTelemetry OTLP exporters, with a
trace id both tenants use, and what each tenant must never see of the other.

Each tenant sends ``TRACES`` agent traces (OpenInference AGENT root, a node, a tool) whose every text holds
its ``marker``; its first trace has the id ``SHARED_TRACE_ID``, so the store holds one trace id twice, once per
tenant. Globex's marker is ``GLOBEX_SECRET``: no answer given to acme may hold it (see ``leaked``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator

from tests.support.server_otlp import HttpReply, post

__all__ = [
    "ACME_TOKENS",
    "GLOBEX_SECRET",
    "GLOBEX_TOKEN",
    "SHARED_TRACE_ID",
    "TRACES",
    "export_one_span",
    "leaked",
    "log_json",
    "send_agent_traces",
    "sql",
    "stored_trace_ids",
    "write_tokens",
]

ACME_TOKENS = ("acme-token-1", "acme-token-2")
GLOBEX_TOKEN = "globex-token"
GLOBEX_SECRET = "GLOBEX-SECRET-7f3a"
SHARED_TRACE_ID = 0x5EED5EED5EED5EED5EED5EED5EED5EED
TRACES = 2


def write_tokens(path: Path, tenants: dict[str, list[Any]]) -> Path:
    """A tokens file: each tenant's tokens, plain or ``{token, scopes}``."""
    path.write_text(yaml.safe_dump({"tenants": tenants}), encoding="utf-8")
    return path


class _SharedFirst(RandomIdGenerator):
    """The first trace gets ``SHARED_TRACE_ID``, every later one a random id."""

    def __init__(self) -> None:
        self.first = True

    def generate_trace_id(self) -> int:
        if self.first:
            self.first = False
            return SHARED_TRACE_ID
        return super().generate_trace_id()


def send_agent_traces(
    tenant: str, marker: str, *, grpc_target: str | None = None, http_url: str | None = None, token: str
) -> list[str]:
    """Send ``TRACES`` agent traces of ``tenant`` through the real gRPC exporter (``grpc_target``) or the
    real HTTP/protobuf one (``http_url``), authenticated with ``token``; their trace ids (hex)."""
    if grpc_target is not None:
        exporter: Any = GrpcSpanExporter(
            endpoint=grpc_target, insecure=True, headers=(("authorization", f"Bearer {token}"),)
        )
    else:
        exporter = HttpSpanExporter(endpoint=f"{http_url}/v1/traces", headers={"Authorization": f"Bearer {token}"})
    provider = TracerProvider(resource=Resource.create({"service.name": f"{tenant}-bot"}), id_generator=_SharedFirst())
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("tests.tenants")
    trace_ids = []
    for n in range(TRACES):
        attributes = {"openinference.span.kind": "AGENT", "input.value": f"{marker} question {n}"}
        with tracer.start_as_current_span(f"{tenant}-agent", attributes=attributes) as root:
            with tracer.start_as_current_span("planner", attributes={"tracegrade.span.kind": "node"}):
                pass
            tool = {
                "tracegrade.span.kind": "tool",
                "tracegrade.tool.name": f"{tenant}_lookup",
                "tracegrade.tool.arguments": json.dumps({"q": marker}),
                "tracegrade.tool.result": json.dumps({"hit": marker}),
            }
            with tracer.start_as_current_span(f"{tenant}_lookup", attributes=tool):
                pass
            root.set_attribute("output.value", f"{marker} answer {n}")
            trace_ids.append(f"{root.get_span_context().trace_id:032x}")
    provider.shutdown()
    return trace_ids


def log_json(trace_id: str, body: str) -> bytes:
    """One OTLP/JSON log record on ``trace_id`` (content often arrives as logs)."""
    record = {
        "timeUnixNano": "1767225600000000000",
        "traceId": trace_id,
        "spanId": "0" * 15 + "1",
        "body": {"stringValue": body},
        "attributes": [{"key": "event.name", "value": {"stringValue": "gen_ai.user.message"}}],
    }
    document = {"resourceLogs": [{"resource": {}, "scopeLogs": [{"scope": {"name": "tests"}, "logRecords": [record]}]}]}
    return json.dumps(document).encode()


def sql(http_url: str, statement: str, token: str, params: list[Any] | None = None) -> HttpReply:
    """``POST /v1/query`` as the tenant of ``token``."""
    body = json.dumps({"sql": statement, "params": params or []}).encode()
    return post(f"{http_url}/v1/query", body, "application/json", token=token)


def export_one_span(exporter: SpanExporter, service: str, name: str) -> str:
    """One span of service ``service`` through a real OTLP exporter, acknowledged; its trace id."""
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with provider.get_tracer("tests.tenant_traffic").start_as_current_span(name) as span:
        trace_id = f"{span.get_span_context().trace_id:032x}"
    provider.shutdown()
    return trace_id


def stored_trace_ids(http_url: str, token: str) -> set[str]:
    """The trace ids of the spans the tenant of ``token`` has in the store."""
    reply = sql(http_url, "SELECT DISTINCT trace_id FROM spans", token)
    assert reply.status == 200, reply.body
    return {row[0] for row in reply.json()["rows"]}


def leaked(text: str | bytes, *secrets: str) -> list[str]:
    """What of globex's data ``text`` holds: its marker, its service, span and tool names (no query names
    them), or any of ``secrets``."""
    value = (text.decode("utf-8", "replace") if isinstance(text, bytes) else text).lower()
    known = (GLOBEX_SECRET, "globex-bot", "globex-agent", "globex_lookup", *secrets)
    return [secret for secret in known if secret.lower() in value]
