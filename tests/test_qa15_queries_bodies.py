"""Hostile request bodies on the receiver's query surfaces, through a real ``tracegrade serve``: JSON nested past
Python's parser (``/v1/query``, the UI's SQL API, ``/v1/runs``, ``/v1/forget``) answered 500 "Server got itself in
trouble"; query parameters DuckDB converts before any time limit applies (100,000 values in a list took 8 s past a
3 s limit) were run. Each is now refused with a 400 saying what and why, and the receiver goes on ingesting."""

from __future__ import annotations

import json

import pytest

from tests.support.server_otlp import post
from tests.support.server_process import ServerProcess
from tests.support.server_requests import query, send_span
from tracegrade.ingest.http_app import MAX_QUERY_PARAM_DEPTH, MAX_QUERY_PARAM_VALUES

NESTED = b"[" * 100_000 + b"]" * 100_000  # valid JSON, nested past any parser's recursion limit

TOO_DEEP = [
    ("/v1/query", b'{"sql": "SELECT 1", "params": [' + NESTED + b"]}"),
    ("/ui/api/sql", b'{"sql": ' + NESTED + b"}"),
    ("/v1/runs", b'{"report": ' + NESTED + b"}"),
    ("/v1/forget", b'{"trace_ids": ' + NESTED + b"}"),
]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    # the refusals are checked by what they say, not by the time limit: one generous enough that a loaded machine
    # still binds the largest list allowed (9,999 values) within it
    with ServerProcess(tmp_path_factory.mktemp("bodies") / "s.duckdb", extra_args=("--query-timeout", "30")) as running:
        yield running


def _still_ingesting(server: ServerProcess) -> None:
    trace_id = send_span(server.http_url)
    assert query(server.http_url, "SELECT count(*) FROM spans WHERE trace_id = ?", [trace_id]) == [[1]]


@pytest.mark.parametrize(("path", "body"), TOO_DEEP, ids=[path for path, _ in TOO_DEEP])
def test_a_body_nested_too_deeply_is_refused_as_bad_input(server, path, body):
    reply = post(f"{server.http_url}{path}", body, "application/json")
    assert reply.status == 400, reply.body[:300]
    assert "nested too deeply for the parser" in reply.body.decode()
    _still_ingesting(server)


def test_query_parameters_too_costly_to_convert_are_refused(server):
    many = {"sql": "SELECT len(?) AS n", "params": [list(range(100_000))]}
    reply = post(f"{server.http_url}/v1/query", json.dumps(many).encode(), "application/json")
    assert reply.status == 400, reply.body[:300]
    assert f"'params' holds more than {MAX_QUERY_PARAM_VALUES:,} values" in reply.json()["message"]
    deep = {"sql": "SELECT ? AS v", "params": [json.loads("[" * 900 + "1" + "]" * 900)]}
    reply = post(f"{server.http_url}/v1/query", json.dumps(deep).encode(), "application/json")
    assert reply.status == 400, reply.body[:300]
    assert f"more than {MAX_QUERY_PARAM_DEPTH} levels deep" in reply.json()["message"]
    # within the limits lists and objects still bind, and the advised JSON string carries any number of values
    assert query(server.http_url, "SELECT len(?)", [list(range(MAX_QUERY_PARAM_VALUES - 1))]) == [[9_999]]
    as_string = "SELECT count(*) FROM (SELECT unnest(from_json(?, '[\"BIGINT\"]')))"
    assert query(server.http_url, as_string, [json.dumps(list(range(100_000)))]) == [[100_000]]
    _still_ingesting(server)
