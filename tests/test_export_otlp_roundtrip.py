"""`tracegrade export --format otlp|otlp-json` round trips, span by span and log record by log record: store A,
filled by the real OpenTelemetry exporters through a real `tracegrade serve`, is exported, the file imported by
`tracegrade import` into store B, and every stored column of every span and log record is the same in B (all but
``received_at``, the time B wrote it). Protobuf and OTLP/JSON lines, gzip'd or not, to a file or standard output;
the JSON lines are checked line by line against protobuf's own JSON form of the same request (hex ids aside),
which is the OTLP/JSON encoding the Collector's ``file`` exporter writes and its ``otlpjsonfile`` receiver reads.
"""

from __future__ import annotations

import base64
import gzip
import json
from pathlib import Path
from typing import Any

import duckdb
import pytest
from click.testing import CliRunner
from google.protobuf import json_format
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tests.support.grading_cli import run_cli
from tests.support.otlp_export_traffic import SPANS_PER_SEND, Sent, send_rich_traffic
from tests.support.server_otlp import otlp_json_to_proto
from tests.support.server_process import ServerProcess
from tracegrade.cli.main import cli

SPAN_COLUMNS = (
    "tenant, trace_id, span_id, parent_span_id, name, kind, service_name, scope_name, scope_version, start_time, "
    "end_time, start_ns, end_ns, duration_ms, status_code, status_message, attributes, events, links, resource, "
    "trace_state, flags, dropped_attributes_count, dropped_events_count, dropped_links_count, "
    "resource_schema_url, resource_dropped_attributes_count, scope_attributes, scope_schema_url, "
    "scope_dropped_attributes_count"
)
LOG_COLUMNS = (
    "tenant, log_key, trace_id, span_id, time, time_ns, observed_time_ns, event_name, severity_number, "
    "severity_text, body, attributes, resource, service_name, scope_name, scope_version, flags, "
    "dropped_attributes_count, resource_schema_url, resource_dropped_attributes_count, scope_attributes, "
    "scope_schema_url, scope_dropped_attributes_count"
)
_ID_KEYS = ("traceId", "spanId", "parentSpanId")


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Sent]:
    """Store A: the rich traffic sent through a real server, which is then stopped (its spans all committed)."""
    store = tmp_path_factory.mktemp("export-otlp-a") / "a.duckdb"
    server = ServerProcess(store).start()
    try:
        sent = send_rich_traffic(server.http_url, server.grpc_target)
    finally:
        assert server.terminate() == 0, server.log()
    return store, sent


def rows(store: Path, table: str, columns: str) -> list[tuple[Any, ...]]:
    with duckdb.connect(str(store), read_only=True) as con:
        return con.execute(f"SELECT {columns} FROM {table} ORDER BY ALL").fetchall()


def assert_same_records(a: Path, b: Path) -> None:
    spans_a, spans_b = rows(a, "spans", SPAN_COLUMNS), rows(b, "spans", SPAN_COLUMNS)
    assert len(spans_b) == len(spans_a)
    for span_a, span_b in zip(spans_a, spans_b):
        assert span_b == span_a
    logs_a, logs_b = rows(a, "logs", LOG_COLUMNS), rows(b, "logs", LOG_COLUMNS)
    assert len(logs_b) == len(logs_a)
    for log_a, log_b in zip(logs_a, logs_b):
        assert log_b == log_a


def test_the_traffic_holds_every_field_a_store_keeps(filled: tuple[Path, Sent]) -> None:
    """Store A is not trivial: what the round trips compare is there to compare."""
    store, sent = filled
    with duckdb.connect(str(store), read_only=True) as con:
        (spans, kinds, statuses, scopes, resources, events, links, dropped, states) = con.execute(
            "SELECT count(*), count(DISTINCT kind), count(DISTINCT status_code), count(DISTINCT scope_name), "
            "count(DISTINCT resource), max(json_array_length(events)), max(json_array_length(links)), "
            "min(dropped_attributes_count + dropped_events_count + dropped_links_count) FILTER "
            "(WHERE dropped_attributes_count > 0 OR dropped_links_count > 0), "
            "count(*) FILTER (WHERE trace_state <> '') "
            "FROM spans"
        ).fetchone()
        logs, bodies = con.execute("SELECT count(*), count(DISTINCT json_type(body)) FROM logs").fetchone()
    assert spans == sent.spans == SPANS_PER_SEND
    assert (kinds, statuses, scopes, resources) == (5, 3, 3, 2)
    assert events == 3 and links == 2 and dropped > 0 and states > 0
    assert logs == sent.logs and bodies == 4  # a string, an object, an array and null


@pytest.mark.parametrize(
    ("fmt", "name"),
    [
        ("otlp", "a.otlp"),
        ("otlp", "a.otlp.gz"),
        ("otlp-json", "a.jsonl"),
        ("otlp-json", "a.json.gz"),
        ("otlp", "-"),
        ("otlp-json", "-"),
    ],
)
def test_export_then_import_stores_every_span_and_log_record_as_it_was(
    filled: tuple[Path, Sent], tmp_path: Path, fmt: str, name: str
) -> None:
    store_a, sent = filled
    store_b = tmp_path / "b.duckdb"
    if name == "-":
        exported = CliRunner().invoke(cli, ["export", "--store", str(store_a), "--format", fmt, "-o", "-"])
        assert exported.exit_code == 0, exported.output
        assert f"{sent.spans} spans and {sent.logs} log records" in exported.stderr
        imported = CliRunner().invoke(cli, ["import", "--store", str(store_b), "-"], input=exported.stdout_bytes)
    else:
        output = tmp_path / name
        exported = run_cli("export", "--store", store_a, "--format", fmt, "-o", output)
        assert exported.exit_code == 0, exported.output
        assert f"{sent.spans} spans and {sent.logs} log records" in exported.stdout
        if name.endswith(".gz"):
            assert output.read_bytes()[:2] == b"\x1f\x8b"
        imported = run_cli("import", "--store", store_b, output)
    assert imported.exit_code == 0, imported.output
    assert f"{sent.spans} spans imported" in imported.stdout and f"{sent.logs} log records imported" in imported.stdout
    assert_same_records(store_a, store_b)


def _ids_to_hex(node: Any) -> Any:
    """protobuf's JSON form with its base64 ids as OTLP/JSON's hex."""
    if isinstance(node, dict):
        return {
            key: base64.b64decode(value).hex() if key in _ID_KEYS and isinstance(value, str) else _ids_to_hex(value)
            for key, value in node.items()
        }
    if isinstance(node, list):
        return [_ids_to_hex(item) for item in node]
    return node


def test_json_lines_are_the_otlp_json_encoding_of_each_request(filled: tuple[Path, Sent], tmp_path: Path) -> None:
    """Each line is one request in the OTLP/JSON encoding: exactly what protobuf's JSON printer makes of the same
    request (camelCase names, int64 and fixed64 as strings, enums as numbers, defaults left out), with hex ids."""
    store_a, sent = filled
    output = tmp_path / "collector.jsonl"
    exported = run_cli("export", "--store", store_a, "--format", "otlp-json", "-o", output)
    assert exported.exit_code == 0, exported.output
    lines = output.read_bytes().split(b"\n")
    assert lines[-1] == b"" and all(lines[:-1])  # one request per line, each ended by a newline
    spans = logs = 0
    for line in lines[:-1]:
        request = json.loads(line)
        kind = ExportLogsServiceRequest if "resourceLogs" in request else ExportTraceServiceRequest
        message = kind.FromString(otlp_json_to_proto(request))  # ParseDict refuses any field name OTLP lacks
        canonical = _ids_to_hex(json_format.MessageToDict(message, use_integers_for_enums=True))
        assert request == canonical
        spans += sum(len(ss["spans"]) for rs in request.get("resourceSpans", []) for ss in rs["scopeSpans"])
        logs += sum(len(sl["logRecords"]) for rl in request.get("resourceLogs", []) for sl in rl["scopeLogs"])
    assert (spans, logs) == (sent.spans, sent.logs)
    first_span = json.loads(lines[0])["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    assert len(first_span["traceId"]) == 32 and isinstance(first_span["startTimeUnixNano"], str)


def test_a_gzip_export_is_the_plain_export_compressed(filled: tuple[Path, Sent], tmp_path: Path) -> None:
    store_a, _ = filled
    for name in ("plain.otlp", "packed.otlp.gz"):
        assert run_cli("export", "--store", store_a, "--format", "otlp", "-o", tmp_path / name).exit_code == 0
    assert gzip.decompress((tmp_path / "packed.otlp.gz").read_bytes()) == (tmp_path / "plain.otlp").read_bytes()
