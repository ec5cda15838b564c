"""Tenants through real processes: two tenants send agent traces through the real OTLP exporters (acme over
gRPC, globex over HTTP) to a real ``tracegrade serve --tokens``, both with one trace id among their own; every
read made through the server sees the caller's tenant only: /v1/query, the CLI's sql, traces, show, export,
grade, runs, diff and export-cases, the web UI's pages and /ui/api endpoints, the MCP tools, an in-process
worker's rules; every hostile query in HOSTILE returns nothing of the other tenant's or is refused. An
operator opening the file sees every tenant, or one with --tenant."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sys
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tests.support import pg_cluster
from tests.support.grading_cli import run_cli, write_config
from tests.support.lake_serve import LakeServerProcess
from tests.support.pg_cluster import PgServer
from tests.support.server_otlp import post
from tests.support.server_process import ServerProcess
from tests.support.tenant_traffic import (
    ACME_TOKENS,
    GLOBEX_SECRET,
    GLOBEX_TOKEN,
    SHARED_TRACE_ID,
    TRACES,
    leaked,
    log_json,
    send_agent_traces,
    sql,
    write_tokens,
)
from tests.support.waiting import wait_until
from tracegrade.evaluation.worker import GradingWorker, WorkerRules
from tracegrade.models.config import CriteriaConfig, CriterionConfig, EvalConfig
from tracegrade.store import TraceStore
from tracegrade.store.lake import LakeStore

pg_server = pg_cluster.pg_server  # the session's PostgreSQL (a fixture)

SHARED = f"{SHARED_TRACE_ID:032x}"
ACME = ACME_TOKENS[0]
ACME_MARK = "ACME-MARK"
ANSWER_CRITERIA = {"contains_keywords": {"keywords": ["answer"]}}

# Every escape tried, as (query, what must happen): "refused" by the sandbox (400 saying why), "runs" (200),
# or "fails" (400: DuckDB's own error). Whatever happens, the answer holds nothing of globex's.
HOSTILE: list[tuple[str, str]] = [
    # plain reads, and reads that ask for the other tenant by name
    ("SELECT * FROM spans", "runs"),
    ("SELECT * FROM spans WHERE tenant = 'globex'", "runs"),
    ("SELECT * FROM spans WHERE tenant <> 'acme' OR true", "runs"),
    ("SELECT tenant, count(*) FROM spans GROUP BY ALL", "runs"),
    ("SELECT * FROM traces WHERE trace_id = '5eed5eed5eed5eed5eed5eed5eed5eed'", "runs"),
    ("SELECT * FROM logs", "runs"),
    ("SELECT * FROM node_visits UNION ALL SELECT * FROM node_visits", "runs"),
    ("SELECT * FROM tool_calls", "runs"),
    ("SELECT * FROM llm_calls", "runs"),
    ("SELECT * FROM eval_runs", "runs"),
    ("SELECT * FROM eval_case_results", "runs"),
    ("SELECT * FROM eval_results", "runs"),
    ("SELECT * FROM eval_run_cases", "runs"),
    ("SELECT * FROM grading_jobs", "runs"),
    ("SELECT * FROM schema_version", "runs"),
    # names in another case or quoted, FROM-first, TABLE
    ("SELECT * FROM SPANS", "runs"),
    ('SELECT * FROM "Spans"', "runs"),
    ('SELECT * FROM "spans"', "runs"),
    ("FROM spans", "runs"),
    ("FROM spans SELECT name", "runs"),
    # qualified names: schema, catalog, quoted, with comments, temp and system catalogs
    ("SELECT * FROM main.spans", "refused"),
    ("SELECT * FROM store.main.spans", "refused"),
    ("SELECT * FROM store.spans", "refused"),
    ('SELECT * FROM "store"."main"."spans"', "refused"),
    ('SELECT * FROM "main"."spans"', "refused"),
    ("SELECT * FROM /* hidden */ main . spans", "refused"),
    ("SELECT * FROM main--\n.spans", "refused"),
    ("SELECT * FROM temp.main.spans", "refused"),
    ("SELECT * FROM memory.main.spans", "refused"),
    ("SELECT * FROM system.main.duckdb_tables", "refused"),
    ("FROM main.spans", "refused"),
    ('SELECT * FROM "main.spans"', "refused"),
    # joins, unions, subqueries, CTEs, LATERAL, recursion
    ("SELECT * FROM traces t JOIN spans s ON s.trace_id = t.trace_id", "runs"),
    ("SELECT * FROM spans NATURAL JOIN traces", "runs"),
    ("SELECT * FROM spans s1 FULL OUTER JOIN spans s2 USING (trace_id)", "runs"),
    ("SELECT * FROM spans, LATERAL (SELECT * FROM logs WHERE logs.trace_id = spans.trace_id)", "runs"),
    ("SELECT trace_id FROM spans UNION ALL SELECT trace_id FROM main.spans", "refused"),
    ("SELECT trace_id FROM spans UNION SELECT trace_id FROM traces", "runs"),
    ("SELECT * FROM (SELECT * FROM spans) sub WHERE tenant = 'globex'", "runs"),
    ("SELECT (SELECT count(*) FROM spans WHERE tenant = 'globex')", "runs"),
    ("SELECT * FROM spans WHERE trace_id IN (SELECT trace_id FROM traces WHERE tenant = 'globex')", "runs"),
    ("SELECT * FROM spans WHERE EXISTS (SELECT 1 FROM main.traces)", "refused"),
    ("SELECT (SELECT max(name) FROM main.spans)", "refused"),
    ("SELECT * FROM (FROM main.spans)", "refused"),
    ("WITH spans AS (SELECT * FROM spans) SELECT * FROM spans", "runs"),
    ("WITH RECURSIVE spans AS (SELECT * FROM spans) SELECT * FROM spans", "runs"),
    ("WITH x AS (SELECT * FROM main.traces) SELECT * FROM x", "refused"),
    ("WITH x AS MATERIALIZED (SELECT * FROM spans) SELECT * FROM x", "runs"),
    ("WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 3) SELECT * FROM r, spans", "runs"),
    ("WITH pg_class AS (SELECT * FROM pg_class) SELECT * FROM pg_class", "refused"),
    # sampling, windows, time travel
    ("SELECT * FROM spans USING SAMPLE 100 PERCENT (bernoulli)", "runs"),
    ("SELECT * FROM spans TABLESAMPLE 100%", "runs"),
    ("SELECT * FROM spans QUALIFY row_number() OVER (PARTITION BY tenant) < 1000", "runs"),
    ("SELECT * FROM spans AT (VERSION => 1)", "refused"),
    ("SELECT * FROM traces AT (TIMESTAMP => now())", "refused"),
    # table functions
    ("SELECT * FROM query('SELECT * FROM main.spans')", "refused"),
    ("SELECT * FROM query_table('spans')", "refused"),
    ("SELECT * FROM read_parquet('store.duckdb')", "refused"),
    ("SELECT * FROM read_csv('/etc/passwd')", "refused"),
    ("SELECT * FROM read_text('/etc/hostname')", "refused"),
    ("SELECT * FROM read_blob('store.duckdb')", "refused"),
    ("SELECT * FROM glob('*')", "refused"),
    ("SELECT * FROM duckdb_tables()", "refused"),
    ("SELECT * FROM duckdb_databases()", "refused"),
    ("SELECT * FROM duckdb_functions()", "refused"),
    ("SELECT * FROM pragma_storage_info('spans')", "refused"),
    ("SELECT * FROM pragma_table_info('spans')", "refused"),
    ("SELECT * FROM json_execute_serialized_sql(json_serialize_sql('SELECT * FROM main.spans'))", "refused"),
    ("SELECT * FROM unnest((SELECT list(name) FROM main.spans))", "refused"),
    ("SELECT * FROM json_each((SELECT to_json(list(s)) FROM spans s))", "runs"),
    ("SELECT * FROM duckdb_columns()", "runs"),
    ("SELECT * FROM duckdb_views()", "runs"),
    ("SELECT * FROM range(3), spans", "runs"),
    ("SELECT * FROM 'store.duckdb'", "refused"),
    # the system catalog: information_schema answers (names only), the views that count rows do not
    ("SELECT * FROM information_schema.tables", "runs"),
    ("SELECT * FROM information_schema.columns", "runs"),
    ("SELECT * FROM pg_catalog.pg_class", "refused"),
    ("SELECT * FROM pg_class", "refused"),
    ("SELECT * FROM duckdb_tables", "refused"),
    ("SELECT * FROM sqlite_master", "refused"),
    ("SELECT * FROM pg_tables", "refused"),
    ("SHOW TABLES", "runs"),
    ("SHOW ALL TABLES", "runs"),
    ("DESCRIBE spans", "runs"),
    ("SUMMARIZE spans", "runs"),
    ("SUMMARIZE traces", "runs"),
    ("SUMMARIZE main.spans", "refused"),
    ("SUMMARIZE SELECT * FROM main.spans", "refused"),
    ("DESCRIBE store.main.spans", "refused"),
    ("EXPLAIN SELECT * FROM spans", "refused"),
    ("EXPLAIN ANALYZE SELECT * FROM spans", "refused"),
    # scalar functions that reveal the server
    ("SELECT current_setting('search_path')", "refused"),
    ("SELECT getvariable('x')", "refused"),
    ("SELECT stats(name) FROM spans", "refused"),
    ("SELECT stats(tenant) FROM traces", "refused"),
    ("SELECT * FROM pg_settings", "refused"),
    ("SELECT path FROM duckdb_databases", "refused"),
    ("SELECT * FROM __ducklake_metadata_lake.pg_catalog.pg_authid", "refused"),
    ("SELECT current_database(), current_schema()", "runs"),
    # statements that are not one SELECT
    ("SET search_path = 'store.main'", "refused"),
    ("USE store.main", "refused"),
    ("ATTACH 'other.duckdb' AS other", "refused"),
    ("CREATE TEMP VIEW spans AS SELECT * FROM store.main.spans", "refused"),
    ("DROP VIEW spans", "refused"),
    ("SELECT 1; SELECT * FROM main.spans", "refused"),
    ("PRAGMA show_tables", "refused"),
    ("CALL pragma_storage_info('spans')", "refused"),
    ("COPY spans TO 'out.csv'", "refused"),
    ("PIVOT spans ON tenant USING count(*)", "refused"),
    ("DELETE FROM spans", "refused"),
    # error messages as an oracle: the user's expression never sees another tenant's rows
    ("SELECT * FROM spans WHERE CAST(name AS INT) = 1", "fails"),
    ("SELECT CAST(attributes AS INT) FROM spans", "fails"),
    ("SELECT * FROM spans ORDER BY CAST(name AS INT)", "fails"),
    ("SELECT * FROM traces WHERE error(final_response) IS NULL", "fails"),
    ("SELECT * FROM spans WHERE CASE WHEN name LIKE 'globex%' THEN error('leak ' || name) ELSE true END", "runs"),
]


@dataclass
class Deployment:
    server: ServerProcess
    store: Path
    tokens: Path
    workdir: Path
    acme_traces: list[str]
    globex_traces: list[str]


def _rows(reply: Any) -> list[list[Any]]:
    assert reply.status == 200, reply.body
    rows: list[list[Any]] = reply.json()["rows"]
    return rows


def _wait_for_trajectories(server: ServerProcess) -> None:
    for token in (ACME, GLOBEX_TOKEN):
        wait_until(
            lambda token=token: _rows(sql(server.http_url, "SELECT count(*) FROM traces", token)) == [[TRACES]],
            "each tenant's trajectories",
            90,
        )


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    """A real serve with two tenants (acme with two tokens), an in-process worker grading acme's traces."""
    workdir = tmp_path_factory.mktemp("tenants")
    tokens = write_tokens(workdir / "tokens.yaml", {"acme": list(ACME_TOKENS), "globex": [GLOBEX_TOKEN]})
    rules = workdir / "rules.yaml"
    rules.write_text(
        json.dumps(
            {
                "poll_seconds": 0.2,
                "rules": [
                    {
                        "name": "acme-answers",
                        "tenant": "acme",
                        "settle_seconds": 0,
                        "criteria": ANSWER_CRITERIA,
                    }
                ],
            }
        ),
        encoding="utf-8",
    )
    store = workdir / "store.duckdb"
    server = ServerProcess(store, extra_args=("--tokens", str(tokens), "--worker-rules", str(rules)))
    server.start()
    try:
        acme = send_agent_traces("acme", ACME_MARK, grpc_target=server.grpc_target, token=ACME)
        globex = send_agent_traces("globex", GLOBEX_SECRET, http_url=server.http_url, token=GLOBEX_TOKEN)
        for token, body in ((ACME, f"{ACME_MARK} says hi"), (GLOBEX_TOKEN, f"{GLOBEX_SECRET} says hi")):
            reply = post(f"{server.http_url}/v1/logs", log_json(SHARED, body), "application/json", token=token)
            assert reply.status == 200, reply.body
        _wait_for_trajectories(server)
        yield Deployment(server, store, tokens, workdir, acme, globex)
    finally:
        server.kill()


def test_the_tenants_sent_one_trace_id_and_each_sees_its_own_trajectory(deployment: Deployment) -> None:
    url = deployment.server.http_url
    assert deployment.acme_traces[0] == deployment.globex_traces[0] == SHARED
    for token, tenant, mark in ((ACME, "acme", ACME_MARK), (GLOBEX_TOKEN, "globex", GLOBEX_SECRET)):
        rows = _rows(
            sql(url, "SELECT tenant, root_name, span_count, user_query FROM traces WHERE trace_id = ?", token, [SHARED])
        )
        assert rows == [[tenant, f"{tenant}-agent", 3, f"{mark} question 0"]]
        assert _rows(sql(url, "SELECT DISTINCT tenant FROM spans", token)) == [[tenant]]
        assert _rows(sql(url, "SELECT count(*) FROM spans", token)) == [[3 * TRACES]]
        assert _rows(sql(url, "SELECT body FROM logs", token)) == [[json.dumps(f"{mark} says hi")]]
        assert _rows(sql(url, "SELECT name FROM tool_calls WHERE trace_id = ?", token, [SHARED])) == [
            [f"{tenant}_lookup"]
        ]
    reply = sql(url, "SELECT 1", "not-a-token")
    assert reply.status == 401 and b"invalid bearer token" in reply.body
    assert sql(url, "SELECT count(*) FROM spans", ACME_TOKENS[1]).status == 200  # either of acme's tokens


@pytest.mark.parametrize(("statement", "outcome"), HOSTILE, ids=[q for q, _ in HOSTILE])
def test_a_hostile_query_returns_nothing_of_the_other_tenant(
    deployment: Deployment, statement: str, outcome: str
) -> None:
    reply = sql(deployment.server.http_url, statement, ACME)
    assert not leaked(reply.body, *deployment.globex_traces[1:]), reply.body[:2000]
    if outcome == "runs":
        assert reply.status == 200, reply.body
        assert "globex" not in json.dumps(reply.json()["rows"]), reply.body[:2000]  # not even its name
    else:
        assert reply.status == 400, reply.body
        message = reply.json()["message"]
        refused = ("not allowed", "not available", "refused", "a tenant's query names tables", "read-only")
        assert any(word in message for word in refused) == (outcome == "refused"), message


def test_the_other_tenant_asked_by_name_through_parameters_gets_nothing(deployment: Deployment) -> None:
    url = deployment.server.http_url
    assert _rows(sql(url, "SELECT count(*) FROM spans WHERE tenant = ?", ACME, ["globex"])) == [[0]]
    assert _rows(sql(url, "SELECT count(*) FROM traces WHERE trace_id = ?", ACME, [deployment.globex_traces[1]])) == [
        [0]
    ]


def test_the_cli_through_the_server_shows_each_tenant_its_own(deployment: Deployment, tmp_path: Path) -> None:
    store = deployment.store
    shown = run_cli("sql", "--store", store, "--token", ACME, "--format", "json", "SELECT tenant, name FROM spans")
    assert shown.exit_code == 0, shown.output
    assert {row["tenant"] for row in json.loads(shown.stdout)} == {"acme"}
    listed = run_cli("traces", "--store", store, "--token", ACME, "--format", "json")
    assert listed.exit_code == 0 and not leaked(listed.stdout), listed.output
    assert {row["trace_id"] for row in json.loads(listed.stdout)} == set(deployment.acme_traces)
    tree = run_cli("show", SHARED, "--store", store, "--token", GLOBEX_TOKEN)
    assert tree.exit_code == 0 and "globex_lookup" in tree.stdout and "acme" not in tree.stdout, tree.output
    tree = run_cli("show", SHARED, "--store", store, "--token", ACME)
    assert tree.exit_code == 0 and "acme_lookup" in tree.stdout and not leaked(tree.stdout), tree.output
    missing = run_cli("show", deployment.globex_traces[1], "--store", store, "--token", ACME)
    assert missing.exit_code != 0 and not leaked(missing.output)
    exported = run_cli("export", "--store", store, "--token", ACME, "--table", "spans", "-o", tmp_path / "out")
    assert exported.exit_code == 0, exported.output
    spans = pq.read_table(tmp_path / "out" / "spans.parquet")
    assert spans.num_rows == 3 * TRACES and set(spans.column("tenant").to_pylist()) == {"acme"}
    cases = tmp_path / "cases.json"
    made = run_cli("export-cases", "--store", store, "--token", ACME, "-o", cases)
    assert made.exit_code == 0, made.output
    assert ACME_MARK in cases.read_text() and not leaked(cases.read_text())


def test_grading_through_the_server_reads_records_and_lists_the_callers_runs_only(
    deployment: Deployment, tmp_path: Path
) -> None:
    config = EvalConfig(criteria=CriteriaConfig(contains_keywords=CriterionConfig.contains_keywords(["answer"])))
    write_config(tmp_path / "config.json", config)
    store = deployment.store
    for token, name, traces in (
        (ACME, "acme", deployment.acme_traces),
        (GLOBEX_TOKEN, "globex", deployment.globex_traces),
    ):
        for run in ("first", "second"):
            out = tmp_path / f"{name}-{run}"
            graded = run_cli(
                "grade",
                "--store",
                store,
                "--token",
                token,
                "--config",
                tmp_path / "config.json",
                "--out",
                out,
                "--format",
                "json",
            )
            assert graded.exit_code == 0, graded.output
            report = json.loads(next(out.glob("*.json")).read_text())
            assert {case["trace_ids"][0] for case in report["results"]} == set(traces)
    runs = {}
    for token, name in ((ACME, "acme"), (GLOBEX_TOKEN, "globex")):
        listed = run_cli("runs", "--store", store, "--token", token, "--format", "json")
        assert listed.exit_code == 0, listed.output
        runs[name] = {run["run_id"]: run["kind"] for run in json.loads(listed.stdout)}
    assert not set(runs["acme"]) & set(runs["globex"])
    assert sorted(runs["globex"].values()) == ["reference_free", "reference_free"]  # no rule is globex's
    wait_until(lambda: "worker" in _kinds(store, ACME).values(), "the worker's run of acme's traces", 60)
    graded = sorted(run for run, kind in runs["acme"].items() if kind == "reference_free")
    diffed = run_cli("diff", *graded, "--store", store, "--token", ACME, "--format", "json")
    assert diffed.exit_code == 0 and not leaked(diffed.output), diffed.output
    refused = run_cli("diff", graded[0], sorted(runs["globex"])[0], "--store", store, "--token", ACME)
    assert refused.exit_code != 0 and "no grading run" in refused.output and not leaked(refused.output)
    target = sorted(runs["globex"])[0]  # a run recorded under an id of globex's is acme's own run
    report = json.loads(next((tmp_path / "acme-first").glob("*.json")).read_text())
    body = json.dumps({"report": report, "kind": "eval_set", "run_id": target}).encode()
    recorded = post(f"{deployment.server.http_url}/v1/runs", body, "application/json", token=ACME)
    assert recorded.status == 200 and recorded.json()["run_id"] == target, recorded.body
    kind = "SELECT kind FROM eval_runs WHERE run_id = ?"
    assert _rows(sql(deployment.server.http_url, kind, GLOBEX_TOKEN, [target])) == [["reference_free"]]
    assert _rows(sql(deployment.server.http_url, kind, ACME, [target])) == [["eval_set"]]


def _kinds(store: Path, token: str) -> dict[str, str]:
    listed = run_cli("runs", "--store", store, "--token", token, "--format", "json")
    return {run["run_id"]: run["kind"] for run in json.loads(listed.stdout)}


def _get(url: str, token: str | None = None, cookie: str | None = None) -> tuple[int, str, dict[str, str]]:
    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    if cookie:
        request.add_header("Cookie", cookie)
    opener = urllib.request.build_opener(_NoRedirect())
    try:
        with opener.open(request, timeout=60) as response:
            return response.status, response.read().decode(), dict(response.headers)
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(), dict(error.headers)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any) -> None:  # the sign-in answers 303 with the cookie: keep it
        return None


def test_the_web_ui_and_its_api_show_each_tenant_its_own(deployment: Deployment) -> None:
    ui = f"{deployment.server.http_url}/ui"
    status, body, _ = _get(f"{ui}/api/traces")
    assert status == 401
    for token, tenant in ((ACME, "acme"), (GLOBEX_TOKEN, "globex")):
        status, body, _ = _get(f"{ui}/api/traces?limit=50", token)
        assert status == 200
        assert {t["trace_id"] for t in json.loads(body)["traces"]} == set(
            deployment.acme_traces if tenant == "acme" else deployment.globex_traces
        )
    status, body, _ = _get(f"{ui}/api/facets", ACME)
    assert status == 200 and "acme-bot" in body and not leaked(body)
    status, body, _ = _get(f"{ui}/api/traces/{SHARED}", ACME)
    assert status == 200 and "acme_lookup" in body and not leaked(body)
    status, body, _ = _get(f"{ui}/api/traces/{deployment.globex_traces[1]}", ACME)
    assert status == 404 and not leaked(body)
    status, body, _ = _get(f"{ui}/api/runs", ACME)
    assert status == 200 and not leaked(body)
    status, body, _ = _get(f"{ui}/api/schema", ACME)
    assert status == 200 and "spans" in body and not leaked(body)
    for statement, _outcome in HOSTILE:
        reply = post(f"{ui}/api/sql", json.dumps({"sql": statement}).encode(), "application/json", token=ACME)
        assert reply.status in (200, 400) and not leaked(reply.body, *deployment.globex_traces[1:]), statement
    # a browser signs in with a ?token= link, then carries the cookie: its pages are the tenant's too
    status, _, headers = _get(f"{ui}/?token={GLOBEX_TOKEN}")
    assert status == 303
    cookie = headers["Set-Cookie"].split(";", 1)[0]
    status, page, _ = _get(f"{ui}/traces/{SHARED}", cookie=cookie)
    assert status == 200 and "globex_lookup" in page and "acme_lookup" not in page
    status, page, _ = _get(f"{ui}/", cookie=cookie)
    assert status == 200 and GLOBEX_SECRET in page and ACME_MARK not in page
    status, page, _ = _get(f"{ui}/sql?q=SELECT+*+FROM+spans", cookie=cookie)
    assert status == 200
    status, page, _ = _get(f"{ui}/runs", ACME)
    assert status == 200 and not leaked(page)


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_the_mcp_tools_answer_for_the_tokens_tenant(deployment: Deployment, transport: str) -> None:
    pytest.importorskip("mcp")
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    calls = (
        ("list_traces", {}),
        ("get_trajectory", {"trace_id": SHARED}),
        ("run_sql", {"sql": "SELECT tenant, name FROM spans"}),
        ("run_sql", {"sql": "SELECT * FROM main.spans"}),
        ("list_runs", {}),
    )

    async def ask(session: Any) -> list[str]:
        await session.initialize()
        answers = []
        for name, arguments in calls:
            result = await session.call_tool(name, arguments)
            answers.append(json.dumps([c.model_dump() for c in result.content]))
        return answers

    async def call(token: str) -> list[str]:
        if transport == "http":  # /mcp on the receiver
            client = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
            url = f"{deployment.server.http_url}/mcp"
            async with (
                client,
                streamable_http_client(url, http_client=client) as (read, write),
                ClientSession(read, write) as session,
            ):
                return await ask(session)
        env = {k: v for k, v in os.environ.items() if not k.startswith("TRACEGRADE_")}
        code = "from tracegrade.cli.main import main; main()"
        args = ["-c", code, "mcp", "--store", str(deployment.store), "--token", token]  # through the server
        parameters = StdioServerParameters(command=sys.executable, args=args, env=env)
        async with stdio_client(parameters) as (read, write), ClientSession(read, write) as session:
            return await ask(session)

    acme = asyncio.run(call(ACME))
    assert ACME_MARK in acme[0] and "acme_lookup" in acme[1] and "catalog or schema" in acme[3], acme
    for answer in acme:
        assert not leaked(answer, *deployment.globex_traces[1:]), answer[:2000]
    globex = asyncio.run(call(GLOBEX_TOKEN))
    assert GLOBEX_SECRET in globex[0] and ACME_MARK not in "".join(globex)


def test_an_operator_opening_the_file_sees_every_tenant_or_the_one_named(deployment: Deployment) -> None:
    deployment.server.terminate()  # the file is free: an operator opens it directly
    try:
        store = deployment.store
        everyone = run_cli("sql", "--store", store, "--format", "json", "SELECT DISTINCT tenant FROM spans ORDER BY 1")
        assert everyone.exit_code == 0, everyone.output
        assert [row["tenant"] for row in json.loads(everyone.stdout)] == ["acme", "globex"]
        one = run_cli(
            "sql", "--store", store, "--tenant", "globex", "--format", "json", "SELECT tenant, name FROM spans"
        )
        assert {row["tenant"] for row in json.loads(one.stdout)} == {"globex"}
        refused = run_cli("sql", "--store", store, "--tenant", "acme", "SELECT * FROM main.spans")
        assert refused.exit_code != 0 and "catalog or schema" in refused.output
        with TraceStore(store, read_only=True) as opened:
            jobs = opened.query("SELECT DISTINCT tenant FROM grading_jobs").rows
            assert jobs == [("acme",)]  # the worker's rule is acme's: globex's traces got no job
            kinds = opened.query("SELECT tenant, kind FROM eval_runs WHERE kind = 'worker'").rows
            assert {tenant for tenant, _ in kinds} == {"acme"}
    finally:
        deployment.server.start()


def test_sighup_reloads_the_tokens_file_and_a_broken_one_leaves_the_tokens_in_use(tmp_path: Path) -> None:
    tokens = write_tokens(tmp_path / "tokens.yaml", {"acme": ["old-token", "kept-token"]})
    with ServerProcess(tmp_path / "store.duckdb", extra_args=("--tokens", str(tokens))) as server:
        url = server.http_url
        assert "tenant(s) acme have a token of fewer than 16 characters" in server.log()  # said at start
        assert sql(url, "SELECT 1", "old-token").status == 200
        assert sql(url, "SELECT 1", "new-token").status == 401
        write_tokens(tokens, {"acme": ["kept-token", "new-token"], "globex": ["globex-new"]})
        os.kill(server.pid, signal.SIGHUP)
        wait_until(lambda: sql(url, "SELECT 1", "new-token").status == 200, "the added token", 30)
        assert sql(url, "SELECT 1", "old-token").status == 401  # removed
        assert sql(url, "SELECT 1", "kept-token").status == 200
        assert sql(url, "SELECT 1", "globex-new").status == 200
        assert "tenant(s) acme, globex have a token of fewer than 16" in server.log()  # and again after a reload
        tokens.write_text("tenants:\n  acme: [kept-token]\n  bad name!: [x]\n", encoding="utf-8")
        os.kill(server.pid, signal.SIGHUP)
        wait_until(lambda: "NOT reloaded" in server.log(), "the refused reload", 30)
        assert "tenants: 'bad name!' is not a valid tenant name" in server.log()
        for token in ("kept-token", "new-token", "globex-new"):  # every token in use stays
            assert sql(url, "SELECT 1", token).status == 200
        tokens.write_text("tenants: {acme: [kept-token], globex: [kept-token]}\n", encoding="utf-8")
        os.kill(server.pid, signal.SIGHUP)
        wait_until(lambda: "a token must name exactly one tenant" in server.log(), "the refused duplicate", 30)
        assert sql(url, "SELECT 1", "globex-new").status == 200


LAKE_HOSTILE: list[tuple[str, str]] = [
    *HOSTILE,
    ("SELECT * FROM raw.spans", "refused"),
    ("SELECT * FROM lake.raw.spans", "refused"),
    ("SELECT * FROM lake.main.spans", "refused"),
    ("SELECT * FROM lake.spans", "refused"),
    ("SELECT * FROM ducklake_snapshots('lake')", "refused"),
    ("SELECT * FROM ducklake_table_info('lake')", "refused"),
    ("SELECT * FROM spans AT (VERSION => 0)", "refused"),
]


def test_on_a_lake_each_tenant_reads_its_own_and_every_hostile_query_fails_to_reach_the_other(
    pg_server: PgServer, tmp_path: Path
) -> None:
    location = f"ducklake:postgres:{pg_server.new_database()}"
    tokens = write_tokens(tmp_path / "tokens.yaml", {"acme": list(ACME_TOKENS), "globex": [GLOBEX_TOKEN]})
    server = LakeServerProcess(location, tmp_path / "data", tmp_path / "journal", extra_args=("--tokens", str(tokens)))
    with server:
        acme = send_agent_traces("acme", ACME_MARK, http_url=server.http_url, token=ACME)
        globex = send_agent_traces("globex", GLOBEX_SECRET, grpc_target=server.grpc_target, token=GLOBEX_TOKEN)
        assert acme[0] == globex[0] == SHARED
        _wait_for_trajectories(server)
        url = server.http_url
        for token, tenant in ((ACME, "acme"), (GLOBEX_TOKEN, "globex")):
            rows = _rows(sql(url, "SELECT tenant, root_name FROM traces WHERE trace_id = ?", token, [SHARED]))
            assert rows == [[tenant, f"{tenant}-agent"]]
            assert _rows(sql(url, "SELECT DISTINCT tenant FROM spans", token)) == [[tenant]]
        for statement, outcome in LAKE_HOSTILE:
            reply = sql(url, statement, ACME)
            assert not leaked(reply.body, *globex[1:]), (statement, reply.body[:2000])
            if outcome == "runs" and reply.status == 400:  # a table the lake does not have (yet): grading's
                assert re.search(r"Table with name (eval_|grading_)\w+ does not exist", reply.json()["message"])
                continue
            assert reply.status == (200 if outcome == "runs" else 400), (statement, reply.body[:2000])
            if outcome == "runs":
                assert "globex" not in json.dumps(reply.json()["rows"]), (statement, reply.body[:2000])
        status, body, _ = _get(f"{url}/ui/api/traces?limit=50", ACME)
        assert status == 200 and {t["trace_id"] for t in json.loads(body)["traces"]} == set(acme)
    # a worker on the lake: acme's rule grades acme's traces only, its jobs and run are acme's
    rules = WorkerRules.model_validate(
        {"rules": [{"name": "answers", "tenant": "acme", "settle_seconds": 0, "criteria": ANSWER_CRITERIA}]}
    )
    with LakeStore(location, data_path=tmp_path / "data") as lake:
        assert asyncio.run(GradingWorker(lake, rules).run_once()) == TRACES
        jobs = lake.query("SELECT tenant, job_id, status FROM grading_jobs ORDER BY job_id").rows
        assert jobs == [("acme", f"acme/answers:{trace}", "done") for trace in sorted(acme)]
        assert lake.query("SELECT tenant, kind FROM eval_runs").rows == [("acme", "worker")]
        assert lake.query("SELECT count(*) FROM eval_runs", tenant="globex").rows == [(0,)]
        graded = lake.query("SELECT trace_id FROM eval_results ORDER BY 1", tenant="acme").rows
        assert graded == [(trace,) for trace in sorted(acme)]
    # the lake has no single holder: an operator opens it directly, every tenant or the one named
    everyone = run_cli("sql", "--store", location, "--format", "json", "SELECT DISTINCT tenant FROM spans ORDER BY 1")
    assert [row["tenant"] for row in json.loads(everyone.stdout)] == ["acme", "globex"], everyone.output
    one = run_cli("sql", "--store", location, "--tenant", "acme", "--format", "json", "SELECT * FROM traces")
    assert one.exit_code == 0 and not leaked(one.stdout, *globex[1:]), one.output
    assert {row["trace_id"] for row in json.loads(one.stdout)} == set(acme)
