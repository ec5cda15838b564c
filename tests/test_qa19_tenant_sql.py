"""QA 19: a tenant's SQL meets no other tenant's value, not even in an error, and cannot watch another's activity.

globex (the victim) stores 60,000 spans and acme (the attacker) a few after them, in one commit, so that on a lake
both tenants' rows share one Parquet file and row group, as a receiver's commit of several tenants' records does.
DuckDB 1.5's Parquet reader runs the filters it was handed in the order it finds fastest, measured as it goes: after
some fifty vectors it tries the query's own filter (``span_id::UUID IS NULL``) before the tenant's condition, and
the cast failed on a row of globex's, quoting its span id. A lake's tenant views now blank other tenants' values in
every column, so such a filter stays above the scan and only ever sees acme's values. A file store's scan never did
this; both run the same queries. The server's counters of queries, connections and transactions
(``current_query_id()`` …) moved with every tenant's queries and commits: acme polling them watched globex at work;
a tenant's query may no longer call them. Each is asked through ``POST /v1/query``, the UI's ``/ui/api/sql`` and
MCP's ``run_sql`` of a real ``tracegrade serve --tokens``, on a DuckDB file and on a lake on PostgreSQL. The other
escapes tried (names, catalogs, table functions, time travel, …) are in test_tenants.py and
test_qa16_tenant_isolation.py."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from dataclasses import replace

import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from tests.support import pg_cluster
from tests.support.lake_serve import LakeServerProcess
from tests.support.pg_cluster import PgServer
from tests.support.server_otlp import HttpReply, post
from tests.support.server_process import ServerProcess
from tests.support.store_records import make_span
from tests.support.tenant_traffic import ACME_TOKENS, GLOBEX_SECRET, GLOBEX_TOKEN, leaked, sql, write_tokens
from tracegrade.models.span import SpanRecord
from tracegrade.store import TraceStore
from tracegrade.store.lake import LakeStore
from tracegrade.store.prepared import prepare_write

pg_server = pg_cluster.pg_server  # the session's PostgreSQL (a fixture), for the lake

ATTACKER = ACME_TOKENS[0]
VICTIM_SPANS = 60_000  # past the ~51,200 rows (fifty vectors) after which DuckDB 1.5 reorders a scan's filters
ATTACKER_SPANS = 5
# every id of globex's starts with these hex digits, every id of acme's with "acac"
VICTIM_IDS = re.compile(r"6606[0-9a-f]{12}")
VICTIM_TRACES = 6

# Filters on the key columns a lake's views hand down to the scan, each failing on the first value it is run on:
# that value must be acme's. (DuckDB takes these casts for ones that cannot fail, so it moves them freely.)
ORACLES = [
    "SELECT count(*) FROM spans WHERE span_id::UUID IS NULL",
    "SELECT count(*) FROM spans WHERE trace_id::VARCHAR[] IS NULL",
    "SELECT count(*) FROM spans WHERE span_id::STRUCT(a INT) IS NULL",
    "SELECT count(*) FROM spans WHERE tenant::MAP(VARCHAR, INT) IS NULL",
    "SELECT span_id FROM spans WHERE name LIKE '%' AND span_id::UUID IS NOT NULL",
]
# the server's counters of every tenant's queries, connections and transactions
COUNTERS = ["current_query_id()", "current_connection_id()", "current_transaction_id()", "txid_current()"]


def _spans(tenant: str, prefix: str, count: int, marker: str) -> list[SpanRecord]:
    """``count`` spans of ``tenant`` in ``VICTIM_TRACES`` traces, every id starting with ``prefix``."""
    per_trace = -(-count // VICTIM_TRACES)
    spans = []
    for n in range(count):
        span = make_span(n // per_trace, n, name=f"{marker} step {n}", resource={"service.name": f"{tenant}-bot"})
        spans.append(replace(span, trace_id=prefix + span.trace_id[4:], span_id=prefix + span.span_id[4:]))
    return spans


def _store_both_tenants(store: TraceStore) -> None:
    """globex's spans then acme's, in one commit (one file of each table on a lake)."""
    victim = prepare_write(_spans("globex", "6606", VICTIM_SPANS, GLOBEX_SECRET), [], "globex")
    attacker = prepare_write(_spans("acme", "acac", ATTACKER_SPANS, "ACME-MARK"), [], "acme")
    store.write_batch([victim, attacker])


@pytest.fixture(scope="module", params=["file", "lake"])
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    workdir = tmp_path_factory.mktemp(f"qa19-{request.param}")
    tokens = write_tokens(workdir / "tokens.yaml", {"acme": list(ACME_TOKENS), "globex": [GLOBEX_TOKEN]})
    args = ("--tokens", str(tokens))
    served: ServerProcess
    if request.param == "file":
        with TraceStore(workdir / "store.duckdb") as store:
            _store_both_tenants(store)
        served = ServerProcess(workdir / "store.duckdb", extra_args=args)
    else:
        pg: PgServer = request.getfixturevalue("pg_server")
        location, data = f"ducklake:postgres:{pg.new_database()}", workdir / "lake-data"
        with LakeStore(location, data_path=data) as lake:
            _store_both_tenants(lake)
        served = LakeServerProcess(location, data, workdir / "journal", extra_args=args)
    with served:
        yield served


def _ui_sql(url: str, statement: str) -> HttpReply:
    return post(f"{url}/ui/api/sql", json.dumps({"sql": statement}).encode(), "application/json", token=ATTACKER)


def _mcp_run_sql(url: str, statements: list[str]) -> list[str]:
    """MCP ``run_sql``'s answer (an error included) to each statement, at the receiver's ``/mcp`` as acme."""

    async def ask() -> list[str]:
        client = create_mcp_http_client(headers={"Authorization": f"Bearer {ATTACKER}"})
        async with (
            client,
            streamable_http_client(f"{url}/mcp", http_client=client) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            answers = []
            for statement in statements:
                result = await session.call_tool("run_sql", {"sql": statement})
                answers.append(json.dumps([content.model_dump() for content in result.content]))
            return answers

    return asyncio.run(ask())


def _nothing_of_globex(answer: str, where: str) -> None:
    assert not leaked(answer, "globex"), (where, answer[:2000])
    assert not VICTIM_IDS.search(answer), (where, answer[:2000])


def test_the_stores_hold_both_tenants(server: ServerProcess) -> None:
    for token, tenant, count in ((ATTACKER, "acme", ATTACKER_SPANS), (GLOBEX_TOKEN, "globex", VICTIM_SPANS)):
        reply = sql(server.http_url, "SELECT tenant, count(*) FROM spans GROUP BY ALL", token)
        assert reply.status == 200 and reply.json()["rows"] == [[tenant, count]], reply.body[:2000]


@pytest.mark.parametrize("statement", ORACLES)
def test_a_failing_filter_only_ever_meets_the_callers_values(server: ServerProcess, statement: str) -> None:
    for where, reply in (
        ("/v1/query", sql(server.http_url, statement, ATTACKER)),
        ("/ui/api/sql", _ui_sql(server.http_url, statement)),
    ):
        assert reply.status == 400, (where, reply.body[:2000])  # each fails on acme's first value
        assert "Conversion Error" in reply.body.decode(), (where, reply.body[:2000])
        _nothing_of_globex(reply.body.decode(), f"{where}: {statement}")
    (answer,) = _mcp_run_sql(server.http_url, [statement])
    assert "Conversion Error" in answer, answer[:2000]
    _nothing_of_globex(answer, f"MCP run_sql: {statement}")


def test_the_servers_counters_are_refused_to_a_tenant(server: ServerProcess) -> None:
    statements = [f"SELECT {counter}" for counter in COUNTERS]
    for statement, counter in zip(statements, COUNTERS):
        refusal = f"function {counter} is not allowed"
        for where, reply in (
            ("/v1/query", sql(server.http_url, statement, ATTACKER)),
            ("/ui/api/sql", _ui_sql(server.http_url, statement)),
        ):
            assert reply.status == 400 and refusal in reply.body.decode(), (where, reply.body[:2000])
    for statement, answer in zip(statements, _mcp_run_sql(server.http_url, statements)):
        assert "is not allowed" in answer and statement.split()[1][:-2] in answer, answer[:2000]
