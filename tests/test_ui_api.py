"""The UI's JSON API and pages over HTTP (aiohttp's test server on 127.0.0.1) on a real store file: keyset
paging returns every trace once in order, filters combine, bad input is a 400 that says why, the OpenAPI
document covers every endpoint, stored text is escaped on the pages, and a store being reopened is a 503."""

from __future__ import annotations

import socket
import subprocess
import sys
import urllib.request
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from tests.support.grading_traces import AgentRun, fill_store, keywords_config
from tests.support.waiting import wait_until
from tracegrade.evaluation.offline import TraceGrader, TraceSelection
from tracegrade.evaluation.run_records import record_report
from tracegrade.models.dataset import ToolCall
from tracegrade.models.results import CriterionResult, EvalCaseResult, EvalReport
from tracegrade.store import TraceStore
from tracegrade.ui import add_ui_routes, api, pages

HOSTILE = "<script>alert('x')</script> 100%_done"


def _runs() -> list[AgentRun]:
    """25 traces; 5 pairs share a start time (paging must break the tie), every 5th calls 'refund'."""
    runs = []
    for n in range(1, 26):
        tools = [("refund", {"n": n})] if n % 5 == 0 else [("lookup", {"n": n})]
        runs.append(
            AgentRun(
                n,
                HOSTILE if n == 7 else f"question {n}",
                f"answer {n}",
                tools=tools,
                case_id=f"case-{n}" if n % 2 else None,
                start_offset_s=float(n // 2 * 2),  # 2 and 3 start together, 4 and 5, …
                service="billing" if n % 3 == 0 else "support-bot",
            )
        )
    return runs


@pytest.fixture(scope="module")
def store_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("ui-api") / "store.duckdb"
    store = fill_store(path, _runs())
    try:
        for run_id, word in (("run-a", "answer"), ("run-b", "1")):  # B: only answers containing a 1 pass
            report = TraceGrader(store, keywords_config(word)).grade_traces_sync(TraceSelection())
            record_report(store, report, "live", run_id)
    finally:
        store.close()
    return path


@pytest.fixture(scope="module")
def store(store_path: Path) -> Iterator[TraceStore]:
    opened = TraceStore(store_path, read_only=True)
    yield opened
    opened.close()


@pytest.fixture
async def client(store: TraceStore) -> AsyncIterator[TestClient]:
    app = web.Application()
    add_ui_routes(app, lambda _: store)
    async with TestClient(TestServer(app, host="127.0.0.1")) as opened:
        yield opened


async def _json(client: TestClient, path: str, status: int = 200, **kwargs: Any) -> Any:
    response = await client.request(kwargs.pop("method", "GET"), path, **kwargs)
    assert response.status == status, await response.text()
    return await response.json()


async def test_keyset_pages_return_every_trace_once_newest_first(client: TestClient) -> None:
    seen: list[dict[str, Any]] = []
    cursor = None
    while True:
        params = {"limit": "4", **({"cursor": cursor} if cursor else {})}
        page = await _json(client, "/ui/api/traces", params=params)
        seen += page["traces"]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    ids = [t["trace_id"] for t in seen]
    assert len(ids) == 25 and len(set(ids)) == 25
    keys = [(t["start_time"], t["trace_id"]) for t in seen]
    assert keys == sorted(keys, key=lambda k: (-_seconds(k[0]), k[1]))


def _seconds(iso: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(iso).timestamp()


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"tool": "refund"}, {5, 10, 15, 20, 25}),
        ({"tool": "refund", "traffic": "eval"}, {5, 15, 25}),
        ({"traffic": "production", "service": "billing"}, {6, 12, 18, 24}),
        ({"case": "case-9"}, {9}),
        ({"text": "ANSWER 2"}, {2, 20, 21, 22, 23, 24, 25}),
        ({"text": "100%_"}, {7}),  # % and _ are searched for, not wildcards
        ({"text": "0%_"}, {7}),
        ({"text": "1_0"}, set()),
        ({"since": "2026-01-01T00:00:20", "until": "2026-01-01T00:00:24"}, {20, 21, 22, 23}),
        ({"status": "error"}, set()),
        ({"convention": "tracegrade", "status": "ok", "tool": "refund", "text": "question 1"}, {10, 15}),
        ({"convention": "tracegrade", "status": "OK", "tool": "refund", "text": "question 1"}, {10, 15}),
    ],
)
async def test_filters_combine(client: TestClient, params: dict[str, str], expected: set[int]) -> None:
    page = await _json(client, "/ui/api/traces", params={**params, "limit": "200"})
    assert {int(t["trace_id"], 16) for t in page["traces"]} == expected


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("/ui/api/traces?cursor=bogus", "the cursor is not one this server handed out"),
        ("/ui/api/traces?limit=0", "limit must be between 1 and 200"),
        ("/ui/api/traces?limit=ten", "limit must be a whole number"),
        ("/ui/api/traces?since=yesterday", "cannot read since 'yesterday': use a duration such as 30s"),
        ("/ui/api/traces?until=99999999d", "until '99999999d' is out of range"),
        ("/ui/api/traces?status=failed", "status must be one of 'ok', 'error', 'span_error', not 'failed'"),
        ("/ui/api/traces?traffic=test", "traffic must be 'eval' or 'production'"),
        ("/ui/api/diff?a=run-a", "give both runs"),
        ("/ui/api/sql?q=DROP+TABLE+spans", "DROP statements are not allowed"),
        ("/ui/api/sql?q=SELECT+nope+FROM+traces", "query failed"),
        ("/ui/api/sql?q=SELECT+*+FROM+read_text('/etc/hostname')", "read_text() is not allowed"),
    ],
)
async def test_bad_requests_are_400_and_say_why(client: TestClient, path: str, message: str) -> None:
    assert message in (await _json(client, path, 400))["error"]


async def test_unknown_ids_are_404(client: TestClient) -> None:
    assert "no trace" in (await _json(client, "/ui/api/traces/" + "e" * 32, 404))["error"]
    assert "no span" in (await _json(client, f"/ui/api/traces/{1:032x}/spans/{'0' * 16}", 404))["error"]
    assert "no grading run 'run-z'" in (await _json(client, "/ui/api/runs/run-z", 404))["error"]
    assert "is ambiguous" in (await _json(client, "/ui/api/runs/run-", 400))["error"]  # a bad request, not absent
    page = await client.get("/ui/traces/" + "e" * 32)
    assert page.status == 404 and "no trace" in await page.text()


async def test_trace_span_run_diff_and_sql_endpoints(client: TestClient) -> None:
    detail = await _json(client, f"/ui/api/traces/{5:032x}")
    assert [c["name"] for c in detail["execution"]["tool_calls"]] == ["refund"]
    assert len(detail["spans"]) == 4 and {r["run_id"] for r in detail["runs"]} == {"run-a", "run-b"}
    root = next(s for s in detail["spans"] if s["parent_span_id"] is None)
    span = await _json(client, f"/ui/api/traces/{5:032x}/spans/{root['span_id']}")
    assert span["span"]["attributes"]["tracegrade.case.id"] == "case-5" and span["logs"] == []

    runs = (await _json(client, "/ui/api/runs"))["runs"]
    assert [(r["run_id"], r["total_cases"]) for r in runs] == [("run-b", 25), ("run-a", 25)]
    low, high = runs[0]["pass_rate_interval"]
    assert low < runs[0]["pass_rate"] < high
    report = (await _json(client, "/ui/api/runs/run-b"))["report"]
    statuses = [not r["passed"] for r in report["results"]]
    assert statuses == sorted(statuses, reverse=True)  # failing cases first
    failing = await _json(client, "/ui/api/runs/run-b/failing")
    assert len(failing["cases"]) == 25 - 12  # answers 1, 10-19, 21 contain a "1"
    assert failing["cases"][0]["failing_criteria"][0]["details"]["missing"] == ["1"]

    diff = await _json(client, "/ui/api/diff", params={"a": "run-a", "b": "run-b"})
    assert diff["summary"]["regressed"] == 13 and diff["pass_rate"] == {"a": 1.0, "b": 12 / 25}
    assert all(c["diverges_at"] is None for c in diff["cases"])  # same traces: same trajectories

    sql = await _json(client, "/ui/api/sql", method="POST", json={"sql": "SELECT 1 AS a, 1 AS a, '[1]'::JSON AS j"})
    assert sql["columns"] == ["a", "a", "j"] and sql["rows"] == [[1, 1, [1]]] and not sql["truncated"]
    many = await _json(client, "/ui/api/sql", params={"q": "SELECT * FROM range(100000000)"})  # never all fetched
    assert many["row_count"] == len(many["rows"]) == many["max_rows"] == 1000 and many["truncated"]
    tables = (await _json(client, "/ui/api/schema"))["tables"]
    assert {"name": "user_query", "type": "VARCHAR"} in tables["traces"] and "eval_runs" in tables


async def test_the_openapi_document_covers_every_endpoint(client: TestClient) -> None:
    document = await _json(client, "/ui/api/openapi.json")
    served: dict[str, set[str]] = {}
    for route in client.app.router.routes():
        path = route.resource.canonical if route.resource else ""
        if (
            path.startswith("/ui/api/")
            and path not in ("/ui/api/openapi.json", "/ui/api/{rest}")
            and route.method != "HEAD"
        ):
            served.setdefault(path, set()).add(route.method.lower())
    documented = {path: set(methods) for path, methods in document["paths"].items()}
    assert documented == served


async def test_pages_escape_stored_text_and_forbid_inline_script(client: TestClient) -> None:
    for path in ("/ui/", f"/ui/traces/{7:032x}", "/ui/runs/run-a", "/ui/diff?a=run-a&b=run-b"):
        response = await client.get(path)
        body = await response.text()
        assert response.status == 200, body
        assert "<script>alert" not in body and "&lt;script&gt;alert(&#x27;x&#x27;)" in body, path
        assert "script-src 'self'" in response.headers["Content-Security-Policy"]
    rows = await client.get("/ui/", params={"fragment": "rows", "case": "case-7"})
    assert (await rows.text()).count("<tr") == 1  # what the page's polling swaps in
    for name in ("ui.js", "ui.css", "report.css"):
        assert (await client.get(f"/ui/static/{name}")).status == 200
    assert (await client.get("/ui/static/../app.py")).status == 404


async def test_a_diff_given_only_a_compares_it_with_the_next_run_never_with_itself(client: TestClient) -> None:
    older = await (await client.get("/ui/diff", params={"a": "run-a"})).text()
    assert "Pick two runs to compare." not in older and 'class="diff-' in older  # run-a against run-b, after it
    newest = await (await client.get("/ui/diff", params={"a": "run-b"})).text()
    assert "Pick two runs to compare." in newest  # nothing after the newest run: no diff of it with itself


async def test_unknown_ui_paths_get_the_uis_own_404(client: TestClient) -> None:
    page = await client.get("/ui/nonexistent")
    assert page.status == 404 and page.content_type == "text/html"
    assert "no page at /ui/nonexistent" in await page.text() and 'href="/ui/runs"' in await page.text()
    api_reply = await client.get("/ui/api/nonexistent")
    assert api_reply.status == 404 and "no UI API endpoint at /ui/api/nonexistent" in (await api_reply.json())["error"]
    assert (await client.get("/ui/static/nonexistent.css")).status == 404  # still the static route's own answer


async def test_a_store_being_reopened_is_503_on_pages_and_api() -> None:
    class Reopening(Exception):
        http_status = 503

    def provider(tenant: str | None) -> Any:
        raise Reopening("the store is being reopened after a failure; retry shortly")

    app = web.Application()
    add_ui_routes(app, provider)
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        assert "being reopened" in (await _json(client, "/ui/api/traces", 503))["error"]
        page = await client.get("/ui/runs")
        assert page.status == 503 and "being reopened" in await page.text()


async def test_a_runaway_query_from_the_sql_page_is_cancelled(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("tracegrade.ui.app.SQL_TIMEOUT", 0.2)
    cross = "SELECT sum(a.range * b.range) FROM range(1000000) a, range(1000000) b"
    assert "cancelled" in (await _json(client, "/ui/api/sql", 400, params={"q": cross}))["error"]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_tracegrade_ui_serves_a_store_file_and_names_the_server_holding_one(store_path: Path, tmp_path: Path) -> None:
    port = _free_port()
    launch = [sys.executable, "-c", "from tracegrade.cli.main import main; main()", "ui", "--port", str(port)]
    process = subprocess.Popen([*launch, "--store", str(store_path)], stderr=subprocess.PIPE)
    try:

        def answers() -> bool:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2) as response:  # redirected
                    return response.url.endswith("/ui/") and b"question 25" in response.read()
            except OSError:
                return False

        wait_until(answers, "tracegrade ui to serve the traces page", timeout=60)
    finally:
        process.terminate()
        process.wait(30)
    held = tmp_path / "held.duckdb"
    writer = fill_store(held, _runs()[:1])  # this process holds the file read-write
    try:
        result = subprocess.run([*launch, "--store", str(held)], capture_output=True, text=True, timeout=60)
    finally:
        writer.close()
    assert result.returncode == 2 and "stop the process that holds it" in result.stderr


def test_a_diff_names_the_first_step_where_a_case_parts(tmp_path: Path) -> None:
    def run(tools: list[str], visits: list[str]) -> EvalReport:
        calls = [ToolCall(name=t) for t in tools]
        cases = [
            EvalCaseResult(eval_id="refund", passed=True, actual_tool_calls=calls, node_visits=visits),
            EvalCaseResult(eval_id="steady", passed=True, node_visits=["agent"]),
        ]
        return EvalReport.create("support", cases)

    store = fill_store(tmp_path / "diff.duckdb", _runs()[:1])
    try:
        record_report(store, run(["lookup", "refund"], ["agent"]), "live", "before")
        record_report(store, run(["lookup", "escalate", "refund"], ["agent"]), "live", "after")
        record_report(store, run(["lookup", "refund"], ["agent", "review"]), "live", "reviewed")
        by_case = {c["eval_id"]: c for c in api.diff_runs(store, "before", "after")["cases"]}
        reviewed = {c["eval_id"]: c for c in api.diff_runs(store, "before", "reviewed")["cases"]}
    finally:
        store.close()
    assert by_case["refund"]["diverges_at"] == {"kind": "tool call", "step": 1, "a": "refund", "b": "escalate"}
    assert by_case["steady"]["diverges_at"] is None
    assert reviewed["refund"]["diverges_at"] == {"kind": "node visit", "step": 1, "a": None, "b": "review"}


def test_the_diff_page_shows_a_criterion_that_errored_with_its_error_not_a_regression(tmp_path: Path) -> None:
    def run(judge: CriterionResult) -> EvalReport:
        case = EvalCaseResult(eval_id="refund", passed=judge.passed, criterion_results=[judge])
        return EvalReport.create("support", [case, EvalCaseResult(eval_id="steady", passed=True)])

    graded = CriterionResult(criterion="helpful", score=0.9, passed=True, threshold=0.5)
    failed = CriterionResult(criterion="helpful", score=0.0, passed=False, threshold=0.5, error="judge <down>: 500")
    store = fill_store(tmp_path / "diff.duckdb", _runs()[:1])
    try:
        record_report(store, run(graded), "live", "before")
        record_report(store, run(failed), "live", "after")
        page = pages.diff_page(api.list_runs(store), "before", "after", api.diff_runs(store, "before", "after"))
    finally:
        store.close()
    assert '<span class="chip errored">errored</span>' in page
    assert '<li class="errored">helpful: errored in B: judge &lt;down&gt;: 500</li>' in page
    assert "regressed" not in page.split("<table", 1)[1]
