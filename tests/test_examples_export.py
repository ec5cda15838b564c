"""With OTEL_EXPORTER_OTLP_ENDPOINT set, the examples also export their spans to a real `tracegrade serve`."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from .support.examples import EXAMPLES, run_example
from .support.server_process import ServerProcess
from .support.server_requests import query

TOKEN = "example-token"


def stored_cases(server: ServerProcess, timeout: float = 30.0) -> set[str]:
    """The case ids of the stored traces, once their trajectories are mapped."""
    deadline = time.monotonic() + timeout
    while True:
        rows = query(server.http_url, "SELECT DISTINCT case_id FROM traces WHERE case_id IS NOT NULL", token=TOKEN)
        if rows or time.monotonic() > deadline:
            time.sleep(1.0 if rows else 0)  # let the last traces of the run settle too
            rows = query(server.http_url, "SELECT DISTINCT case_id FROM traces WHERE case_id IS NOT NULL", token=TOKEN)
            return {row[0] for row in rows}
        time.sleep(0.3)


@pytest.fixture
def server(tmp_path: Path):
    with ServerProcess(tmp_path / "served.duckdb", extra_args=("--token", TOKEN)) as running:
        yield running


@pytest.mark.parametrize(
    ("example", "protocol", "cases"),
    [
        (
            "langgraph_weather",
            "http/protobuf",
            {"paris-weather", "compare-two-cities", "greeting", "two-turns", "berlin-forecast"},
        ),
        ("pydantic_ai_support", "grpc", {"order-status", "cancel-processing", "cancel-shipped"}),
    ],
)
def test_example_spans_arrive_at_the_server(server: ServerProcess, tmp_path: Path, example, protocol, cases) -> None:
    port = server.grpc_port if protocol == "grpc" else server.http_port
    otel_env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}",
        "OTEL_EXPORTER_OTLP_HEADERS": f"Authorization=Bearer {TOKEN}",
    }
    if protocol == "grpc":
        otel_env["OTEL_EXPORTER_OTLP_PROTOCOL"] = "grpc"
    run_example(example, tmp_path / "out", otel_env)
    assert stored_cases(server) == cases
    spans = query(server.http_url, "SELECT count(*) FROM spans WHERE name LIKE 'tracegrade.turn %'", token=TOKEN)
    assert spans[0][0] >= len(cases)


def test_without_the_variable_nothing_is_exported(server: ServerProcess, tmp_path: Path) -> None:
    run_example("pydantic_ai_support", tmp_path / "out", {})
    time.sleep(1.0)
    assert query(server.http_url, "SELECT count(*) FROM spans", token=TOKEN) == [[0]]


def test_recorded_example_exports_the_recorded_spans(server: ServerProcess, tmp_path: Path) -> None:
    from tracegrade.ingest.decode import read_otlp_file

    recorded = [
        span
        for path in sorted((EXAMPLES / "recorded" / "traces").glob("*.json"))
        for span in read_otlp_file(path)[0].spans
    ]
    endpoint = {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"http://127.0.0.1:{server.http_port}/v1/traces"}
    run_example(
        "recorded", tmp_path / "out", endpoint | {"OTEL_EXPORTER_OTLP_HEADERS": f"Authorization=Bearer {TOKEN}"}
    )
    sql = "SELECT trace_id, span_id, name, start_ns FROM spans ORDER BY trace_id, span_id"
    stored = query(server.http_url, sql, token=TOKEN)
    assert stored == sorted([[s.trace_id, s.span_id, s.name, s.start_ns] for s in recorded])
