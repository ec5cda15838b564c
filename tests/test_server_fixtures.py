"""The recorded OTLP fixtures sent over the wire (OTLP/JSON, protobuf, gzip, gRPC) give the same
trajectories as mapping the same files in-process."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import grpc
import pytest

from tests.support.server_inprocess import running_server
from tests.support.server_otlp import otlp_json_to_proto, post
from tracegrade.ingest.decode import read_otlp_file
from tracegrade.models.execution import ExecutionResult
from tracegrade.store import TraceStore
from tracegrade.store.rows import decompress_json
from tracegrade.trajectory import map_spans

FIXTURES = sorted((Path(__file__).parent / "data" / "otlp").glob("*.otlp.json"))
TRACE_EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


def _send(wire: str, server: Any, document: dict[str, Any]) -> None:
    if wire == "grpc":
        with grpc.insecure_channel(server.grpc_target) as channel:
            channel.unary_unary(TRACE_EXPORT)(otlp_json_to_proto(document), timeout=30)
        return
    if wire == "json":
        reply = post(f"{server.http_url}/v1/traces", json.dumps(document).encode(), "application/json")
    else:
        reply = post(f"{server.http_url}/v1/traces", otlp_json_to_proto(document), gzip_body=wire == "protobuf-gzip")
    assert reply.status == 200, reply.body
    assert b"partial" not in reply.body.lower()  # nothing rejected


def _comparable(result: ExecutionResult) -> dict[str, Any]:
    return result.model_dump(mode="json")


@pytest.mark.parametrize("wire", ["json", "protobuf", "protobuf-gzip", "grpc"])
def test_fixtures_over_the_wire_map_to_the_same_trajectories(tmp_path: Path, wire: str) -> None:
    store_path = tmp_path / "fixtures.duckdb"
    with running_server(store_path) as server:
        for fixture in FIXTURES:
            _send(wire, server, json.loads(fixture.read_text()))

    store = TraceStore(store_path, read_only=True)
    try:
        for fixture in FIXTURES:
            decoded, _ = read_otlp_file(fixture)
            expected = map_spans(decoded.spans)
            trace_ids = sorted({span.trace_id for span in decoded.spans})
            stored = store.load_spans(trace_ids)
            assert sum(len(spans) for spans in stored.values()) == len(decoded.spans), fixture.name
            from_store = map_spans([span for trace_id in trace_ids for span in stored[trace_id]])
            assert _comparable(from_store) == _comparable(expected), fixture.name

            placeholders = ", ".join("?" for _ in trace_ids)
            rows = store.query(f"SELECT execution FROM traces WHERE trace_id IN ({placeholders})", trace_ids).rows
            assert len(rows) == 1, f"expected one trajectory row for {fixture.name}"
            assert json.loads(decompress_json(rows[0][0])) == _comparable(expected), fixture.name
            tool_rows = store.query(
                f"SELECT name FROM tool_calls WHERE trace_id IN ({placeholders}) ORDER BY trace_id, seq", trace_ids
            ).rows
            assert [row[0] for row in tool_rows] == [call.name for call in expected.tool_calls], fixture.name
    finally:
        store.close()
