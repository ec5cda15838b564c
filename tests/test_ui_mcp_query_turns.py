"""The web UI's and MCP's reads wait for their query turn on the receiver's event loop, as ``POST /v1/query`` waits:
one tenant's flood of slow queries there holds no thread, so another tenant's UI pages and MCP calls still get the
next turn that frees, and clients that hang up while waiting hand their place back.

Before, each waited on a thread: a UI reader on the loop's default pool (at most 32 threads, 6 on two cores) and
an MCP tool on the SDK's pool (40 threads). acme's flood filled both pools with threads blocked on the gate, and
globex's page and calls queued behind them for a thread, not for a turn: they never reached the line, so the
turn that freed went to acme's next query, and globex waited until acme's queries ended. A real server process;
acme's queries never end by themselves before the test hangs up on them, and every step waits for the
receiver's own gauges (``tracegrade_receiver_queries_running`` / ``_waiting``)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.posted_query import PostedQuery, mcp_run_sql, query_turns
from tests.support.server_process import ServerProcess
from tests.support.tenant_traffic import ACME_TOKENS, GLOBEX_TOKEN, write_tokens
from tests.support.waiting import wait_for_value

RUNAWAY = "SELECT count(*) FROM range(1000000000) a, range(1000000000) b WHERE a.range + b.range = -1"
TURNS = 2
QUERY_TIMEOUT = 20  # seconds; acme's waiting queries are refused, and its running ones cancelled, at this limit
UI_FLOOD = 36  # acme's UI queries waiting: more than the loop's default pool has threads
MCP_FLOOD = 44  # and its MCP calls: more than the SDK's pool of 40
ACME = ACME_TOKENS[0]
OVERLOADED = f"{TURNS} queries have been running for {QUERY_TIMEOUT} s (--max-queries); retry later"
TIMED_OUT = f"the query was cancelled: it ran longer than its time limit of {QUERY_TIMEOUT} s (--query-timeout)"


def _mcp_result(query: PostedQuery) -> tuple[bool, str]:
    """Whether an MCP ``run_sql`` call failed, and its text (the rows as JSON, or the error)."""
    status, reply = query.answer()
    assert status == 200, reply
    result = reply["result"]
    return result["isError"], "".join(part["text"] for part in result["content"])


def _ui_sql_error(query: PostedQuery) -> str:
    """The error a UI SQL query of acme's ended with: refused without a turn, or cancelled at its time limit."""
    status, body = query.answer()
    assert (status, body) in ((503, {"error": OVERLOADED}), (400, {"error": TIMED_OUT})), (status, body)
    return str(body["error"])


def test_another_tenants_ui_pages_and_mcp_calls_get_turns_while_one_tenants_flood_waits(tmp_path: Path) -> None:
    tokens = write_tokens(tmp_path / "tokens.yaml", {"acme": [ACME], "globex": [GLOBEX_TOKEN]})
    args = ("--tokens", str(tokens), "--max-queries", str(TURNS), "--query-timeout", str(QUERY_TIMEOUT))
    with ServerProcess(tmp_path / "store.duckdb", extra_args=args) as server:
        url = server.http_url
        holding = [PostedQuery(url, "/ui/api/sql", ACME, RUNAWAY) for _ in range(TURNS)]
        wait_for_value(lambda: query_turns(url), (TURNS, 0), "acme's UI queries holding every turn")
        ui_flood = [PostedQuery(url, "/ui/api/sql", ACME, RUNAWAY) for _ in range(UI_FLOOD)]
        mcp_flood = [mcp_run_sql(url, ACME, RUNAWAY) for _ in range(MCP_FLOOD)]
        flood = UI_FLOOD + MCP_FLOOD
        # before, only as many as the pools had threads took their place in the line
        wait_for_value(lambda: query_turns(url), (TURNS, flood), "acme's whole flood waiting for a turn", 60)

        page = PostedQuery(url, "/ui/", GLOBEX_TOKEN)  # the traces page: a list and its filters' facets
        sql = PostedQuery(url, "/ui/api/sql", GLOBEX_TOKEN, "SELECT 42 AS answer")
        call = mcp_run_sql(url, GLOBEX_TOKEN, "SELECT 7 AS answer")
        wait_for_value(lambda: query_turns(url), (TURNS, flood + 3), "globex's three reads in line", 60)

        holding[0].hang_up()  # one turn frees: globex holds none, so its reads get it, one after another
        status, html = page.answer_text()
        assert status == 200 and "<table" in html, html
        status, body = sql.answer()
        assert (status, body["rows"]) == (200, [[42]]), body
        failed, text = _mcp_result(call)
        assert not failed and json.loads(text)["rows"] == [[7]], text
        # and acme's flood still waits: the turn globex handed back went to the first of it
        wait_for_value(lambda: query_turns(url), (TURNS, flood - 1), "acme's next query running, the rest waiting")

        # half of acme's flood hangs up while waiting; the rest is refused at the time limit (or, given the turn
        # of a query cancelled there, runs until cancelled in its turn) with the errors it had before
        hung_up = (*ui_flood[::2], *mcp_flood[::2])
        for query in hung_up:
            query.hang_up()
        # each left the line at once (or, running, was cancelled and its turn taken by the next), well before its
        # time limit would have refused it: two run, and the flood's others wait
        left = (TURNS, flood - 1 - len(hung_up))
        wait_for_value(lambda: query_turns(url), left, "acme's clients that hung up gone from the line")
        errors = {_ui_sql_error(query) for query in (holding[1], *ui_flood[1::2])}
        assert OVERLOADED in errors, errors
        for query in mcp_flood[1::2]:
            failed, text = _mcp_result(query)
            assert failed and text in (f"Error executing tool run_sql: {e}" for e in (OVERLOADED, TIMED_OUT)), text
        wait_for_value(lambda: query_turns(url), (0, 0), "every turn handed back, nobody waiting")
        for token in (ACME, GLOBEX_TOKEN):
            status, body = PostedQuery(url, "/ui/api/sql", token, "SELECT 1 AS answer").answer()
            assert (status, body["rows"]) == (200, [[1]]), body
    log = server.log_path.read_text(errors="replace")
    assert "Traceback" not in log and "Error handling" not in log, log
