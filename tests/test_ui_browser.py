"""The web UI in a real browser: Debian's Chromium, headless, driven by Playwright, against ``tracegrade serve``
with a token, filled by the OpenTelemetry SDK's OTLP/HTTP exporter and graded by the real TraceGrader.

Each page is loaded and used (filter traces, watch a new trace arrive, open a trace, expand a tool call,
open the raw span, open a failing case, switch a diff, run SQL); what is on screen is checked, the console
must stay free of errors, and a screenshot of each page lands in the test's temporary directory. The token
rules are checked too: no cookie -> 401 and a sign-in page, wrong token refused, right token (form or link)
-> an HttpOnly, SameSite=Strict cookie that works; the JSON API takes the bearer header.
"""

from __future__ import annotations

import json
import shutil
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import Status, StatusCode

from tests.support.chromium import CHROMIUM_FLAGS
from tests.support.grading_traces import keywords_config
from tests.support.server_process import ServerProcess
from tests.support.waiting import wait_for_value
from tracegrade.cli.grading_store import GradingStore
from tracegrade.evaluation.offline import TraceGrader, TraceSelection
from tracegrade.store import RemoteStore

CHROMIUM = Path("/usr/bin/chromium")
playwright_api = pytest.importorskip("playwright.sync_api")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium (apt-get install chromium)"),
]

TOKEN = "ui-test-token-5f2c"
# (question, answer, tool, tool fails, content captured, eval case id)
TURNS = [
    ("Where is my order 41?", "Order 41 shipped yesterday.", "lookup_order", False, True, "order-status"),
    ("Cancel order 42", "Sorry, I could not reach the order system.", "cancel_order", True, True, "cancel"),
    ("What is the refund policy?", "Refunds take 5 days; your order shipped.", "search_policy", False, True, None),
    ("Private question", None, "lookup_account", False, False, None),
]


def _message(role: str, text: str) -> str:
    return json.dumps([{"role": role, "parts": [{"type": "text", "content": text}]}])


def export_turns(http_url: str, turns: list[tuple[Any, ...]], service: str = "support-bot") -> None:
    """One GenAI-convention trace per turn: agent -> chat -> tool -> chat, over OTLP/HTTP with the token."""
    exporter = OTLPSpanExporter(endpoint=http_url + "/v1/traces", headers={"Authorization": f"Bearer {TOKEN}"})
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("ui-test")
    for question, answer, tool, fails, captured, case in turns:
        root: dict[str, Any] = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"}
        turn = ExitStack()
        if case:  # eval traffic: the turn span AgentEvaluator puts around the agent, with its tags
            tags = {"tracegrade.case.id": case, "tracegrade.eval_set.id": "support", "tracegrade.run.id": "live-1"}
            outer = turn.enter_context(tracer.start_as_current_span(f"tracegrade.turn {case}", attributes=tags))
            if fails:
                outer.set_status(Status(StatusCode.ERROR, "the agent failed"))
        chat = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "gpt-4o-mini",
            "gen_ai.provider.name": "openai",
            "gen_ai.usage.input_tokens": 120,
            "gen_ai.usage.output_tokens": 18,
        }
        with tracer.start_as_current_span("invoke_agent support", attributes=root) as agent:
            if fails:  # the agent gives up: its run fails along with the tool
                agent.set_status(Status(StatusCode.ERROR, "cancel_order failed"))
            first = dict(chat)
            if captured:
                first["gen_ai.input.messages"] = _message("user", question)
            with tracer.start_as_current_span("chat gpt-4o-mini", attributes=first):
                pass
            call = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool, "gen_ai.tool.call.id": "c1"}
            if captured:
                call["gen_ai.tool.call.arguments"] = json.dumps({"order": question.split()[-1]})
                if not fails:
                    call["gen_ai.tool.call.result"] = json.dumps({"status": "shipped"})
            with tracer.start_as_current_span(f"execute_tool {tool}", attributes=call) as span:
                if fails:
                    span.record_exception(ConnectionError("order system unreachable"))
                    span.set_status(Status(StatusCode.ERROR, "order system unreachable"))
            last = dict(chat)
            if captured:
                last["gen_ai.input.messages"] = _message("user", question)
                last["gen_ai.output.messages"] = _message("assistant", answer)
            with tracer.start_as_current_span("chat gpt-4o-mini", attributes=last):
                pass
        turn.close()
    provider.shutdown()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, list[str]]]:
    """A receiver with a token, four traces from the OTel SDK, and two recorded runs over them."""
    store = tmp_path_factory.mktemp("ui") / "store.duckdb"
    with ServerProcess(store, extra_args=("--token", TOKEN)) as process:
        export_turns(process.http_url, TURNS)
        remote = RemoteStore(process.http_url, TOKEN)
        count = "SELECT count(*) FROM traces"
        wait_for_value(lambda: remote.query(count).rows, [(len(TURNS),)], "every trace mapped")
        recorder = GradingStore(reader=remote, sink=None, remote_url=process.http_url, token=TOKEN)
        # run A wants "order", run B wants "shipped": the refund answer passes both, the cancel answer
        # regresses (it mentions no shipping), and the uncaptured one fails both
        run_ids = [
            recorder.record(
                TraceGrader(remote, keywords_config(word)).grade_traces_sync(TraceSelection()), "reference_free"
            )
            for word in ("order", "shipped")
        ]
        yield process, run_ids


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with playwright_api.sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_FLAGS, headless=True)
        yield instance
        instance.close()


class Tab:
    """One browser context (its own cookies) and page, collecting console errors and uncaught exceptions."""

    def __init__(self, browser: Any, base: str, shots: Path) -> None:
        self.context = browser.new_context(viewport={"width": 1366, "height": 900})
        self.page = self.context.new_page()
        self.page.set_default_timeout(15_000)
        self.base, self.shots, self.errors = base, shots, []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))

    def goto(self, path: str) -> Any:
        return self.page.goto(self.base + path)

    def shot(self, name: str) -> Path:
        path = self.shots / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        return path

    def sign_in(self) -> None:
        self.goto(f"/ui/?token={TOKEN}")  # a link with the token (the form is tested on its own)
        assert self.page.url == self.base + "/ui/"

    def close(self) -> None:
        self.context.close()


@pytest.fixture
def tab(server: tuple[ServerProcess, list[str]], browser: Any, tmp_path: Path) -> Iterator[Tab]:
    # server before browser: Playwright's sync API keeps an event loop running, and grading (asyncio.run) needs none
    opened = Tab(browser, server[0].http_url, tmp_path)
    yield opened
    opened.close()
    shots = Path(str(tmp_path)).parent / "ui-screenshots"  # one place to find every page's screenshot
    shots.mkdir(exist_ok=True)
    for png in tmp_path.glob("*.png"):
        shutil.copy(png, shots / png.name)
    assert opened.errors == [], f"console errors: {opened.errors}"


def _status(url: str, headers: dict[str, str] | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


# --- token rules ---------------------------------------------------------------------------------------


def test_without_the_token_the_api_says_401_and_pages_ask_for_it(server: tuple[ServerProcess, list[str]]) -> None:
    base = server[0].http_url
    status, body = _status(base + "/ui/api/traces")
    assert status == 401 and "bearer token" in json.loads(body)["error"]
    status, body = _status(base + "/ui/api/traces", {"Authorization": "Bearer wrong"})
    assert status == 401 and json.loads(body)["error"] == "invalid bearer token"
    status, body = _status(base + "/ui/api/traces", {"Authorization": f"Bearer {TOKEN}"})
    assert status == 200 and len(json.loads(body)["traces"]) == len(TURNS)
    status, body = _status(base + "/ui/runs")
    assert status == 401 and 'name="token"' in body
    status, _ = _status(base + "/ui/api/openapi.json")  # the API's description is public; its data is not
    assert status == 200


def test_sign_in_form_and_token_link_set_a_strict_http_only_cookie(tab: Tab) -> None:
    response = tab.goto("/ui/runs")
    assert response.status == 401
    tab.page.fill("input[name=token]", "not-the-token")
    tab.page.click("form.login button")
    assert "This server does not accept that token" in tab.page.inner_text("main")
    tab.errors.clear()  # the browser logs the 401 answers themselves; they are what this test expects
    tab.page.fill("input[name=token]", TOKEN)
    tab.page.click("form.login button")
    tab.page.wait_for_url(tab.base + "/ui/runs")  # back where the visitor was going
    (cookie,) = tab.context.cookies()
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["path"] == "/ui"
    assert tab.page.evaluate("document.cookie") == ""  # scripts cannot read it
    tab.context.clear_cookies()
    tab.goto(f"/ui/sql?token={TOKEN}&q=SELECT+1")
    assert tab.page.url == tab.base + "/ui/sql?q=SELECT+1"  # the token does not stay in the address bar
    assert tab.page.locator("#sql-text").input_value() == "SELECT 1"


def test_sign_out_drops_the_cookie_and_the_pages_ask_for_the_token_again(tab: Tab) -> None:
    tab.goto("/ui/runs")
    assert tab.page.locator("form.sign-out").count() == 0  # not signed in: nothing to sign out of
    tab.errors.clear()  # the 401 above
    tab.sign_in()
    tab.page.click("form.sign-out button")
    tab.page.wait_for_url(tab.base + "/ui/login")
    assert tab.context.cookies() == []
    response = tab.goto("/ui/runs")
    assert response.status == 401 and tab.page.locator("input[name=token]").count() == 1
    tab.errors.clear()  # the 401 again, which is the point


# --- pages ---------------------------------------------------------------------------------------------


def test_traces_page_filters_and_shows_new_traces_as_they_arrive(
    tab: Tab, server: tuple[ServerProcess, list[str]]
) -> None:
    tab.sign_in()
    rows = tab.page.locator("#trace-rows tr[data-trace]")
    assert rows.count() == len(TURNS)
    assert tab.page.locator("#trace-rows .nc").count() >= 2  # the uncaptured turn: query and response unknown
    tab.shot("traces")
    tab.page.select_option("select[name=status]", "error")
    tab.page.click("#trace-filters button[type=submit]")  # applied by the button, not on change (keyboard users)
    tab.page.wait_for_url("**/ui/?*status=error*")
    assert rows.count() == 1 and "Cancel order 42" in rows.first.inner_text()
    tab.goto("/ui/?text=REFUND")
    assert rows.count() == 1 and "refund policy" in rows.first.inner_text()
    tab.goto("/ui/?tool=lookup_order&traffic=eval")
    assert rows.count() == 1 and "order-status" in rows.first.inner_text()
    tab.goto("/ui/")
    export_turns(server[0].http_url, [("Brand new question", "Fresh answer.", "lookup_order", False, True, None)])
    tab.page.wait_for_selector("#trace-rows tr.fresh", timeout=20_000)  # polled in, marked as new
    assert "Brand new question" in tab.page.locator("#trace-rows tr.fresh").inner_text()


def test_trace_page_shows_the_trajectory_tool_calls_and_raw_spans(tab: Tab) -> None:
    tab.sign_in()
    tab.page.locator("#trace-rows tr", has_text="Cancel order 42").locator("a").click()
    tab.page.wait_for_url("**/ui/traces/*")
    main = tab.page.locator("main")
    assert "gpt-4o-mini" in main.inner_text() and "120 in / 18 out tokens" in main.inner_text()
    tool = tab.page.locator("details.step.tool", has_text="cancel_order")
    assert "error" in tool.locator("summary").inner_text()
    tool.locator("summary").click()  # expand the tool call
    assert tool.locator("pre.error-message").is_visible()
    assert '"order": "42"' in tool.locator("pre").first.inner_text()
    assert tab.page.locator("table.waterfall rect.bar.err").count() == 3  # turn, agent and tool failed
    tool.locator("button.raw").click()
    # a locator wait, not wait_for_function: polling a string expression needs eval, which the CSP forbids
    tab.page.locator("#raw-span", has_text="gen_ai.tool.name").wait_for()
    assert "order system unreachable" in tab.page.inner_text("#raw-span")  # the exception event, as stored
    assert "reference_free" in tab.page.locator("table.grid", has_text="run-").last.inner_text()
    tab.shot("trace")
    tab.goto("/ui/?tool=lookup_account")  # its query was not captured: only the tool finds it
    tab.page.locator("#trace-rows a").first.click()
    tab.page.wait_for_url("**/ui/traces/*")
    assert tab.page.locator("section.io .nc").count() == 2  # query and response: "content not captured"
    tab.page.locator("details.step.tool summary").click()
    assert "content not captured" in tab.page.locator("details.step.tool").inner_text()


def test_runs_page_and_a_run_with_its_failing_cases_first(tab: Tab, server: tuple[ServerProcess, list[str]]) -> None:
    run_a, run_b = server[1]
    tab.sign_in()
    tab.goto("/ui/runs")
    table = tab.page.locator("table.grid")
    assert run_a in table.inner_text() and run_b in table.inner_text()
    assert "[" in table.locator("tr", has_text=run_a).inner_text()  # the pass rate's interval
    tab.shot("runs")
    table.locator("a", has_text=run_b).click()
    tab.page.wait_for_url(f"**/ui/runs/{run_b}")
    statuses = tab.page.locator("#case-list details.case").evaluate_all("els => els.map(e => e.dataset.status)")
    assert statuses == sorted(statuses, key=lambda s: s != "fail") and statuses.count("fail") == 2
    assert tab.page.locator("#case-list details.case").first.get_attribute("open") is not None  # as in the report
    cancel = tab.page.locator("#case-list details.case", has_text="Cancel order 42")
    assert cancel.get_attribute("data-status") == "fail"
    assert "contains_keywords" in cancel.inner_text() and "shipped" in cancel.inner_text()  # the missing keyword
    tab.page.locator("#case-list details.case.pass summary").first.click()  # open a passing one too
    tab.shot("run")


def test_diff_page_switches_between_runs(tab: Tab, server: tuple[ServerProcess, list[str]]) -> None:
    run_a, run_b = server[1]
    tab.sign_in()
    tab.goto("/ui/diff")  # defaults: the newest run against the one before it
    assert tab.page.locator("select[name=a]").input_value() == run_a
    assert tab.page.locator("select[name=b]").input_value() == run_b
    regressed = tab.page.locator("tr.diff-regressed")
    assert regressed.count() == 1 and "Cancel order 42" in regressed.inner_text()  # it never mentions shipping
    assert "1.00 → 0.00 (-1.00)" in regressed.inner_text()
    tab.shot("diff")
    tab.page.select_option("select[name=a]", run_b)  # switch: B against itself has nothing to show
    tab.page.click("#diff-form button")
    tab.page.wait_for_url(f"**/ui/diff?a={run_b}*")
    tab.page.select_option("select[name=b]", run_a)
    tab.page.click("#diff-form button")
    tab.page.wait_for_url(f"**/ui/diff?a={run_b}&b={run_a}")
    improved = tab.page.locator("tr.diff-improved")
    assert improved.count() == 1 and "0.00 → 1.00 (+1.00)" in improved.inner_text()


def test_sql_page_runs_a_query_and_shows_refusals(tab: Tab) -> None:
    tab.sign_in()
    tab.goto("/ui/sql")
    assert "tool_calls" in tab.page.inner_text("aside.schema")
    tab.page.fill("#sql-text", "SELECT name, count(*) AS calls FROM tool_calls GROUP BY name ORDER BY name")
    tab.page.press("#sql-text", "Control+Enter")
    tab.page.wait_for_selector("#sql-result table")
    assert "cancel_order" in tab.page.inner_text("#sql-result") and "row" in tab.page.inner_text("#sql-status")
    tab.shot("sql")
    tab.page.fill("#sql-text", "DELETE FROM spans")
    tab.page.click("#sql-form button")
    tab.page.wait_for_selector("#sql-status.error")
    assert "DELETE statements are not allowed" in tab.page.inner_text("#sql-status")
    tab.errors.clear()  # the refused query's 400 answer is logged by the browser, as it should be
    tab.page.click("aside.schema [data-table=traces]")  # a table name fills and runs a query
    tab.page.wait_for_selector("#sql-result table")
    assert "user_query" in tab.page.inner_text("#sql-result thead").lower()
