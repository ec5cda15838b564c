"""The query sandbox: every way out of the store we could think of is refused, through a real server too.

Each escape runs against a running ``tracegrade serve`` (whose HOME is a fresh directory, so an extension
download or a written file would show) and against a TraceStore opened in-process. A secret file sits
next to the store: its content must never come back, and nothing new may appear on disk.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.server_otlp import post
from tests.support.server_process import ServerProcess
from tests.support.server_requests import query, send_span
from tracegrade.errors import QueryRefused, StoreError
from tracegrade.store import TraceStore

SECRET = "tracegrade-sandbox-secret-7f3a"

# (what it tries, the SQL; {secret} and {dir} are filled in) — every one must be refused
ESCAPES: list[tuple[str, str]] = [
    ("read a file as text", "SELECT content FROM read_text('{secret}')"),
    ("read a file as a blob", "SELECT content FROM read_blob('{secret}')"),
    ("read a file as CSV", "SELECT * FROM read_csv('{secret}')"),
    ("read a file as CSV (auto)", "SELECT * FROM read_csv_auto('{secret}')"),
    ("sniff a CSV file", "SELECT * FROM sniff_csv('{secret}')"),
    ("read a file as JSON", "SELECT * FROM read_json('{secret}')"),
    ("read a file as JSON lines", "SELECT * FROM read_ndjson_auto('{secret}')"),
    ("read a Parquet file", "SELECT * FROM read_parquet('{secret}')"),
    ("scan a Parquet file", "SELECT * FROM parquet_scan('{secret}')"),
    ("Parquet metadata", "SELECT * FROM parquet_metadata('{secret}')"),
    ("a file path as a table", "SELECT * FROM '{secret}'"),
    ("a quoted file path as a table", 'SELECT * FROM "{secret}"'),
    ("list files", "SELECT * FROM glob('{dir}/*')"),
    ("list the root directory", "FROM glob('/*')"),
    ("read /etc/passwd", "SELECT * FROM read_csv('/etc/passwd')"),
    ("a URL (httpfs autoload)", "SELECT * FROM read_csv('https://example.invalid/data.csv')"),
    ("an S3 URL", "SELECT * FROM read_parquet('s3://bucket/key.parquet')"),
    ("upper-case function name", "SELECT * FROM READ_TEXT('{secret}')"),
    ("quoted function name", "SELECT * FROM \"read_text\"('{secret}')"),
    ("inside a CTE", "WITH x AS (SELECT content FROM read_text('{secret}')) SELECT * FROM x"),
    ("inside a scalar subquery", "SELECT (SELECT content FROM read_text('{secret}')) AS c"),
    ("inside a union", "SELECT trace_id FROM spans UNION ALL SELECT content FROM read_text('{secret}')"),
    ("inside a lateral join", "SELECT * FROM spans, LATERAL (SELECT * FROM read_text('{secret}')) LIMIT 1"),
    ("inside EXPLAIN ANALYZE", "EXPLAIN ANALYZE SELECT * FROM read_text('{secret}')"),
    ("inside DESCRIBE", "DESCRIBE SELECT * FROM read_text('{secret}')"),
    ("inside SUMMARIZE", "SUMMARIZE SELECT * FROM glob('/*')"),
    ("checkpoint()", "SELECT * FROM checkpoint()"),
    ("force_checkpoint()", "SELECT * FROM force_checkpoint()"),
    ("query() runs a string", "SELECT * FROM query('SELECT 42')"),
    ("query_table()", "SELECT * FROM query_table('spans')"),
    ("settings table", "SELECT * FROM duckdb_settings()"),
    ("current_setting()", "SELECT current_setting('temp_directory')"),
    ("attached databases (paths)", "SELECT * FROM duckdb_databases()"),
    ("extensions", "SELECT * FROM duckdb_extensions()"),
    ("pragma table function", "SELECT * FROM pragma_database_size()"),
    ("sequence side effect", "SELECT nextval('some_sequence')"),
    ("sequence set (DuckDB 2)", "SELECT setval('some_sequence', 5)"),
    ("random seed side effect", "SELECT setseed(0.5)"),
    ("LOAD an extension", "LOAD httpfs"),
    ("INSTALL an extension", "INSTALL httpfs"),
    ("turn external access back on", "SET enable_external_access = true"),
    ("raise the memory limit", "SET memory_limit = '64GB'"),
    ("RESET a setting", "RESET memory_limit"),
    ("PRAGMA", "PRAGMA enable_profiling"),
    ("ATTACH another file", "ATTACH '{dir}/other.duckdb' AS other"),
    ("COPY out to a file", "COPY spans TO '{dir}/out.csv'"),
    ("COPY a query out", "COPY (SELECT 1) TO '{dir}/out.csv'"),
    ("EXPORT DATABASE", "EXPORT DATABASE '{dir}/export'"),
    ("CREATE TABLE", "CREATE TABLE stolen AS SELECT * FROM spans"),
    ("CREATE MACRO", "CREATE MACRO m(x) AS x"),
    ("INSERT", "INSERT INTO traces (trace_id) VALUES ('x')"),
    ("DELETE", "DELETE FROM spans"),
    ("DROP", "DROP TABLE spans"),
    ("CALL checkpoint", "CALL checkpoint()"),
    ("CHECKPOINT statement", "CHECKPOINT"),
    ("two statements", "SELECT 1; DROP TABLE spans"),
    ("a hidden second statement", "SELECT 1; -- harmless\nCOPY spans TO '{dir}/x.csv'"),
    ("PIVOT (not a plain SELECT)", "PIVOT spans ON name USING count(*)"),
    ("attached databases (paths) as a view", "SELECT path FROM duckdb_databases"),
    ("attached databases, pragma view", "SELECT * FROM pragma_database_list"),
    ("attached databases, pg view", "SELECT * FROM pg_database"),
    ("settings as a view", "SELECT name, setting FROM pg_settings"),
    ("settings view, qualified", "SELECT * FROM pg_catalog.pg_settings"),
    ("attached databases, fully qualified", "SELECT * FROM system.main.duckdb_databases"),
    ("a column's statistics over its whole table", "SELECT stats(name) FROM spans LIMIT 1"),
    ("a lake's catalog database", "SELECT * FROM __ducklake_metadata_lake.pg_catalog.pg_authid"),
    ("nested too deeply to check", "SELECT " + "(SELECT " * 300 + "1" + ")" * 300),
]

ALLOWED = [
    "SELECT count(*) FROM spans",
    "FROM traces LIMIT 1",
    "DESCRIBE spans",
    "SHOW TABLES",
    "SELECT * FROM range(3)",
    "SELECT column_name FROM information_schema.columns WHERE table_name = 'spans'",
    "SELECT table_name FROM duckdb_tables()",
    "SELECT table_name, column_name FROM duckdb_columns",
    "SELECT tablename FROM pg_tables",
    "EXPLAIN SELECT count(*) FROM spans",
    "WITH t AS (SELECT trace_id FROM spans) SELECT count(*) FROM t",
    "SELECT now()",
]


def _fill(sql: str, tmp: Path) -> str:
    return sql.format(secret=tmp / "secret.csv", dir=tmp)


def _files_under(*roots: Path) -> set[str]:
    return {str(path) for root in roots for path in root.rglob("*")}


@pytest.fixture(scope="module")
def sandboxed_server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sandbox")
    home = tmp / "home"
    home.mkdir()
    (tmp / "secret.csv").write_text(f"name\n{SECRET}\n")
    with ServerProcess(tmp / "store.duckdb", env={"HOME": str(home)}) as server:
        send_span(server.http_url)
        yield server, tmp, home


@pytest.mark.parametrize(("what", "sql"), ESCAPES, ids=[what for what, _ in ESCAPES])
def test_the_server_refuses_each_escape_and_reads_or_writes_nothing_outside(sandboxed_server, what, sql):
    server, tmp, home = sandboxed_server
    before = _files_under(tmp, home)
    reply = post(f"{server.http_url}/v1/query", json.dumps({"sql": _fill(sql, tmp)}).encode(), "application/json")
    assert reply.status == 400, (what, reply.status, reply.body)
    message = reply.json()["message"]
    assert SECRET not in reply.body.decode()
    assert any(word in message for word in ("not allowed", "refused", "read-only", "statements given", "supported"))
    store_files = str(tmp / "store.duckdb")  # the store's own: the file, its WAL, journal, sidecar, log
    assert {path for path in _files_under(tmp, home) - before if not path.startswith(store_files)} == set()
    assert not (home / ".duckdb").exists(), "an extension was downloaded or installed"
    # the server still answers, and the store is intact
    assert query(server.http_url, "SELECT count(*) FROM spans") == [[1]]


@pytest.mark.parametrize("sql", ALLOWED)
def test_the_server_still_runs_ordinary_queries(sandboxed_server, sql):
    server, _, _ = sandboxed_server
    assert isinstance(query(server.http_url, sql), list)


@pytest.mark.parametrize(("what", "sql"), ESCAPES, ids=[what for what, _ in ESCAPES])
def test_a_store_opened_directly_refuses_each_escape(tmp_path, what, sql):
    (tmp_path / "secret.csv").write_text(f"name\n{SECRET}\n")
    TraceStore(tmp_path / "s.duckdb").close()
    for read_only in (False, True):
        with TraceStore(tmp_path / "s.duckdb", read_only=read_only) as store:
            with pytest.raises(StoreError) as refused:
                store.query(_fill(sql, tmp_path))
            assert SECRET not in str(refused.value)
            assert isinstance(refused.value, QueryRefused) or "read-only" in str(refused.value), str(refused.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.duckdb", "secret.csv"]


def test_the_refusal_says_what_was_refused_and_what_is_allowed(tmp_path):
    with TraceStore(tmp_path / "s.duckdb") as store:
        with pytest.raises(QueryRefused, match=r"table function read_text\(\) is not allowed.*allowed table functions"):
            store.query("SELECT * FROM read_text('/etc/hostname')")
        with pytest.raises(QueryRefused, match=r"function current_setting\(\) is not allowed"):
            store.query("SELECT current_setting('threads')")
        with pytest.raises(QueryRefused, match="2 statements given"):
            store.query("SELECT 1; SELECT 2")
        with pytest.raises(QueryRefused, match=r"expands into several .*IN \(\.\.\.\)"):
            store.query("PIVOT spans ON name")
        # named by what was written, not by DuckDB's statement type (USE is a SET, ANALYZE a VACUUM)
        for sql, refused_as in [
            ("-- switch\nUSE memory", "USE"),
            ("/* stats */ analyze", "ANALYZE"),
            ("CHECKPOINT", "CHECKPOINT"),
            ("install httpfs", "INSTALL"),
            ("WITH doomed AS (SELECT 1) DELETE FROM spans", "DELETE"),
        ]:
            with pytest.raises(QueryRefused, match=f"^{refused_as} statements are not allowed"):
                store.query(sql)
        with pytest.raises(QueryRefused, match="reading a file or URL as a table is not allowed"):
            store.query("SELECT * FROM '/etc/passwd'")
        with pytest.raises(QueryRefused, match=r"pg_settings: this system view is not allowed.*information_schema"):
            store.query("SELECT * FROM pg_settings")
