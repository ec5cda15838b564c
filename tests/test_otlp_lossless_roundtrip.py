"""An acknowledged span's (and log record's) whole OTLP envelope survives: the resource's schema URL and dropped
attribute count, the instrumentation scope's attributes, schema URL and dropped attribute count (and a log record's
scope version).

Store A is filled through a real `tracegrade serve` by the OpenTelemetry SDK's exporters (gRPC and HTTP/protobuf,
spans and logs) with tracers and loggers made with a schema URL and scope attributes and resources with a schema
URL, and by OTLP/JSON posts carrying the dropped counts the SDK never sends. `tracegrade export --format otlp` (and
`otlp-json`) then `tracegrade import` into store B, directly and through a server holding B, gives back every stored
column of every span and log record; the exported requests group records as OTLP does.
"""

from __future__ import annotations

import inspect
import json
import urllib.request
from pathlib import Path
from typing import Any

import duckdb
import pytest
from opentelemetry._logs import LogRecord, SeverityNumber
from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter as GrpcLogExporter
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter as HttpLogExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, set_span_in_context

from tests.support.grading_cli import run_cli
from tests.support.server_otlp import otlp_json_to_proto
from tests.support.server_process import ServerProcess
from tracegrade.cli.otlp_encode import logs_requests, traces_requests
from tracegrade.cli.otlp_json_encode import logs_json_requests, traces_json_requests
from tracegrade.cli.stored_records import Selection, log_pages, span_pages
from tracegrade.store import TraceStore

# SDK 1.25 and 1.26 make tracers and loggers without scope attributes: the envelope then has none to keep
SCOPE_ATTRIBUTES = "attributes" in inspect.signature(TracerProvider.get_tracer).parameters
LOGGER_ATTRIBUTES = "attributes" in inspect.signature(LoggerProvider.get_logger).parameters
ENVELOPE = (
    "service_name, resource_schema_url, resource_dropped_attributes_count, scope_name, scope_version, "
    "scope_attributes::VARCHAR, scope_schema_url, scope_dropped_attributes_count"
)
SCHEMA_GRPC = "https://opentelemetry.io/schemas/1.21.0"
SCHEMA_HTTP = "https://opentelemetry.io/schemas/1.26.0"
SCOPE_SCHEMA = "https://example.com/schemas/alpha/2.1"
TRACE_ID = 0x5B8EFFF798038103D269B633813FC60C
SAMPLED = TraceFlags(TraceFlags.SAMPLED)  # else the SDK's parent-based sampler drops the spans


def _tracer(provider: TracerProvider, name: str, version: str, url: str | None, attributes: dict[str, Any]) -> Any:
    if SCOPE_ATTRIBUTES:
        return provider.get_tracer(name, version, schema_url=url, attributes=attributes)
    return provider.get_tracer(name, version, schema_url=url)


def _logger(provider: LoggerProvider, name: str, version: str, url: str | None, attributes: dict[str, Any]) -> Any:
    if LOGGER_ATTRIBUTES:
        return provider.get_logger(name, version, schema_url=url, attributes=attributes)
    return provider.get_logger(name, version, schema_url=url)


def _scope(attributes: dict[str, Any], supported: bool) -> str:
    return json.dumps(attributes if supported else {}, separators=(",", ":"))


def _send_sdk_spans(server: ServerProcess) -> set[tuple[Any, ...]]:
    """Spans through the SDK's gRPC and HTTP exporters; the envelopes the store must then hold."""
    grpc = TracerProvider(resource=Resource({"service.name": "lossless-grpc", "pod": 3}, schema_url=SCHEMA_GRPC))
    grpc.add_span_processor(SimpleSpanProcessor(GrpcSpanExporter(endpoint=server.grpc_target, insecure=True)))
    http = TracerProvider(resource=Resource({"service.name": "lossless-http"}, schema_url=SCHEMA_HTTP))
    http.add_span_processor(SimpleSpanProcessor(HttpSpanExporter(endpoint=f"{server.http_url}/v1/traces")))
    search = {"team": "search", "shard": 3, "weights": [0.5, 1.5]}
    ranking = {"team": "ranking"}  # the same scope name and version with other attributes: another scope
    alpha = _tracer(grpc, "lossless.alpha", "1.0", SCOPE_SCHEMA, search)
    alpha_ranking = _tracer(grpc, "lossless.alpha", "1.0", SCOPE_SCHEMA, ranking)
    beta = grpc.get_tracer("lossless.beta")  # no version, schema URL or attributes
    gamma = _tracer(http, "lossless.gamma", "0.3", SCOPE_SCHEMA, {"flag": True})
    parent = set_span_in_context(
        NonRecordingSpan(SpanContext(TRACE_ID, 0x1111111111111111, is_remote=True, trace_flags=SAMPLED))
    )
    for tracer, name in ((alpha, "alpha"), (alpha_ranking, "alpha ranking"), (beta, "beta"), (gamma, "gamma")):
        with tracer.start_as_current_span(name, context=parent):
            pass
    grpc.shutdown()
    http.shutdown()
    return {
        ("lossless-grpc", SCHEMA_GRPC, 0, "lossless.alpha", "1.0", _scope(search, SCOPE_ATTRIBUTES), SCOPE_SCHEMA, 0),
        ("lossless-grpc", SCHEMA_GRPC, 0, "lossless.alpha", "1.0", _scope(ranking, SCOPE_ATTRIBUTES), SCOPE_SCHEMA, 0),
        ("lossless-grpc", SCHEMA_GRPC, 0, "lossless.beta", "", "{}", "", 0),
        (
            "lossless-http",
            SCHEMA_HTTP,
            0,
            "lossless.gamma",
            "0.3",
            _scope({"flag": True}, SCOPE_ATTRIBUTES),
            SCOPE_SCHEMA,
            0,
        ),
    }


def _send_sdk_logs(server: ServerProcess) -> set[tuple[Any, ...]]:
    """Log records through the SDK's gRPC and HTTP log exporters; the envelopes the store must then hold."""
    context = set_span_in_context(NonRecordingSpan(SpanContext(TRACE_ID, 0x2222222222222222, is_remote=True)))
    expected = set()
    for kind, exporter in (
        ("grpc", GrpcLogExporter(endpoint=server.grpc_target, insecure=True)),
        ("http", HttpLogExporter(endpoint=f"{server.http_url}/v1/logs")),
    ):
        provider = LoggerProvider(resource=Resource({"service.name": f"lossless-logs-{kind}"}, schema_url=SCHEMA_HTTP))
        provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
        attributes = {"channel": kind, "ordinal": 2}
        logger = _logger(provider, f"lossless.logs.{kind}", "2.0", SCOPE_SCHEMA, attributes)
        plain = provider.get_logger("lossless.logs.plain")
        for emitter, body in ((logger, f"{kind} with a scope"), (plain, f"{kind} without")):
            emitter.emit(LogRecord(body=body, severity_number=SeverityNumber.INFO, context=context))
        provider.shutdown()
        scope = _scope(attributes, LOGGER_ATTRIBUTES)
        expected |= {
            (f"lossless-logs-{kind}", SCHEMA_HTTP, 0, f"lossless.logs.{kind}", "2.0", scope, SCOPE_SCHEMA, 0),
            (f"lossless-logs-{kind}", SCHEMA_HTTP, 0, "lossless.logs.plain", "", "{}", "", 0),
        }
    return expected


def _envelope_json(signal: str, items: str, item: dict[str, Any]) -> dict[str, Any]:
    """A request whose resource and scope carry every envelope field, dropped counts too."""
    return {
        f"resource{signal}": [
            {
                "resource": {
                    "attributes": [{"key": "service.name", "value": {"stringValue": f"lossless-json-{items}"}}],
                    "droppedAttributesCount": 4,
                },
                "schemaUrl": SCHEMA_GRPC,
                f"scope{signal}": [
                    {
                        "scope": {
                            "name": "lossless.json",
                            "version": "7",
                            "attributes": [
                                {
                                    "key": "nested",
                                    "value": {"kvlistValue": {"values": [{"key": "k", "value": {"intValue": "1"}}]}},
                                }
                            ],
                            "droppedAttributesCount": 2,
                        },
                        "schemaUrl": SCOPE_SCHEMA,
                        items: [item],
                    }
                ],
            }
        ]
    }


def _post_json(server: ServerProcess, path: str, body: dict[str, Any]) -> None:
    request = urllib.request.Request(
        f"{server.http_url}{path}", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.status == 200
        assert json.loads(response.read() or b"{}").get("partialSuccess") in (None, {})


def _send_json(server: ServerProcess) -> set[tuple[Any, ...]]:
    span = {
        "traceId": f"{TRACE_ID:032x}",
        "spanId": "3333333333333333",
        "name": "json span",
        "startTimeUnixNano": "1767225600000000000",
        "endTimeUnixNano": "1767225601000000000",
    }
    _post_json(server, "/v1/traces", _envelope_json("Spans", "spans", span))
    record = {"timeUnixNano": "1767225600500000000", "traceId": f"{TRACE_ID:032x}", "body": {"stringValue": "json"}}
    _post_json(server, "/v1/logs", _envelope_json("Logs", "logRecords", record))
    scope = '{"nested":{"k":1}}'
    return {
        ("lossless-json-spans", SCHEMA_GRPC, 4, "lossless.json", "7", scope, SCOPE_SCHEMA, 2),
        ("lossless-json-logRecords", SCHEMA_GRPC, 4, "lossless.json", "7", scope, SCOPE_SCHEMA, 2),
    }


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, set[tuple[Any, ...]], set[tuple[Any, ...]]]:
    """Store A, filled through a real server that is then stopped; the span and log envelopes it must hold."""
    store = tmp_path_factory.mktemp("lossless-a") / "a.duckdb"
    server = ServerProcess(store).start()
    try:
        spans = _send_sdk_spans(server)
        logs = _send_sdk_logs(server)
        sent_json = _send_json(server)
    finally:
        assert server.terminate() == 0, server.log()
    spans |= {row for row in sent_json if row[0] == "lossless-json-spans"}
    logs |= {row for row in sent_json if row[0] == "lossless-json-logRecords"}
    return store, spans, logs


def _rows(store: Path, table: str, columns: str = "* EXCLUDE (received_at)") -> list[tuple[Any, ...]]:
    with duckdb.connect(str(store), read_only=True) as con:
        return con.execute(f"SELECT {columns} FROM {table} ORDER BY ALL").fetchall()


def test_every_intake_path_stores_the_whole_envelope(filled: tuple[Path, set, set]) -> None:
    store, spans, logs = filled
    assert set(_rows(store, "spans", ENVELOPE)) == spans
    assert set(_rows(store, "logs", ENVELOPE)) == logs
    assert len(_rows(store, "spans")) == 5 and len(_rows(store, "logs")) == 5


def _assert_same_rows(filled: tuple[Path, set, set], b: Path) -> None:
    """Store ``b`` holds every column of every span and log record of store A, the envelopes included."""
    a, spans, logs = filled
    for table in ("spans", "logs"):
        rows_a, rows_b = _rows(a, table), _rows(b, table)
        assert len(rows_b) == len(rows_a), table
        for row_a, row_b in zip(rows_a, rows_b):
            assert row_b == row_a, table
    assert set(_rows(b, "spans", ENVELOPE)) == spans
    assert set(_rows(b, "logs", ENVELOPE)) == logs


@pytest.mark.parametrize(("fmt", "name"), [("otlp", "a.otlp"), ("otlp-json", "a.jsonl")])
def test_export_then_import_keeps_every_column_of_every_record(
    filled: tuple[Path, set, set], tmp_path: Path, fmt: str, name: str
) -> None:
    store_a, _, _ = filled
    output = tmp_path / name
    exported = run_cli("export", "--store", store_a, "--format", fmt, "-o", output)
    assert exported.exit_code == 0, exported.output
    store_b = tmp_path / "b.duckdb"
    imported = run_cli("import", "--store", store_b, output)
    assert imported.exit_code == 0, imported.output
    _assert_same_rows(filled, store_b)


def test_import_through_a_server_keeps_every_column_of_every_record(
    filled: tuple[Path, set, set], tmp_path: Path
) -> None:
    """`import` into a store a server holds sends the records through it (``otlp_encode``): nothing is lost there."""
    store_a, _, _ = filled
    output = tmp_path / "a.otlp"
    assert run_cli("export", "--store", store_a, "--format", "otlp", "-o", output).exit_code == 0
    store_b = tmp_path / "held.duckdb"
    server = ServerProcess(store_b).start()
    try:
        imported = run_cli("import", "--store", store_b, output)
        assert imported.exit_code == 0, imported.output
        assert "sending to" in imported.stdout
    finally:
        assert server.terminate() == 0, server.log()
    _assert_same_rows(filled, store_b)


def _group_keys(blocks: list[Any], scopes_of: str) -> tuple[list[Any], list[Any]]:
    """The (resource, schema URL) of each resource block and the scope keys of each scope block of a request."""
    resources, scopes = [], []
    for block in blocks:
        resources.append((block.resource.SerializeToString(deterministic=True), block.schema_url))
        scopes += [
            (resources[-1], s.scope.SerializeToString(deterministic=True), s.schema_url)
            for s in getattr(block, scopes_of)
        ]
    return resources, scopes


def test_exported_requests_group_records_as_otlp_does(filled: tuple[Path, set, set]) -> None:
    """One ResourceSpans per resource and schema URL, one ScopeSpans per scope (name, version, attributes, schema
    URL) within it: the two alpha scopes that differ only by attributes stay apart, the gRPC provider's three
    scopes share its one resource block. The same for log records, and for the OTLP/JSON encoder."""
    store, spans, logs = filled
    with TraceStore(store, read_only=True) as reader:
        stored_spans = [s for page in span_pages(reader, Selection()) for s in page]
        stored_logs = [r for page in log_pages(reader, Selection()) for r in page]
    sizes = {"max_items": 1_000, "max_bytes": 1 << 24}
    ((trace_body, _),) = traces_requests(stored_spans, **sizes)
    ((json_trace_body, _),) = traces_json_requests(stored_spans, **sizes)
    ((log_body, _),) = logs_requests(stored_logs, **sizes)
    ((json_log_body, _),) = logs_json_requests(stored_logs, **sizes)
    for body in (trace_body, otlp_json_to_proto(json.loads(json_trace_body))):
        request = ExportTraceServiceRequest.FromString(body)
        resources, scopes = _group_keys(list(request.resource_spans), "scope_spans")
        assert len(resources) == len(set(resources)) == 3  # grpc, http, json
        assert len(scopes) == len(set(scopes)) == len(spans) == 5
        grpc = next(b for b in request.resource_spans if b.schema_url == SCHEMA_GRPC and len(b.scope_spans) > 1)
        assert sorted(s.scope.name for s in grpc.scope_spans) == ["lossless.alpha", "lossless.alpha", "lossless.beta"]
    for body in (log_body, otlp_json_to_proto(json.loads(json_log_body))):
        request = ExportLogsServiceRequest.FromString(body)
        resources, scopes = _group_keys(list(request.resource_logs), "scope_logs")
        assert len(resources) == len(set(resources)) == 3
        assert len(scopes) == len(set(scopes)) == len(logs) == 5
        json_block = next(b for b in request.resource_logs if b.resource.dropped_attributes_count == 4)
        (scope_logs,) = json_block.scope_logs
        assert (scope_logs.scope.version, scope_logs.scope.dropped_attributes_count) == ("7", 2)
        assert scope_logs.schema_url == SCOPE_SCHEMA and json_block.schema_url == SCHEMA_GRPC
