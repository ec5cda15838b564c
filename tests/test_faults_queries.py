"""Readers cannot hurt the writer: runaway queries are cancelled (time limit, client gone, shutdown), and heavy
queries in a loop during sustained ingest cost no acknowledged span, refuse no export for good and leave the
store consistent (every key unique, the file still opens after a SIGKILL)."""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter

from tests.support.export_load import ExportLoad, assert_stored_once, make_batches
from tests.support.server_process import ServerProcess
from tests.support.server_requests import query

RUNAWAY = "SELECT count(*) FROM range(1000000000) a, range(1000000000) b WHERE a.range + b.range = -1"
HEAVY = [  # each needs far more memory than the store's budget unless it spills
    "SELECT a.trace_id, count(*), max(length(a.attributes::VARCHAR || b.attributes::VARCHAR)) "
    "FROM spans a JOIN spans b ON a.trace_id = b.trace_id GROUP BY a.trace_id ORDER BY 2 DESC LIMIT 3",
    "SELECT name, string_agg(attributes::VARCHAR, ',') AS everything FROM spans GROUP BY name ORDER BY name",
    "SELECT * FROM spans ORDER BY attributes::VARCHAR DESC, span_id LIMIT 5",
]


def _post_query(url: str, sql: str, timeout: float = 120) -> tuple[int, dict]:
    request = urllib.request.Request(
        f"{url}/v1/query", json.dumps({"sql": sql}).encode(), {"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_a_runaway_query_is_cancelled_at_its_time_limit(tmp_path: Path) -> None:
    with ServerProcess(tmp_path / "s.duckdb", extra_args=("--query-timeout", "1")) as server:
        status, body = _post_query(server.http_url, RUNAWAY)
        assert status == 400
        assert "cancelled: it ran longer than its time limit of 1 s (--query-timeout)" in body["message"]
        assert query(server.http_url, "SELECT 1") == [[1]]


def test_the_web_ui_reads_within_the_receivers_query_limits(tmp_path: Path) -> None:
    with ServerProcess(tmp_path / "s.duckdb", extra_args=("--query-timeout", "1")) as server:
        request = urllib.request.Request(
            f"{server.http_url}/ui/api/sql", json.dumps({"sql": RUNAWAY}).encode(), {"Content-Type": "application/json"}
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=120)
        assert refused.value.code == 400
        assert "time limit of 1 s (--query-timeout)" in refused.value.read().decode()


def test_a_query_whose_client_hangs_up_is_cancelled(tmp_path: Path) -> None:
    """With one query turn and a long time limit, a later query can only run if the hung-up one was stopped."""
    with ServerProcess(tmp_path / "s.duckdb", extra_args=("--max-queries", "1", "--query-timeout", "600")) as server:
        body = json.dumps({"sql": RUNAWAY}).encode()
        with socket.create_connection(("127.0.0.1", server.http_port)) as client:
            client.sendall(
                b"POST /v1/query HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                + f"Content-Length: {len(body)}\r\n\r\n".encode()
                + body
            )
            time.sleep(1.0)  # the runaway is running and holds the only turn
        status, reply = _post_query(server.http_url, "SELECT 42", timeout=120)
        assert (status, reply["rows"]) == (200, [[42]])


def test_sigterm_stops_the_receiver_while_a_runaway_query_runs(tmp_path: Path) -> None:
    server = ServerProcess(tmp_path / "s.duckdb", extra_args=("--query-timeout", "600", "--shutdown-timeout", "5"))
    server.start()
    answers: list[int] = []
    runner = threading.Thread(target=lambda: answers.append(_post_query(server.http_url, RUNAWAY)[0]), daemon=True)
    try:
        runner.start()
        time.sleep(1.0)
        assert server.terminate(timeout=60) == 0  # a hang would fail here (terminate waits, then raises)
    finally:
        server.kill()
    runner.join(30)
    assert answers and answers[0] in (400, 503)


@pytest.mark.slow
def test_heavy_queries_during_sustained_ingest_lose_nothing(tmp_path: Path) -> None:
    store = tmp_path / "s.duckdb"
    server = ServerProcess(store, extra_args=("--query-memory-limit", "64MB", "--query-timeout", "20"))
    server.start()
    batches = make_batches(240, 25, payload_bytes=1500)
    loads = [
        ExportLoad(HttpSpanExporter(endpoint=f"{server.http_url}/v1/traces", timeout=60), batches[0::2], pause=0.02),
        ExportLoad(GrpcSpanExporter(endpoint=server.grpc_target, insecure=True, timeout=60), batches[1::2], 0.02),
    ]
    outcomes: dict[int, int] = {}
    stop = threading.Event()

    def query_loop() -> None:
        index = 0
        while not stop.is_set():
            status, _ = _post_query(server.http_url, HEAVY[index % len(HEAVY)])
            outcomes[status] = outcomes.get(status, 0) + 1
            index += 1

    readers = [threading.Thread(target=query_loop, daemon=True) for _ in range(3)]
    try:
        for thread in (*loads, *readers):
            thread.start()
        for load in loads:
            load.join(300)
            assert not load.is_alive(), "an exporter never finished"
        stop.set()
        for reader in readers:
            reader.join(60)
        assert sum(outcomes.values()) >= 3, outcomes  # the queries really ran during the load
        assert set(outcomes) <= {200, 400, 503}, outcomes
        assert all(load.failed_batches == 0 for load in loads), "an export was given up"
        rows = query(server.http_url, "SELECT count(*), count(DISTINCT (trace_id, span_id)) FROM spans")
        assert rows[0][0] == rows[0][1] == 240 * 25
    finally:
        stop.set()
        server.kill()
    with ServerProcess(store):  # the file opens, the journal replays
        pass
    assert_stored_once(store, [ids for load in loads for ids in load.acked])
