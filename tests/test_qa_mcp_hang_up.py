"""An MCP client that hangs up in the middle of a call at ``/mcp`` of a real ``tracegrade serve``: the query its
call was running is cancelled, as ``POST /v1/query`` cancels one, so the receiver's query turns go to the callers
still waiting, and the abandoned exchange leaves no traceback in the receiver's log.

Before, the query ran on to its time limit while holding one of ``--max-queries`` turns, and a call that was
waiting for a turn when its client hung up still took one and ran: with one turn, a caller behind two abandoned
calls waited a whole time limit and was then refused ("1 queries have been running for …"); and once a query
ended, writing its answer to the closed connection logged two tracebacks. Checked through the official MCP SDK's
client, which closes its connection when its call is abandoned."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.grading_traces import AgentRun, fill_store
from tests.support.server_process import ServerProcess

pytest.importorskip("mcp")

RUNAWAY = "select count(*) from range(100000000000)"  # minutes, unless stopped
QUERY_TIME_LIMIT = "20"  # the turn the next caller would wait for, and then be refused


@pytest.fixture
def served(tmp_path: Path) -> Iterator[ServerProcess]:
    store = tmp_path / "store.duckdb"
    fill_store(store, [AgentRun(1, "Where is my refund?", "Your refund was sent.")]).close()
    args = ("--max-queries", "1", "--query-timeout", QUERY_TIME_LIMIT)
    with ServerProcess(store, extra_args=args) as server:
        yield server


async def _call(server: ServerProcess, sql: str) -> Any:
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async with streamable_http_client(f"{server.http_url}/mcp") as (read, write), ClientSession(read, write) as s:
        await s.initialize()
        return await s.call_tool("run_sql", {"sql": sql})


def _text(result: Any) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


def test_a_client_that_hangs_up_mid_call_frees_its_query_turn_for_the_next_caller(served: ServerProcess) -> None:
    async def scenario() -> Any:
        warm = await _call(served, "select 1")  # the SDK loads at the first call: the runaway's call starts at once
        assert not warm.is_error, _text(warm)
        for _ in range(2):  # the first runs, the second waits for its turn: then both callers give up
            with pytest.raises(TimeoutError):  # and their clients close their connections
                await asyncio.wait_for(_call(served, RUNAWAY), timeout=2)
        return await _call(served, "select 42 AS answer")

    answered = asyncio.run(scenario())

    assert not answered.is_error, _text(answered)
    assert json.loads(_text(answered))["rows"] == [[42]]
    log = served.log_path.read_text(errors="replace")
    assert "Traceback" not in log and "Error handling" not in log, log
