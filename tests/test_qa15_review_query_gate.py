"""Review of the query gate's turns: no path leaks a turn or leaves a query running past a stop.

A real ``tracegrade serve`` process, real HTTP clients; the receiver's own gauges
(``queries_running``/``queries_waiting``) show who holds and who waits for a turn."""

from __future__ import annotations

from pathlib import Path

from tests.support.posted_query import PostedQuery, query_turns
from tests.support.server_process import ServerProcess
from tests.support.tenant_traffic import ACME_TOKENS, GLOBEX_TOKEN, write_tokens
from tests.support.waiting import wait_for_value

INITECH_TOKEN = "initech-token"
RUNAWAY = "SELECT count(*) FROM range(1000000000) a, range(1000000000) b WHERE a.range + b.range = -1"


def test_sigterm_stops_the_receiver_while_a_runaway_query_waits_for_a_turn(tmp_path: Path) -> None:
    """Stopping cancels the running query; the one waiting in line must not then get the freed turn and run
    on the store being closed, unanswered (its handler is dropped once the stop's grace is over): it is refused
    as the receiver shuts down."""
    args = ("--max-queries", "1", "--query-timeout", "600", "--shutdown-timeout", "5")
    server = ServerProcess(tmp_path / "s.duckdb", extra_args=args)
    server.start()
    try:
        running = PostedQuery(server.http_url, "/v1/query", None, RUNAWAY)
        wait_for_value(lambda: query_turns(server.http_url), (1, 0), "the first runaway holding the only turn")
        waiting = PostedQuery(server.http_url, "/v1/query", None, RUNAWAY)
        wait_for_value(lambda: query_turns(server.http_url), (1, 1), "the second runaway waiting for it")
        assert server.terminate(timeout=60) == 0  # a hang would fail here (terminate waits, then raises)
    finally:
        server.kill()
    for query in (running, waiting):  # each answered, none left to a dropped connection
        status, body = query.answer()
        assert status in (400, 503), body
        assert "shutting down" in body["message"], body


def test_a_crowd_of_tenants_hanging_up_and_timing_out_hands_every_turn_back(tmp_path: Path) -> None:
    """Three tenants crowd two turns over ``/v1/query`` and the web UI's SQL API (both waiting on the loop);
    half the clients hang up at once (running or waiting), the rest end at the time limit (running
    ones cancelled, waiting ones refused as overloaded, or granted as that happens). Afterwards no turn is held or
    waited for, and every tenant's next query is answered."""
    tokens = {"acme": [ACME_TOKENS[0]], "globex": [GLOBEX_TOKEN], "initech": [INITECH_TOKEN]}
    args = ("--tokens", str(write_tokens(tmp_path / "tokens.yaml", tokens)), "--max-queries", "2")
    with ServerProcess(tmp_path / "s.duckdb", extra_args=(*args, "--query-timeout", "8")) as server:
        crowd = [
            PostedQuery(server.http_url, path, token, RUNAWAY)
            for path in ("/v1/query", "/ui/api/sql", "/v1/query")
            for token in (ACME_TOKENS[0], GLOBEX_TOKEN, INITECH_TOKEN)
        ]
        wait_for_value(lambda: query_turns(server.http_url), (2, 7), "two queries running, seven waiting")
        for query in crowd[::2]:
            query.hang_up()
        for query in crowd[1::2]:
            status, body = query.answer()
            assert status in (400, 503), body  # cancelled at its time limit, or refused: no turn came in time
        wait_for_value(lambda: query_turns(server.http_url), (0, 0), "every turn handed back, nobody waiting")
        for token in (ACME_TOKENS[0], GLOBEX_TOKEN, INITECH_TOKEN):
            status, body = PostedQuery(server.http_url, "/v1/query", token, "SELECT 7").answer()
            assert (status, body["rows"]) == (200, [[7]]), body
