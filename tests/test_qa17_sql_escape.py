"""QA 17: a lake's query reads no file by a qualified table name, nor the lake's catalog by a two-part name.

DuckDB reads a qualified name it does not find as the file its parts name joined with dots (``"/data/x".csv`` is
``/data/x.csv``, ``x.csv`` relative to the working directory), and a lake's connection keeps its data directory
open to DuckDB (DuckLake reads its Parquet files through it): such a name read any file there. DuckDB also takes
the first part of a two-part name for a catalog, so ``__ducklake_metadata_lake.ducklake_metadata`` reached the
lake's catalog database, of which only the three-part form was refused. Each is tried on a lake opened directly
(as ``tracegrade sql`` opens it), through the UI's and MCP's ``run_sql``, and through ``POST /v1/query`` of a real
``tracegrade serve`` on a lake; the other escapes tried are in test_query_sandbox.py.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from tests.support import pg_cluster
from tests.support.grading_cli import run_cli
from tests.support.lake_serve import LakeServerProcess
from tests.support.pg_cluster import PgServer
from tests.support.server_otlp import post
from tests.support.server_requests import query
from tracegrade.errors import QueryRefused
from tracegrade.store.lake import CATALOG_ALIAS, LakeStore
from tracegrade.ui.api import run_sql

pg_server = pg_cluster.pg_server  # the session's PostgreSQL (a fixture), for the lakes

SECRET = "tracegrade-qa17-secret-5c1e"
FILE_REFUSED = "reading a file or URL as a table is not allowed"
CATALOG_REFUSED = "the lake's catalog database is not allowed"

# (what it tries, the SQL; {data} is the lake's data directory, where a file of each format holds SECRET)
FILE_NAMES: list[tuple[str, str]] = [
    ("a CSV file by a qualified name", 'SELECT * FROM "{data}/inside".csv'),
    ("every part quoted", 'SELECT * FROM "{data}/inside"."csv"'),
    ("a JSON file", 'SELECT * FROM "{data}/inside".json'),
    ("a Parquet file", 'SELECT * FROM "{data}/inside".parquet'),
    ("a gzipped CSV file by three parts", 'SELECT * FROM "{data}/inside"."csv"."gz"'),
    ("DESCRIBE of one", 'DESCRIBE "{data}/inside".csv'),
    ("inside a scalar subquery", 'SELECT (SELECT max(name) FROM "{data}/inside".csv) AS n'),
]
CATALOG_READS: list[tuple[str, str]] = [
    (
        "the catalog's settings (its data path)",
        f"SELECT value FROM __ducklake_metadata_{CATALOG_ALIAS}.ducklake_metadata",
    ),
    (
        "its file list, the name in capitals",
        f'SELECT path FROM "__DUCKLAKE_METADATA_{CATALOG_ALIAS.upper()}".ducklake_data_file',
    ),
]
ESCAPES = FILE_NAMES + CATALOG_READS
# qualified names that are the store's own, and still run
ORDINARY = [
    f"SELECT count(*) FROM {CATALOG_ALIAS}.main.spans",
    "SELECT count(*) FROM main.traces",
    "SELECT count(*) FROM information_schema.tables",
]


def _write_secret_files(data: Path) -> None:
    data.mkdir(parents=True, exist_ok=True)
    (data / "inside.csv").write_text(f"name\n{SECRET}\n")
    (data / "inside.json").write_text(json.dumps({"name": SECRET}) + "\n")
    (data / "inside.csv.gz").write_bytes(gzip.compress(f"name\n{SECRET}\n".encode()))
    con = duckdb.connect()
    try:
        con.execute(f"COPY (SELECT '{SECRET}' AS name) TO '{data / 'inside.parquet'}' (FORMAT parquet)")
    finally:
        con.close()


def _new_lake(pg: PgServer, data: Path) -> str:
    location = f"ducklake:postgres:{pg.new_database()}"
    LakeStore(location, data_path=data).close()
    _write_secret_files(data)
    return location


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory, pg_server: PgServer) -> Iterator[tuple[LakeStore, Path]]:
    data = tmp_path_factory.mktemp("qa17") / "lake-data"
    with LakeStore(_new_lake(pg_server, data), read_only=True) as store:
        yield store, data


def _refused_as(what: str, sql: str) -> str:
    return CATALOG_REFUSED if (what, sql) in CATALOG_READS else FILE_REFUSED


@pytest.mark.parametrize(("what", "sql"), ESCAPES, ids=[what for what, _ in ESCAPES])
def test_a_lake_opened_directly_refuses_each(lake, what, sql):
    store, data = lake
    with pytest.raises(QueryRefused, match=_refused_as(what, sql)) as refused:
        store.query(sql.format(data=data))
    assert SECRET not in str(refused.value)


@pytest.mark.parametrize(("what", "sql"), ESCAPES, ids=[what for what, _ in ESCAPES])
def test_the_ui_and_mcp_run_sql_refuse_each(lake, what, sql):
    store, data = lake
    with pytest.raises(QueryRefused, match=_refused_as(what, sql)):
        run_sql(store, sql.format(data=data), 30)


@pytest.mark.parametrize("sql", ORDINARY)
def test_the_stores_own_qualified_names_still_run(lake, sql):
    store, _ = lake
    assert len(store.query(sql).rows) == 1


def test_tracegrade_sql_refuses_a_relative_file_name_from_inside_the_data_directory(lake, monkeypatch):
    store, data = lake
    monkeypatch.chdir(data)  # x.csv is then a file of the data directory, which the lake's connection may open
    result = run_cli("sql", "--store", store.location, "SELECT * FROM inside.csv")
    assert result.exit_code != 0
    assert FILE_REFUSED in result.stderr
    assert SECRET not in result.output + result.stderr


@pytest.fixture(scope="module")
def lake_server(tmp_path_factory: pytest.TempPathFactory, pg_server: PgServer) -> Iterator[tuple[str, Path]]:
    tmp = tmp_path_factory.mktemp("qa17-serve")
    data = tmp / "lake-data"
    server = LakeServerProcess(_new_lake(pg_server, data), data, tmp / "serve.journal").start(timeout=90)
    try:
        yield server.http_url, data
    finally:
        assert server.terminate() == 0, server.log()


@pytest.mark.parametrize(("what", "sql"), ESCAPES, ids=[what for what, _ in ESCAPES])
def test_a_lake_server_refuses_each_over_v1_query(lake_server, what, sql):
    url, data = lake_server
    reply = post(f"{url}/v1/query", json.dumps({"sql": sql.format(data=data)}).encode(), "application/json")
    assert reply.status == 400, (what, reply.status, reply.body)
    assert _refused_as(what, sql) in reply.json()["message"]
    assert SECRET not in reply.body.decode()
    if (what, sql) in CATALOG_READS:
        assert str(data) not in reply.body.decode()  # the catalog's rows name the data directory
    assert len(query(url, "SELECT count(*) FROM spans")) == 1  # the server still answers
