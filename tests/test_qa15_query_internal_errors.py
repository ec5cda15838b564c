"""Query errors tell a remote caller what failed, never how the server is laid out: DuckDB's INTERNAL error (a
lake answering ``SELECT txid_current()``) reaches the caller as its first line, without the C++ stack trace
and the install paths it names, and is logged whole; an error on the server's own files (a spill whose temp
directory cannot be made) names them as what they are, not where they are, also to the CLI reading through the
server. Afterwards the receiver still answers queries and stores spans. Real server processes, a real lake on
PostgreSQL, a real OTLP exporter."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

from tests.support import pg_cluster
from tests.support.grading_cli import run_cli
from tests.support.lake_serve import LakeServerProcess
from tests.support.pg_cluster import PgServer
from tests.support.server_otlp import HttpReply, post
from tests.support.server_process import ServerProcess
from tests.support.server_requests import count_spans
from tests.support.tenant_traffic import export_one_span
from tests.support.waiting import wait_for_value

pg_server = pg_cluster.pg_server  # the session's PostgreSQL (a fixture)

INTERNAL_FIRST_LINE = "INTERNAL Error: DuckTransaction::Get called on non-DuckDB transaction"
# a hash aggregate of 3,000,000 groups of 200-byte keys: far past the store's pool, so it must spill
SPILLING = (
    "SELECT count(*) FROM (SELECT pad, x, count(*) FROM (SELECT range AS x, repeat('y', 200) || range::VARCHAR "
    "AS pad FROM range(3000000)) GROUP BY ALL)"
)


def _ask(http_url: str, path: str, sql: str) -> HttpReply:
    return post(f"{http_url}{path}", json.dumps({"sql": sql}).encode(), "application/json")


def _error_text(reply: HttpReply) -> str:
    document = reply.json()
    return str(document.get("message") or document.get("error") or document)


def _still_serving(server: ServerProcess) -> None:
    """A query answers and an exported span is stored and read back."""
    assert _ask(server.http_url, "/v1/query", "SELECT 1 AS one").json()["rows"] == [[1]]
    exporter = OTLPSpanExporter(endpoint=f"{server.http_url}/v1/traces")
    trace_id = export_one_span(exporter, "after-the-error", "still-ingesting")
    wait_for_value(lambda: count_spans(server.http_url, trace_id), 1, "the span sent after the error")


def test_a_duckdb_internal_error_reaches_the_caller_without_its_stack_trace(
    pg_server: PgServer, tmp_path: Path
) -> None:
    location = f"ducklake:postgres:{pg_server.new_database()}"
    with LakeServerProcess(location, tmp_path / "data", tmp_path / "journal") as server:
        for path in ("/v1/query", "/ui/api/sql"):
            reply = _ask(server.http_url, path, "SELECT txid_current()")
            assert reply.status == 400, reply.body
            message = _error_text(reply)
            assert INTERNAL_FIRST_LINE in message, message
            assert "the full error is in the log" in message, message
            for private in ("Stack Trace", ".so(", sys.prefix, str(Path(__file__).parents[1]), "\n"):
                assert private not in message, f"{path} answered {private!r}: {message}"
        assert server.log().count("Stack Trace:") == 2, server.log()  # logged whole, once per query
        _still_serving(server)


def test_an_error_on_the_servers_own_files_names_them_without_their_paths(tmp_path: Path) -> None:
    store = tmp_path / "store.duckdb"
    # where DuckDB makes its temp directory on the first spill: a file already, so the spill fails
    Path(f"{store}.tmp").write_text("not a directory", encoding="utf-8")
    args = ("--store-memory-limit", "64MB", "--query-memory-limit", "16MB")
    with ServerProcess(store, extra_args=args) as server:
        reply = _ask(server.http_url, "/v1/query", SPILLING)
        assert reply.status == 400, reply.body
        message = _error_text(reply)
        assert 'Failed to create directory "<store directory>/store.duckdb.tmp"' in message, message
        assert str(tmp_path) not in message, message
        assert f'"{store}.tmp"' in server.log()  # the operator reads where
        through_server = run_cli("sql", "--store", store, SPILLING)  # the CLI reads through the running server
        assert through_server.exit_code != 0
        assert "<store directory>/store.duckdb.tmp" in through_server.stderr, through_server.stderr
        assert str(tmp_path) not in through_server.output + through_server.stderr
        _still_serving(server)


def test_a_path_the_caller_wrote_is_left_in_the_error(tmp_path: Path) -> None:
    with ServerProcess(tmp_path / "store.duckdb") as server:
        reply = _ask(server.http_url, "/v1/query", "SELECT * FROM '/srv/elsewhere/traces.parquet'")
        assert reply.status == 400, reply.body
        assert "/srv/elsewhere/traces.parquet" in _error_text(reply), reply.body
