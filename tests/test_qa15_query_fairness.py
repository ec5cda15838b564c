"""One tenant cannot take every query turn: with acme keeping each of ``--max-queries`` busy with a runaway
query and more of them waiting, globex's query gets the first turn that frees (not acme's next one), over
``POST /v1/query`` and the web UI's SQL API (both wait for their turn on the event loop), with one turn and
with two. A real server process; acme's queries end when the test hangs up on them,
so what frees a turn is the test's doing, and every step waits for the receiver's own gauges."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from tests.support.posted_query import PostedQuery, query_turns
from tests.support.server_process import ServerProcess
from tests.support.tenant_traffic import ACME_TOKENS, GLOBEX_TOKEN, write_tokens
from tests.support.waiting import wait_for_value

RUNAWAY = "SELECT count(*) FROM range(1000000000) a, range(1000000000) b WHERE a.range + b.range = -1"


@pytest.mark.parametrize(("max_queries", "path"), [(1, "/v1/query"), (2, "/ui/api/sql")])
def test_a_tenant_keeping_every_turn_busy_does_not_starve_another(tmp_path: Path, max_queries: int, path: str) -> None:
    tokens = write_tokens(tmp_path / "tokens.yaml", {"acme": list(ACME_TOKENS), "globex": [GLOBEX_TOKEN]})
    # acme's queries never end by themselves while the test runs: only hanging up on one frees its turn
    args = ("--tokens", str(tokens), "--max-queries", str(max_queries), "--query-timeout", "600")
    with ServerProcess(tmp_path / "store.duckdb", extra_args=args) as server:
        running = [PostedQuery(server.http_url, "/v1/query", ACME_TOKENS[0], RUNAWAY) for _ in range(max_queries)]
        wait_for_value(lambda: query_turns(server.http_url), (max_queries, 0), "acme holding every turn")
        queued = [PostedQuery(server.http_url, "/v1/query", ACME_TOKENS[1], RUNAWAY) for _ in range(2)]
        wait_for_value(lambda: query_turns(server.http_url), (max_queries, 2), "acme's next queries waiting")

        answers: list[tuple[int, Any]] = []
        globex = PostedQuery(server.http_url, path, GLOBEX_TOKEN, "SELECT 42 AS answer")
        reader = threading.Thread(target=lambda: answers.append(globex.answer()))
        reader.start()
        wait_for_value(lambda: query_turns(server.http_url), (max_queries, 3), "globex's query waiting behind acme's")

        running[0].hang_up()
        reader.join(60)
        assert answers, "globex's query got no turn: the freed one went to acme's next query"
        status, body = answers[0]
        assert status == 200, body
        assert body["rows"] == [[42]]
        # acme's queue moves on: its first waiting query took the turn globex handed back
        wait_for_value(lambda: query_turns(server.http_url), (max_queries, 1), "acme's next query running")

        for query in (*running[1:], *queued):
            query.hang_up()
        wait_for_value(lambda: query_turns(server.http_url), (0, 0), "every turn handed back")
        again = PostedQuery(server.http_url, "/v1/query", ACME_TOKENS[0], "SELECT 1")
        status, body = again.answer()
        assert (status, body["rows"]) == (200, [[1]]), body
