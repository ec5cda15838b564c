"""QA 16: can one tenant see or touch another's data through the newer entry points?

A real ``tracegrade serve --tokens`` with three tenants: globex (the victim) sends its agent traces first, so its
rows come first in every table, then acme (the attacker) sends its own, both with one trace id among theirs; a
grading rule of globex's grades globex's traces in-process, and each records a graded run through the server.
acme then reaches for globex's data through every entry point: queries whose failing expression would quote the
first row DuckDB evaluates (globex's, were the tenant's view applied late), queries shaped to slip past the tenant
views, every UI page and JSON endpoint and MCP tool that takes an id given globex's ids, ``/metrics``, and the CLI
through the server (sql, export, show, diff, gate). On a deployment of its own acme then tries to change globex's
data (``/v1/forget``, ``/v1/runs``, ``tracegrade forget``, spans and a log record sent under globex's ids), and
globex's every row, read back table by table, is as it was. initech's token may only read: it sees nothing of
either and may change nothing. Last, both tenants send the very same spans while the receiver is SIGKILLed: the
journal's replay stores each tenant's as its own."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter
from opentelemetry.sdk.trace import ReadableSpan

from tests.support.export_load import ExportLoad, assert_stored_once, make_batches, stored_span_counts
from tests.support.grading_cli import run_cli, write_config
from tests.support.server_otlp import HttpReply, post
from tests.support.server_process import ServerProcess
from tests.support.server_requests import exchange, span_json, traces_json
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
from tracegrade.models.config import CriteriaConfig, CriterionConfig, EvalConfig

ATTACKER = ACME_TOKENS[0]
VICTIM = GLOBEX_TOKEN
READER = "initech-read-only-token"  # a third tenant's token with the read scope alone
ACME_MARK = "ACME-MARK"
SHARED = f"{SHARED_TRACE_ID:032x}"
RULE = "globex-answers"

# Queries that fail on the first row their expression is evaluated on. globex's rows are stored first, so were
# acme's view applied after acme's expression, the error would quote a row of globex's.
ERROR_ORACLES = [
    "SELECT * FROM spans WHERE CAST(span_id AS INT) = 1",
    "SELECT * FROM spans WHERE span_id::INT > 0 AND name <> ''",
    "SELECT * FROM spans WHERE error(name || ' ' || trace_id || ' ' || span_id) IS NULL",
    "SELECT * FROM spans WHERE CAST(tenant AS INT) = 1",
    "SELECT * FROM spans WHERE json_extract_string(attributes, '$.\"input.value\"')::INT = 1",
    "SELECT * FROM spans WHERE strptime(name || span_id, '%Y') IS NULL",
    "SELECT * FROM spans ORDER BY CAST(span_id AS INT)",
    "SELECT max(CAST(span_id AS INT)) FROM spans",
    "SELECT * FROM spans s JOIN traces t USING (trace_id) WHERE CAST(s.span_id || t.user_query AS INT) = 1",
    "SELECT * FROM traces WHERE CAST(user_query AS INT) = 1",
    "SELECT * FROM traces WHERE error(trace_id || ' ' || final_response) IS NULL",
    "SELECT * FROM node_visits WHERE CAST(span_id AS INT) = 1",
    "SELECT * FROM tool_calls WHERE CAST(arguments AS INT) = 1",
    "SELECT * FROM logs WHERE error(CAST(body AS VARCHAR)) IS NULL",
    "SELECT * FROM eval_runs WHERE CAST(run_id AS INT) = 1",
    "SELECT * FROM eval_case_results WHERE error(eval_id) IS NULL",
    "SELECT * FROM eval_results WHERE error(run_id || trace_id) IS NULL",
]

# Escapes not in tests/test_tenants.py's HOSTILE list. Whatever each does (runs, fails or is refused), its answer
# holds nothing of globex's, not even its name.
SLIPS = [
    # prepared statements, macros, variables: not one SELECT
    "PREPARE p AS SELECT * FROM main.spans",
    "EXECUTE p",
    "CREATE TEMP MACRO m() AS TABLE SELECT * FROM main.spans",
    "SET VARIABLE v = (SELECT list(name) FROM spans)",
    # table functions and table macros handed a table or SQL
    "SELECT * FROM query_table(['spans', 'traces'])",
    "SELECT * FROM histogram_values(spans, name)",
    "SELECT * FROM summary(spans)",
    "SELECT * FROM pragma_metadata_info()",
    "SELECT * FROM duckdb_constraints()",
    "SELECT * FROM duckdb_prepared_statements()",
    # built-in macros that read the catalog themselves
    "SELECT get_block_size('store')",
    "SELECT pg_get_viewdef(view_oid) FROM duckdb_views()",
    # what the catalog says of a query's own tenant views
    "SELECT sql FROM duckdb_views(), spans",
    "SELECT view_definition FROM information_schema.views, spans",
    "SELECT * FROM information_schema.tables, spans",
    # names that resolve to a store table in other ways
    "SELECT * FROM 'spans'",
    "SELECT * FROM information_schema.spans",
    "SELECT * FROM temp.spans",
    "SELECT * FROM spans AS information_schema",
    "WITH information_schema AS (SELECT 1) SELECT * FROM spans",
    "SELECT * FROM (VALUES (1)) t(spans), spans",
    # summaries and descriptions as subqueries
    "SELECT * FROM (SUMMARIZE spans)",
    "SELECT * FROM (SUMMARIZE SELECT name, user_query FROM spans, traces)",
    "SUMMARIZE eval_runs",
    "SUMMARIZE grading_jobs",
    "SUMMARIZE forgotten_traces",
    "DESCRIBE SELECT * FROM spans",
    "SHOW spans",
    "SELECT * FROM (SHOW ALL TABLES)",
    # reshaping and joins DuckDB plans differently
    "UNPIVOT spans ON name INTO NAME k VALUE v",
    "SELECT * FROM (SELECT name FROM spans) PIVOT (count(*) FOR name IN ('planner', 'acme-agent'))",
    "SELECT * FROM spans POSITIONAL JOIN traces",
    "SELECT * FROM spans ASOF JOIN traces ON spans.start_time >= traces.start_time",
    "SELECT * FROM spans UNION BY NAME SELECT * FROM traces",
    "SELECT * FROM range(1) r, LATERAL (SELECT * FROM eval_results)",
    "SELECT * FROM unnest((SELECT list(tenant || name) FROM spans))",
    "SELECT * FROM spans s1, spans s2 WHERE s1.tenant <> s2.tenant",
]


@dataclass
class Deployment:
    server: ServerProcess
    victim_traces: list[str]
    attacker_traces: list[str]
    victim_runs: list[str]  # the run globex recorded, then its worker's
    attacker_run: str

    @property
    def url(self) -> str:
        return self.server.http_url

    @cached_property
    def victim_marks(self) -> list[str]:
        """What of globex's no answer given to acme may hold, besides what ``leaked`` looks for: its own trace
        ids, span ids and run ids."""
        span_ids = [row[0] for row in _rows(sql(self.url, "SELECT span_id FROM spans", VICTIM))]
        return [*self.victim_traces[1:], *span_ids, *self.victim_runs]

    @cached_property
    def attacker_marks(self) -> list[str]:
        """What of acme's own an answer to acme may hold: its name, marker, ids and run."""
        span_ids = [row[0] for row in _rows(sql(self.url, "SELECT span_id FROM spans", ATTACKER))]
        return ["acme", ACME_MARK, *self.attacker_traces, *span_ids, self.attacker_run]


def _rows(reply: HttpReply) -> list[list[Any]]:
    assert reply.status == 200, reply.body
    rows: list[list[Any]] = reply.json()["rows"]
    return rows


def _grade_and_record(server: ServerProcess, token: str, workdir: Path) -> str:
    """``tracegrade grade`` through the server as ``token``'s tenant, recording the run; its id."""
    answers = CriterionConfig.contains_keywords(["answer"])
    config = write_config(workdir / "config.json", EvalConfig(criteria=CriteriaConfig(contains_keywords=answers)))
    out = workdir / f"graded-{token}"
    graded = run_cli("grade", "--store", server.store, "--token", token, "--config", config, "--out", out)
    assert graded.exit_code == 0, graded.output
    recorded = "SELECT run_id FROM eval_runs WHERE kind = 'reference_free'"
    run_id: str = _rows(sql(server.http_url, recorded, token))[0][0]
    return run_id


# the tenant's traces whose trajectory is missing or older than their newest span or log record (as the store's
# stale_trajectories finds them): none once the log records sent after the spans are mapped in too
_STALE = """
    WITH received AS (
        SELECT trace_id, max(received_at) AS last FROM spans GROUP BY ALL
        UNION ALL SELECT trace_id, max(received_at) FROM logs GROUP BY ALL
    )
    SELECT count(*) FROM received r LEFT JOIN traces t USING (trace_id)
    WHERE t.updated_at IS NULL OR r.last > t.updated_at
"""


def _built(url: str, token: str) -> bool:
    """Are all of the tenant's traces mapped, each from every span and log record it has?"""
    return _rows(sql(url, "SELECT count(*) FROM traces", token)) == [[TRACES]] and _rows(sql(url, _STALE, token)) == [
        [0]
    ]


def _deploy(workdir: Path) -> Deployment:
    """A server with three tenants; globex's traffic first, then acme's; each with a recorded run, globex's
    traces graded by its worker rule too."""
    tokens = write_tokens(
        workdir / "tokens.yaml",
        {"acme": [ATTACKER], "globex": [VICTIM], "initech": [{"token": READER, "scopes": ["read"]}]},
    )
    rules = workdir / "rules.json"
    criteria = {"contains_keywords": {"keywords": ["answer"]}}
    rule = {"name": RULE, "tenant": "globex", "settle_seconds": 0, "criteria": criteria}
    rules.write_text(json.dumps({"poll_seconds": 0.2, "rules": [rule]}), encoding="utf-8")
    store = workdir / "store.duckdb"
    server = ServerProcess(store, extra_args=("--tokens", str(tokens), "--worker-rules", str(rules)))
    server.start()
    try:
        victim = send_agent_traces("globex", GLOBEX_SECRET, grpc_target=server.grpc_target, token=VICTIM)
        attacker = send_agent_traces("acme", ACME_MARK, http_url=server.http_url, token=ATTACKER)
        for token, body in ((VICTIM, f"{GLOBEX_SECRET} says hi"), (ATTACKER, f"{ACME_MARK} says hi")):
            reply = post(f"{server.http_url}/v1/logs", log_json(SHARED, body), "application/json", token=token)
            assert reply.status == 200, reply.body
        for token in (VICTIM, ATTACKER):
            wait_until(lambda token=token: _built(server.http_url, token), "every trajectory built", 90)
        done = "SELECT count(*) FROM grading_jobs WHERE status = 'done'"
        wait_until(lambda: _rows(sql(server.http_url, done, VICTIM)) == [[TRACES]], "globex's worker grading", 90)
        (worker_run,) = _rows(sql(server.http_url, "SELECT run_id FROM eval_runs", VICTIM))[0]
        victim_run = _grade_and_record(server, VICTIM, workdir)
        attacker_run = _grade_and_record(server, ATTACKER, workdir)
    except BaseException:
        server.kill()
        raise
    assert victim[0] == attacker[0] == SHARED
    return Deployment(server, victim, attacker, [victim_run, worker_run], attacker_run)


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    """A deployment only read from: no test changes it."""
    deployed = _deploy(tmp_path_factory.mktemp("qa16-reads"))
    try:
        yield deployed
    finally:
        deployed.server.kill()


def _assert_nothing_of_the_victim(deployment: Deployment, answer: str | bytes, where: str, *echoed: str) -> None:
    """``answer`` holds nothing of globex's, not even its name, once what the request itself said (``echoed``: an
    id asked for, which an error may repeat) is taken out."""
    text = answer.decode("utf-8", "replace") if isinstance(answer, bytes) else answer
    for words in echoed:
        text = text.replace(words, "")
    assert not leaked(text, *deployment.victim_marks), (where, text[:2000])
    assert "globex" not in text.lower(), (where, text[:2000])


@pytest.mark.parametrize("statement", ERROR_ORACLES)
def test_an_error_of_the_attackers_query_quotes_its_own_rows_only(deployment: Deployment, statement: str) -> None:
    reply = sql(deployment.url, statement, ATTACKER)
    message = reply.json()["message"] if reply.status == 400 else ""
    assert reply.status == 400 and "query failed" in message, reply.body[:2000]
    _assert_nothing_of_the_victim(deployment, reply.body, statement)
    # the expression did run over rows, the attacker's: the error quotes one of them
    assert any(mark in message for mark in deployment.attacker_marks), message


@pytest.mark.parametrize("statement", SLIPS)
def test_a_query_shaped_to_slip_past_the_tenant_views_reaches_nothing_of_the_other(
    deployment: Deployment, statement: str
) -> None:
    reply = sql(deployment.url, statement, ATTACKER)
    assert reply.status in (200, 400), reply.body[:2000]
    _assert_nothing_of_the_victim(deployment, reply.body, statement)


def _get(deployment: Deployment, path: str) -> tuple[int, str]:
    status, _, body = exchange(deployment.url + path, Authorization=f"Bearer {ATTACKER}")
    return status, body.decode("utf-8", "replace")


def _quoted(value: str) -> str:
    return urllib.parse.quote(value, safe="")


def _a_victim_span(deployment: Deployment) -> str:
    """A span id of globex's in the trace id both tenants use."""
    span_id: str = _rows(sql(deployment.url, "SELECT min(span_id) FROM spans WHERE trace_id = ?", VICTIM, [SHARED]))[0][
        0
    ]
    return span_id


def test_the_ui_pages_and_api_given_the_victims_ids_show_nothing_of_it(deployment: Deployment) -> None:
    victim_trace, victim_span = deployment.victim_traces[1], _a_victim_span(deployment)
    missing = [  # (path, the ids it asks for, which an error may repeat)
        (f"/ui/api/traces/{victim_trace}", victim_trace),
        (f"/ui/traces/{victim_trace}", victim_trace),
        (f"/ui/api/traces/{victim_trace}/spans/{victim_span}", victim_trace, victim_span),
        (f"/ui/api/traces/{SHARED}/spans/{victim_span}", victim_span),
    ]
    for run in deployment.victim_runs:
        prefixes = [run] + ([run[:-3]] if not deployment.attacker_run.startswith(run[:-3]) else [])
        for asked in prefixes:  # a run id, and a prefix that only the victim's run has
            quoted, versus = _quoted(asked), deployment.attacker_run
            missing += [(f"/ui/api/runs/{quoted}", asked), (f"/ui/api/runs/{quoted}/failing", asked)]
            missing += [(f"/ui/runs/{quoted}", asked), (f"/ui/api/diff?a={quoted}&b={versus}", asked)]
            missing += [(f"/ui/diff?a={quoted}&b={versus}", asked)]
    for path, *asked in missing:
        status, body = _get(deployment, path)
        assert status == 404, (path, status, body[:500])
        _assert_nothing_of_the_victim(deployment, body, path, *asked)
    listings = ["/ui/", "/ui/runs", "/ui/diff", "/ui/api/runs", "/ui/api/facets", "/ui/api/schema"]
    listings += [f"/ui/api/traces?{urllib.parse.urlencode({key: value})}" for key, value in _FILTERS]
    listings += [f"/ui/sql?q={_quoted('SELECT * FROM spans s JOIN traces t USING (trace_id)')}"]
    for path in listings:
        status, body = _get(deployment, path)
        assert status == 200, (path, status, body[:500])
        _assert_nothing_of_the_victim(deployment, body, path)
    status, body = _get(deployment, "/ui/api/traces?limit=200")
    assert status == 200 and {t["trace_id"] for t in json.loads(body)["traces"]} == set(deployment.attacker_traces)
    status, body = _get(deployment, "/ui/api/runs")
    assert [run["run_id"] for run in json.loads(body)["runs"]] == [deployment.attacker_run]


# trace list filters that name the victim's service, tool and text
_FILTERS = [("service", "globex-bot"), ("tool", "globex_lookup"), ("text", GLOBEX_SECRET), ("limit", "200")]


def _mcp(deployment: Deployment, calls: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """Each tool call's answer (errors included) at the receiver's ``/mcp`` as the attacker."""

    async def ask() -> list[str]:
        client = create_mcp_http_client(headers={"Authorization": f"Bearer {ATTACKER}"})
        async with (
            client,
            streamable_http_client(f"{deployment.url}/mcp", http_client=client) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            answers = []
            for name, arguments in calls:
                result = await session.call_tool(name, arguments)
                answers.append(json.dumps([content.model_dump() for content in result.content]))
            return answers

    return asyncio.run(ask())


def test_every_mcp_tool_given_the_victims_ids_answers_nothing_of_it(deployment: Deployment) -> None:
    victim_trace, victim_span = deployment.victim_traces[1], _a_victim_span(deployment)
    answers = {"criteria": {"contains_keywords": {"keywords": ["answer"]}}}
    other_tenants = {
        "criteria": {"sql_assertions": [{"name": "mine", "query": "SELECT * FROM spans WHERE tenant <> 'acme'"}]}
    }
    calls: list[tuple[str, dict[str, Any]]] = [
        ("list_traces", {"limit": 100}),
        ("list_traces", {"service": "globex-bot"}),
        ("list_traces", {"tool": "globex_lookup"}),
        ("list_traces", {"text": GLOBEX_SECRET}),
        ("get_trajectory", {"trace_id": victim_trace, "include_spans": True}),
        ("get_trajectory", {"trace_id": SHARED, "include_spans": True}),
        ("get_span", {"trace_id": victim_trace, "span_id": victim_span}),
        ("get_span", {"trace_id": SHARED, "span_id": victim_span}),
        ("run_sql", {"sql": "SELECT * FROM spans s JOIN traces t USING (trace_id)"}),
        ("run_sql", {"sql": "SELECT * FROM spans WHERE CAST(span_id AS INT) = 1"}),
        ("store_schema", {}),
        ("list_runs", {"limit": 100}),
        *[("failing_cases", {"run_id": run}) for run in deployment.victim_runs],
        *[("diff_runs", {"run_a": run, "run_b": deployment.attacker_run}) for run in deployment.victim_runs],
        ("grade", {"config": answers, "trace_ids": [victim_trace]}),
        ("grade", {"config": answers, "where": f"trace_id = '{victim_trace}' OR span_count > 0"}),
        ("grade", {"config": answers, "where": "CAST(span_count || user_query AS INT) = 1"}),
        ("grade", {"config": other_tenants, "trace_ids": [SHARED]}),
    ]
    replies = _mcp(deployment, calls)
    for (name, arguments), reply in zip(calls, replies, strict=True):
        asked = [v for value in arguments.values() for v in (value if isinstance(value, list) else [value])]
        asked = [value for value in asked if isinstance(value, str)]
        _assert_nothing_of_the_victim(deployment, reply, f"{name} {arguments}", *asked)
    assert all(trace_id in replies[0] for trace_id in deployment.attacker_traces), replies[0][:2000]
    graded = json.loads(json.loads(replies[-1])[0]["text"])
    assert graded["summary"]["passed_cases"] == 1, graded  # SHARED's sandbox held acme's spans only


def test_metrics_name_no_trace_span_or_run_of_any_tenant(deployment: Deployment) -> None:
    status, _, body = exchange(deployment.url + "/metrics")  # anyone may read it: no token
    assert status == 200
    page = body.decode()
    marks = [*deployment.victim_marks, *deployment.attacker_traces, deployment.attacker_run, GLOBEX_SECRET, ACME_MARK]
    assert [mark for mark in marks if mark in page] == []


def test_store_commands_through_the_server_with_the_attackers_token(deployment: Deployment, tmp_path: Path) -> None:
    as_attacker = ("--store", deployment.server.store, "--token", ATTACKER)
    victim_trace, (victim_run, worker_run) = deployment.victim_traces[1], deployment.victim_runs
    both_traces = ("--trace-id", victim_trace, "--trace-id", SHARED)
    outcomes = {
        "sql": run_cli("sql", *as_attacker, "--format", "json", "SELECT * FROM eval_results NATURAL JOIN traces"),
        "export": run_cli("export", *as_attacker, "-o", tmp_path / "out"),
        "otlp": run_cli("export", *as_attacker, *both_traces, "--format", "otlp-json", "-o", tmp_path / "spans.jsonl"),
        "export-cases": run_cli("export-cases", *as_attacker, "-o", tmp_path / "cases.json"),
        "show": run_cli("show", victim_trace, *as_attacker),
        "diff": run_cli("diff", victim_run, deployment.attacker_run, *as_attacker),
        "gate": run_cli("gate", *as_attacker, "--baseline", victim_run, "--candidate", "latest", "--out", tmp_path),
        "gate-worker": run_cli(
            "gate", *as_attacker, "--baseline", worker_run, "--candidate", "latest", "--out", tmp_path / "w"
        ),
        "runs": run_cli("runs", *as_attacker, "--format", "json"),
    }
    for name, outcome in outcomes.items():
        _assert_nothing_of_the_victim(deployment, outcome.output, name, victim_trace, victim_run, worker_run)
    for name in ("show", "diff", "gate", "gate-worker"):
        assert outcomes[name].exit_code != 0, (name, outcomes[name].output)
    assert "no grading run" in outcomes["gate"].output and "no grading run" in outcomes["diff"].output
    assert [run["run_id"] for run in json.loads(outcomes["runs"].stdout)] == [deployment.attacker_run]
    assert outcomes["sql"].exit_code == 0 and outcomes["export"].exit_code == 0, outcomes["export"].output
    for name, written in (("otlp", "spans.jsonl"), ("export-cases", "cases.json")):
        assert outcomes[name].exit_code == 0, outcomes[name].output
        _assert_nothing_of_the_victim(deployment, (tmp_path / written).read_text(encoding="utf-8"), written)
    # the OTLP export of both trace ids holds acme's spans of the one they share, and nothing else
    assert "acme_lookup" in (tmp_path / "spans.jsonl").read_text(encoding="utf-8")
    exported = sorted((tmp_path / "out").glob("*.parquet"))
    assert {path.stem for path in exported} >= {"spans", "traces", "eval_runs", "grading_jobs", "logs"}
    for path in exported:
        table = pq.read_table(path)
        if "tenant" in table.column_names:
            assert set(table.column("tenant").to_pylist()) <= {"acme"}, path.name
        _assert_nothing_of_the_victim(deployment, json.dumps(table.to_pylist(), default=str), path.name)


def test_a_read_only_tenant_sees_neither_tenant_and_may_change_nothing(deployment: Deployment) -> None:
    counted = {}
    for (table,) in _rows(sql(deployment.url, "SELECT table_name FROM information_schema.tables", READER)):
        counted[table] = _rows(sql(deployment.url, f'SELECT count(*) FROM "{table}"', READER))[0][0]
    assert "spans" in counted and set(counted.values()) == {0}, counted
    forget = json.dumps({"trace_ids": [SHARED]}).encode()
    assert post(f"{deployment.url}/v1/forget", forget, "application/json", token=READER).status == 403
    run = json.dumps({"report": {"eval_set_id": "x", "results": []}, "run_id": deployment.victim_runs[0]}).encode()
    assert post(f"{deployment.url}/v1/runs", run, "application/json", token=READER).status == 403


# --- changes: on a deployment of their own, since the attacker's attempts leave rows of its own behind --------


def _everything(url: str, token: str) -> dict[str, list[list[Any]]]:
    """Every row of every store table that ``token``'s tenant sees, table by table, in a fixed order."""
    tables = _rows(sql(url, "SELECT table_name FROM information_schema.tables ORDER BY 1", token))
    return {table: _rows(sql(url, f'SELECT * FROM "{table}" ORDER BY ALL', token)) for (table,) in tables}


def _send_as_attacker(url: str, path: str, body: bytes) -> None:
    reply = post(f"{url}{path}", body, "application/json", token=ATTACKER)
    assert reply.status == 200, reply.body


def test_the_attackers_writes_leave_every_row_of_the_victim_as_it_was(tmp_path: Path) -> None:
    deployment = _deploy(tmp_path)
    url = deployment.url
    try:
        before = _everything(url, VICTIM)
        assert all(before[table] for table in ("spans", "logs", "traces", "eval_runs", "eval_results", "grading_jobs"))
        # spans under the victim's trace and span ids, and the victim's very log record, are the attacker's own
        victim_spans = _rows(sql(url, "SELECT trace_id, span_id FROM spans", VICTIM))
        forged = [span_json(trace_id, 0, spanId=span_id, name="forged") for trace_id, span_id in victim_spans]
        _send_as_attacker(url, "/v1/traces", json.dumps(traces_json(forged, "acme-bot")).encode())
        _send_as_attacker(url, "/v1/logs", log_json(SHARED, f"{GLOBEX_SECRET} says hi"))
        count_forged = "SELECT count(*) FROM spans WHERE name = 'forged'"
        wait_until(lambda: _rows(sql(url, count_forged, ATTACKER)) == [[len(forged)]], "the attacker's forged spans")
        # a run recorded under each of the victim's run ids is the attacker's own
        report = json.loads(next((tmp_path / f"graded-{ATTACKER}").glob("*.json")).read_text(encoding="utf-8"))
        for run_id in deployment.victim_runs:
            for kind in ("worker", "eval_set"):
                _send_as_attacker(
                    url, "/v1/runs", json.dumps({"report": report, "kind": kind, "run_id": run_id}).encode()
                )
        # forgetting the victim's traces (by any spelling), with the runs that graded them
        victim_ids = [*deployment.victim_traces, deployment.victim_traces[1].upper()]
        for delete_runs in (False, True):
            body = json.dumps({"trace_ids": victim_ids, "delete_runs": delete_runs}).encode()
            reply = post(f"{url}/v1/forget", body, "application/json", token=ATTACKER)
            assert reply.status == 200, reply.body
            # runs named as the victim's are the attacker's own: what it recorded above
            assert set(reply.json()["forgotten"]["runs_kept"]) <= {deployment.attacker_run, *deployment.victim_runs}
        store = deployment.server.store
        forgot = run_cli("forget", "--delete-runs", *deployment.victim_traces, "--store", store, "--token", ATTACKER)
        assert forgot.exit_code == 0, forgot.output
        assert _everything(url, VICTIM) == before
        # what the attacker did, it did to its own rows: its copies of the forgotten traces went with its runs
        assert _rows(sql(url, "SELECT count(*) FROM spans WHERE trace_id = ?", ATTACKER, [SHARED])) == [[0]]
        assert _rows(sql(url, "SELECT count(*) FROM eval_runs", ATTACKER)) == [[0]]
    finally:
        deployment.server.kill()


# --- a crash: what each tenant was acknowledged is stored as that tenant's after a SIGKILL and a replay ------

CRASH_BATCHES = 30  # per tenant
CRASH_SPANS_PER_BATCH = 20
KILL_AFTER_ACKED_BATCHES = 12


def test_after_a_sigkill_each_tenants_acknowledged_spans_are_stored_once_as_its_own(tmp_path: Path) -> None:
    """Both tenants send the very same spans (trace and span ids alike), globex over HTTP, acme over gRPC; the
    receiver is SIGKILLed mid-load and restarted on the same store and ports, and the request journal replayed:
    every span each tenant was acknowledged is stored once as its own, whatever the other sent."""
    tokens = write_tokens(tmp_path / "tokens.yaml", {"acme": [ATTACKER], "globex": [VICTIM]})
    store = tmp_path / "crash.duckdb"
    batches = make_batches(CRASH_BATCHES, CRASH_SPANS_PER_BATCH)
    first = ServerProcess(store, extra_args=("--tokens", str(tokens))).start()
    http = HttpSpanExporter(endpoint=f"{first.http_url}/v1/traces", headers={"Authorization": f"Bearer {VICTIM}"})
    grpc = GrpcSpanExporter(
        endpoint=first.grpc_target, insecure=True, headers=(("authorization", f"Bearer {ATTACKER}"),)
    )
    loads = {"globex": ExportLoad(http, batches, resend=True), "acme": ExportLoad(grpc, batches, resend=True)}
    for load in loads.values():
        load.start()
    try:
        while sum(load.acked_batches for load in loads.values()) < KILL_AFTER_ACKED_BATCHES:
            assert any(load.is_alive() for load in loads.values()), "the loads finished before the kill"
            time.sleep(0.01)
        first.kill()
        acked_before_kill = {tenant: list(load.acked) for tenant, load in loads.items()}
        second = ServerProcess(
            store, grpc_port=first.grpc_port, http_port=first.http_port, extra_args=("--tokens", str(tokens))
        ).start()
        for load in loads.values():
            load.join(120)
            assert not load.is_alive()
        assert second.terminate() == 0
    finally:
        first.kill()
    every_span = {ids for batch in batches for ids in _span_ids(batch)}
    for tenant, load in loads.items():
        assert load.acked_batches == CRASH_BATCHES, (tenant, load.failed_batches)
        stored = assert_stored_once(store, acked_before_kill[tenant], tenant)
        assert set(stored) == every_span, tenant  # all it sent, resent after the kill, and nothing of the other's
    assert set(stored_span_counts(store)) == every_span


def _span_ids(batch: list[ReadableSpan]) -> list[tuple[str, str]]:
    return [(f"{span.context.trace_id:032x}", f"{span.context.span_id:016x}") for span in batch]  # type: ignore[union-attr]
