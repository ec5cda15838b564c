"""Judge replies are cached per tenant in MCP ``grade`` too. Against a real ``tracegrade serve --tokens`` whose judge
is a scripted OpenAI-compatible server, acme and globex send one identical trace (same id, same content), so the
judge's question about it is the same for both; each then grades it with an LLM-judged criterion through MCP
``grade``: at the receiver's ``/mcp`` with its own token, and with ``tracegrade mcp --tenant`` over stdio on the
file (one working directory, so one judge cache file). A cache shared between tenants answered globex with acme's
verdict (its score and reasoning) without asking the judge: each tenant must get its own call and its own verdict."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pytest

from tests.support.llm_server import LLMServer, Reply
from tests.support.server_otlp import post
from tests.support.server_process import ServerProcess
from tests.support.server_requests import span_json, traces_json, unique_trace_id
from tests.support.tenant_traffic import ACME_TOKENS, GLOBEX_TOKEN, sql, write_tokens
from tests.support.waiting import wait_until

pytest.importorskip("mcp")

ACME = ACME_TOKENS[0]
JUDGE_KEY = "sk-server-key"
JUDGED = {"criteria": {"safety": {"judge_model": "openai/gpt-4o-mini", "num_samples": 1, "api_style": "chat"}}}
ACME_VERDICT, GLOBEX_VERDICT = Reply.score(0.25, "acme-only verdict"), Reply.score(0.5, "globex-only verdict")


@dataclass
class Deployment:
    server: ServerProcess
    judge: LLMServer
    trace_id: str  # the trace both tenants sent, the same content under the same id


@pytest.fixture
def deployment(tmp_path: Path) -> Iterator[Deployment]:
    tokens = write_tokens(tmp_path / "tokens.yaml", {"acme": [ACME], "globex": [GLOBEX_TOKEN]})
    judge = LLMServer().start()
    server = ServerProcess(
        tmp_path / "store.duckdb",
        extra_args=("--tokens", str(tokens)),
        env={"OPENAI_API_KEY": JUDGE_KEY, "OPENAI_API_BASE": judge.base_url},
    )
    try:
        server.start()
        trace_id = unique_trace_id()
        for token in (ACME, GLOBEX_TOKEN):
            reply = post(f"{server.http_url}/v1/traces", _agent_trace(trace_id), "application/json", token=token)
            assert reply.status == 200, reply.body
            wait_until(
                lambda token=token: sql(server.http_url, "SELECT count(*) FROM traces", token).json()["rows"] == [[1]],
                "the tenant's trajectory",
                60,
            )
        yield Deployment(server, judge, trace_id)
    finally:
        server.kill()
        judge.stop()


def _agent_trace(trace_id: str) -> bytes:
    """One agent span (OpenInference) with a question and an answer, as OTLP/JSON."""
    attributes = [
        {"key": "openinference.span.kind", "value": {"stringValue": "AGENT"}},
        {"key": "input.value", "value": {"stringValue": "how do I reset my password?"}},
        {"key": "output.value", "value": {"stringValue": "use the reset link on the sign-in page"}},
    ]
    span = span_json(trace_id, 0, name="support-agent", attributes=attributes)
    return json.dumps(traces_json([span], service="support-bot")).encode()


async def _grade_in(session: Any, trace_id: str) -> Any:
    await session.initialize()
    return await session.call_tool("grade", {"config": JUDGED, "trace_ids": [trace_id]})


def _grade_at_mcp(server: ServerProcess, token: str, trace_id: str) -> Any:
    """MCP ``grade`` at the receiver's ``/mcp`` as the tenant of ``token``."""
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    async def call() -> Any:
        client = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
        async with (
            client,
            streamable_http_client(f"{server.http_url}/mcp", http_client=client) as (read, write),
            ClientSession(read, write) as session,
        ):
            return await _grade_in(session, trace_id)

    return asyncio.run(call())


def _grade_over_stdio(deployment: Deployment, tenant: str) -> Any:
    """MCP ``grade`` of ``tracegrade mcp --store FILE --tenant TENANT`` (a child process in the store's directory)."""
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACEGRADE_", "OPENAI_"))}
    env |= {"OPENAI_API_KEY": JUDGE_KEY, "OPENAI_API_BASE": deployment.judge.base_url}
    args = ["-c", "from tracegrade.cli.main import main; main()", "mcp"]
    args += ["--store", str(deployment.server.store), "--tenant", tenant]
    parameters = StdioServerParameters(command=sys.executable, args=args, env=env, cwd=str(deployment.server.workdir))

    async def call() -> Any:
        async with stdio_client(parameters) as (read, write), ClientSession(read, write) as session:
            return await _grade_in(session, deployment.trace_id)

    return asyncio.run(call())


def _verdict(result: Any) -> tuple[float, str]:
    assert not result.is_error, result.content
    [case] = result.structured_content["cases"]
    [criterion] = case["failing_criteria"]
    return criterion["score"], json.dumps(criterion)


def _cached_tenants(workdir: Path) -> list[tuple[str]]:
    with duckdb.connect(str(workdir / ".tracegrade" / "judge_cache.duckdb"), read_only=True) as cache:
        return cache.execute("SELECT tenant FROM judge_cache ORDER BY tenant").fetchall()


def test_at_the_receivers_mcp_each_tenant_gets_its_own_judge_call_and_verdict(deployment: Deployment) -> None:
    server, judge, trace_id = deployment.server, deployment.judge, deployment.trace_id
    judge.script(ACME_VERDICT, GLOBEX_VERDICT)
    acme_score, acme_said = _verdict(_grade_at_mcp(server, ACME, trace_id))
    assert acme_score == 0.25 and "acme-only verdict" in acme_said
    globex_score, globex_said = _verdict(_grade_at_mcp(server, GLOBEX_TOKEN, trace_id))
    assert len(judge.requests) == 2, "globex's grading was answered from acme's cached judge reply"
    assert globex_score == 0.5 and "globex-only verdict" in globex_said and "acme-only" not in globex_said
    # each tenant's own reply is cached for it: grading again asks the judge nothing
    assert _verdict(_grade_at_mcp(server, GLOBEX_TOKEN, trace_id))[0] == 0.5
    assert _verdict(_grade_at_mcp(server, ACME, trace_id))[0] == 0.25
    assert len(judge.requests) == 2
    server.terminate()  # the cache file is free: each reply is kept as its tenant's
    assert _cached_tenants(server.workdir) == [("acme",), ("globex",)]


def test_tracegrade_mcp_with_tenant_caches_each_tenants_judge_replies_apart(deployment: Deployment) -> None:
    deployment.server.terminate()  # the file is free: an operator serves each tenant's agent its own tools
    deployment.judge.script(ACME_VERDICT, GLOBEX_VERDICT)
    acme_score, _ = _verdict(_grade_over_stdio(deployment, "acme"))
    globex_score, globex_said = _verdict(_grade_over_stdio(deployment, "globex"))
    assert len(deployment.judge.requests) == 2, "globex's grading was answered from acme's cached judge reply"
    assert (acme_score, globex_score) == (0.25, 0.5) and "acme-only" not in globex_said
    assert _cached_tenants(deployment.server.workdir) == [("acme",), ("globex",)]
