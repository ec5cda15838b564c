"""What a caller over the network can make ``tracegrade serve`` do, against a real receiver with two tenants:
MCP ``grade`` at ``/mcp`` reads no server file and calls no judge endpoint a caller names (a listener of the
test's own sees nothing) and calls the server's own judge only for a token with the ``judge`` scope, a runaway
SQL assertion is stopped at the query time limit while health checks and exports go on, each grading call has a
sandbox of its own, and a huge result is cut at the endpoint's cap on ``/v1/query``, the web UI's SQL API and
through ``RemoteStore``."""

from __future__ import annotations

import asyncio
import http.server
import json
import threading
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.llm_server import LLMServer, Reply
from tests.support.server_otlp import post
from tests.support.server_process import ServerProcess
from tests.support.server_requests import span_json, traces_proto, unique_trace_id
from tests.support.tenant_traffic import (
    ACME_TOKENS,
    GLOBEX_SECRET,
    GLOBEX_TOKEN,
    TRACES,
    leaked,
    send_agent_traces,
    sql,
    write_tokens,
)
from tests.support.waiting import wait_until
from tracegrade.errors import StoreError
from tracegrade.models import EvalCase, EvalSet
from tracegrade.store.query_control import QueryControl
from tracegrade.store.remote import RemoteStore

pytest.importorskip("mcp")

ACME = ACME_TOKENS[0]
ACME_READER = "acme-reader-token-7"  # scopes: read (no judge)
QUERY_TIMEOUT = 3  # --query-timeout of the receiver, seconds
SERVER_KEY = "sk-server-canary-31337"  # the receiver's own OPENAI_API_KEY
# 9e10 rows: runs for minutes unless stopped
RUNAWAY = "SELECT 1 AS v FROM (SELECT sum(a.range * b.range) AS c FROM range(300000) a, range(300000) b) WHERE c < 0"


@dataclass
class Receiver:
    server: ServerProcess
    tokens: Path
    acme_traces: list[str]
    globex_traces: list[str]
    judge: LLMServer  # the judge endpoint the receiver is configured with (its environment)


@pytest.fixture(scope="module")
def receiver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Receiver]:
    workdir = tmp_path_factory.mktemp("mcp-limits")
    reader = {"token": ACME_READER, "scopes": ["read"]}
    tokens = write_tokens(workdir / "tokens.yaml", {"acme": [ACME, reader], "globex": [GLOBEX_TOKEN]})
    judge = LLMServer().start()
    server = ServerProcess(
        workdir / "store.duckdb",
        extra_args=("--tokens", str(tokens), "--query-timeout", str(QUERY_TIMEOUT), "--query-max-rows", "10000"),
        env={"OPENAI_API_KEY": SERVER_KEY, "OPENAI_API_BASE": judge.base_url},
    )
    server.start()
    try:
        acme = send_agent_traces("acme", "ACME-MARK", http_url=server.http_url, token=ACME)
        globex = send_agent_traces("globex", GLOBEX_SECRET, http_url=server.http_url, token=GLOBEX_TOKEN)
        for token in (ACME, GLOBEX_TOKEN):
            wait_until(
                lambda token=token: (
                    sql(server.http_url, "SELECT count(*) FROM traces", token).json()["rows"] == [[TRACES]]
                ),
                "each tenant's trajectories",
                90,
            )
        yield Receiver(server, tokens, acme, globex, judge)
    finally:
        server.kill()
        judge.stop()


def _grade(receiver: Receiver, token: str, **arguments: Any) -> Any:
    """One MCP ``grade`` call at ``/mcp`` as the tenant of ``token``; the SDK's CallToolResult."""
    return _call(receiver, token, "grade", arguments)


def _call(receiver: Receiver, token: str, tool: str, arguments: dict[str, Any]) -> Any:
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    async def call() -> Any:
        client = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
        async with (
            client,
            streamable_http_client(f"{receiver.server.http_url}/mcp", http_client=client) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            return await session.call_tool(tool, arguments)

    return asyncio.run(call())


def _text(result: Any) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


class _Listener(http.server.BaseHTTPRequestHandler):
    seen: list[str] = []

    def do_POST(self) -> None:
        _Listener.seen.append(f"{self.path} {self.headers.get('Authorization')}")
        self.send_response(500)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def listener() -> Iterator[tuple[str, list[str]]]:
    """A local HTTP server that records every request it gets: a judge endpoint a caller might name."""
    _Listener.seen = []
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Listener)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/v1", _Listener.seen
    finally:
        httpd.shutdown()


def test_served_grade_reads_no_server_path_and_calls_no_judge_endpoint_a_caller_names(
    receiver: Receiver, listener: tuple[str, list[str]]
) -> None:
    tokens_file = str(receiver.tokens)
    for arguments in ({"config_path": tokens_file}, {"eval_set_path": tokens_file}):
        refused = _grade(receiver, ACME, **arguments)
        assert refused.is_error
        assert "refused over the network" in _text(refused) and "reads no file" in _text(refused)
        assert "tenants" not in _text(refused)  # nothing of the file's content
    url, seen = listener
    judge = {"judge_model": "openai/gpt-4o-mini", "num_samples": 1, "api_style": "chat", "timeout_seconds": 5}
    for override in ({"api_base": url}, {"api_key": "sk-caller", "api_base": url}):
        config = {"criteria": {"safety": judge | override}}
        refused = _grade(receiver, ACME, config=config, trace_ids=receiver.acme_traces[:1])
        assert refused.is_error
        assert "criteria.safety.api_base" in _text(refused) and "configured with" in _text(refused)
    assert seen == []  # not a single request reached the caller's endpoint (with the server's key or any)


def test_served_grade_calls_the_servers_judge_only_for_a_token_with_the_judge_scope(receiver: Receiver) -> None:
    judge = receiver.judge
    judge.clear()
    judged = {"criteria": {"safety": {"judge_model": "openai/gpt-4o-mini", "num_samples": 1, "api_style": "chat"}}}
    [trace] = receiver.acme_traces[:1]
    refused = _grade(receiver, ACME_READER, config=judged, trace_ids=[trace])
    assert refused.is_error
    assert "criteria.safety grade with an LLM judge, and this token may not call this server's LLM judges" in (
        _text(refused)
    )
    assert "whose scopes include 'judge'" in _text(refused) and str(receiver.tokens) in _text(refused)
    assert judge.requests == []
    # the same token grades with criteria that call no judge: a judged response_match is skipped without an eval
    # set; with one, it would call the judge and is refused
    keywords = {"keywords": ["ACME-MARK"], "threshold": 0.0}
    unjudged = {"criteria": {"contains_keywords": keywords, "response_match": judged["criteria"]["safety"]}}
    plain = _grade(receiver, ACME_READER, config=unjudged, trace_ids=[trace])
    assert not plain.is_error, _text(plain)
    assert plain.structured_content["summary"]["total_cases"] == 1
    cases = EvalSet(eval_cases=[EvalCase.single_turn("c", "hi", expected_response="hello")]).model_dump(mode="json")
    with_cases = _grade(receiver, ACME_READER, config=unjudged, eval_set=cases)
    assert with_cases.is_error and "criteria.response_match grade with an LLM judge" in _text(with_cases)
    assert judge.requests == []
    # a token with every scope has the server's judge called, with the server's key
    judge.script(Reply.score(0.25, "scripted verdict"))
    graded = _grade(receiver, ACME, config=judged, trace_ids=[trace])
    assert not graded.is_error, _text(graded)
    [request] = judge.requests
    assert request.headers.get("Authorization") == f"Bearer {SERVER_KEY}"
    [case] = graded.structured_content["cases"]
    [criterion] = case["failing_criteria"]
    assert criterion["criterion"] == "safety_v1" and criterion["score"] == 0.25, criterion


def test_a_runaway_assertion_is_stopped_at_the_query_time_limit_while_the_receiver_keeps_serving(
    receiver: Receiver,
) -> None:
    config = {"criteria": {"sql_assertions": [{"name": "runaway", "query": RUNAWAY}]}}
    graded: list[Any] = []
    grading = threading.Thread(
        target=lambda: graded.append(_grade(receiver, ACME, config=config, trace_ids=receiver.acme_traces[:1]))
    )
    grading.start()
    health, exports = [], []
    while grading.is_alive():
        with urllib.request.urlopen(f"{receiver.server.http_url}/healthz", timeout=10) as answer:
            health.append(answer.status)
        span = traces_proto([span_json(unique_trace_id(), 0)])
        exports.append(post(f"{receiver.server.http_url}/v1/traces", span, token=ACME).status)
    grading.join()
    assert health and set(health) == {200} and set(exports) == {200}
    result = graded[0]
    assert not result.is_error, _text(result)
    [case] = result.structured_content["cases"]
    [criterion] = case["failing_criteria"]
    assert criterion["criterion"] == "sql_assertion:runaway" and criterion["status"] == "error"
    assert f"time limit of {QUERY_TIMEOUT} s (--query-timeout)" in criterion["error"]


def test_each_grading_call_has_a_sandbox_of_its_own(receiver: Receiver) -> None:
    # a sandbox reused after DELETE keeps numbering rows after those of earlier cases: rowids past the
    # case's own row count tell how many rows another caller's case had
    reused = "SELECT max(rowid) + 1 AS rows_ever, count(*) AS own FROM spans HAVING max(rowid) + 1 <> count(*)"
    any_assertion = {"criteria": {"sql_assertions": [{"name": "none", "query": "SELECT 1 AS v WHERE false"}]}}
    peek = {"criteria": {"sql_assertions": [{"name": "peek", "query": reused}]}}
    assert not _grade(receiver, GLOBEX_TOKEN, config=any_assertion, trace_ids=receiver.globex_traces).is_error
    result = _grade(receiver, ACME, config=peek, trace_ids=receiver.acme_traces[-1:])
    assert not result.is_error, _text(result)
    assert result.structured_content["summary"]["passed_cases"] == 1, result.structured_content
    assert not leaked(_text(result))


def test_a_huge_result_is_cut_at_each_endpoints_cap(receiver: Receiver) -> None:
    url = receiver.server.http_url
    answer = sql(url, "SELECT range FROM range(1000000)", ACME)
    assert answer.status == 200
    document = answer.json()
    assert len(document["rows"]) == 10_000 and document["truncated"] is True and document["max_rows"] == 10_000
    assert sql(url, "SELECT 1 AS one", ACME).json()["truncated"] is False

    body = json.dumps({"sql": "SELECT range FROM range(1000000)"}).encode()
    ui = post(f"{url}/ui/api/sql", body, "application/json", token=ACME).json()
    assert len(ui["rows"]) == 1000 and ui["truncated"] is True and ui["max_rows"] == 1000

    mcp = _call(receiver, ACME, "run_sql", {"sql": "SELECT range FROM range(1000000)"}).structured_content
    assert len(mcp["rows"]) == 1000 and mcp["truncated"] is True

    # the CLI's client: a cut result is an error, unless the caller asked for a cap itself
    remote = RemoteStore(url, ACME)
    with pytest.raises(StoreError, match=r"more than 10000 rows.*--query-max-rows"):
        remote.query("SELECT range FROM range(1000000)")
    capped = remote.query("SELECT range FROM range(1000000)", control=QueryControl(max_rows=5))
    assert capped.rows == [(0,), (1,), (2,), (3,), (4,)] and capped.truncated and capped.max_rows == 5
