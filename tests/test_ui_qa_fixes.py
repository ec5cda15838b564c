"""Defects a QA pass found in the web UI, each checked through ``tracegrade serve`` and, where the defect was in
the browser, Debian's headless Chromium driven by Playwright.

A forged cursor is a 400 (not a 500 with SQL in it); the live trace list's "Older ›" continues from the last row
shown; integers beyond 2**53 keep every digit on the page; headers and ids do not break mid-word at desktop width;
a phone-width screen gets usable tables and SQL page; selects are reachable by keyboard; a long SQL query stays out
of the address, so a reload works.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from tests.support.chromium import CHROMIUM_FLAGS
from tests.support.server_otlp import get_text
from tests.support.server_process import ServerProcess
from tests.support.waiting import wait_for_value
from tracegrade.store import RemoteStore
from tracegrade.ui import api

CHROMIUM = Path("/usr/bin/chromium")
FORGED = base64.urlsafe_b64encode(b'["x","y"]').decode()  # well-formed, but "x" is no timestamp
CURSOR_MESSAGE = "the cursor is not one this server handed out"


def _send(url: str, service: str, questions: list[str]) -> None:
    """One GenAI-convention trace per question (agent -> chat), in this order, over OTLP/HTTP."""
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=url + "/v1/traces")))
    tracer = provider.get_tracer("ui-qa")
    for question in questions:
        with tracer.start_as_current_span("invoke_agent bot", attributes={"gen_ai.operation.name": "invoke_agent"}):
            chat = {
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": "m",
                "gen_ai.input.messages": json.dumps(
                    [{"role": "user", "parts": [{"type": "text", "content": question}]}]
                ),
                "gen_ai.output.messages": json.dumps(
                    [{"role": "assistant", "parts": [{"type": "text", "content": "answer to " + question}]}]
                ),
            }
            with tracer.start_as_current_span("chat m", attributes=chat):
                pass
    provider.shutdown()


def _stored(server: ServerProcess, service: str, count: int) -> None:
    remote = RemoteStore(server.http_url)
    sql = "SELECT count(*) FROM traces WHERE service_name = ? AND user_query IS NOT NULL"
    wait_for_value(lambda: remote.query(sql, [service]).rows, [(count,)], f"{count} {service} traces mapped")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """An open receiver (no token) holding three traces of the service 'shop'."""
    with ServerProcess(tmp_path_factory.mktemp("ui-qa") / "store.duckdb") as process:
        _send(process.http_url, "shop", ["query shop 0", "query shop 1", "query shop 2"])
        _stored(process, "shop", 3)
        yield process


# --- 1. a forged cursor ----------------------------------------------------------------------------------


def _cursor(*items: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(list(items)).encode()).decode()


@pytest.mark.parametrize(
    "cursor",
    [
        FORGED,
        _cursor("2026-13-45 00:00:00", "ab"),  # no such day
        _cursor("2026-01-01 00:00:00+05:00", "ab"),  # the server's cursors carry no offset
        _cursor("2026-01-01", "ab", "extra"),
        base64.urlsafe_b64encode(b'{"a": 1, "b": 2}').decode(),
    ],
)
def test_a_forged_cursor_is_a_400_that_says_start_again(server: ServerProcess, cursor: str) -> None:
    status, body = get_text(f"{server.http_url}/ui/api/traces?cursor={cursor}")
    assert status == 400 and CURSOR_MESSAGE in json.loads(body)["error"], body
    status, body = get_text(f"{server.http_url}/ui/?cursor={cursor}")
    assert status == 400 and CURSOR_MESSAGE in body and "SELECT" not in body, body
    with pytest.raises(api.BadRequest, match=CURSOR_MESSAGE):  # what MCP's list_traces calls
        api.list_traces(RemoteStore(server.http_url), api.TraceFilters(), 20, cursor)


def test_a_cursor_the_server_gave_out_still_pages(server: ServerProcess) -> None:
    first = json.loads(get_text(f"{server.http_url}/ui/api/traces?service=shop&limit=2")[1])
    status, body = get_text(f"{server.http_url}/ui/api/traces?service=shop&limit=2&cursor={first['next_cursor']}")
    assert status == 200 and [t["user_query"] for t in json.loads(body)["traces"]] == ["query shop 0"]


# --- in the browser --------------------------------------------------------------------------------------

try:
    from playwright import sync_api as playwright_api
except ImportError:  # pragma: no cover
    playwright_api = None
in_browser = pytest.mark.skipif(
    playwright_api is None or not CHROMIUM.exists(), reason="needs Playwright and Debian's chromium"
)


@pytest.fixture(scope="module")
def browser(server: ServerProcess) -> Iterator[Any]:
    with playwright_api.sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_FLAGS, headless=True)
        yield instance
        instance.close()


def _page(browser: Any, width: int = 1280) -> Any:
    page = browser.new_context(viewport={"width": width, "height": 900}).new_page()
    page.set_default_timeout(20_000)
    return page


def _texts(page: Any) -> list[str]:
    return [t.split("\n")[0] for t in page.locator("#trace-rows tr[data-trace] td:last-child").all_inner_texts()]


@pytest.mark.slow
@in_browser
def test_older_continues_from_the_last_row_the_live_page_shows(server: ServerProcess, browser: Any) -> None:
    _send(server.http_url, "paging", [f"query old {n}" for n in range(6)])
    _send(server.http_url, "few", [f"query few {n}" for n in range(3)])
    _stored(server, "paging", 6)
    _stored(server, "few", 3)
    page, few = _page(browser), _page(browser)
    page.goto(server.http_url + "/ui/?limit=3&service=paging")
    few.goto(server.http_url + "/ui/?limit=3&service=few")
    assert _texts(page) == ["query old 5", "query old 4", "query old 3"]
    assert (
        few.locator("#trace-rows tr[data-trace]").count() == 3 and not few.locator("a[data-older]").first.is_visible()
    )
    _send(server.http_url, "paging", ["query new 0", "query new 1"])
    _send(server.http_url, "few", ["query few 3"])
    _stored(server, "paging", 8)
    _stored(server, "few", 4)
    page.locator("#trace-rows tr", has_text="query new 0").wait_for()  # the 5-second refresh brought them in
    few.locator("#trace-rows tr", has_text="query few 3").wait_for()
    assert _texts(page) == ["query new 1", "query new 0", "query old 5"]
    page.locator("a[data-older]").first.click()
    page.wait_for_url("**cursor=*")
    assert _texts(page) == ["query old 4", "query old 3", "query old 2"]  # nothing skipped
    few.locator("a[data-older]").first.click()  # a page that had no older traces has them now
    few.wait_for_url("**cursor=*")
    assert _texts(few) == ["query few 0"]


# --- 3. integers beyond 2**53 ----------------------------------------------------------------------------


@pytest.mark.slow
@in_browser
def test_big_integers_keep_every_digit_and_the_raw_panel_works_by_keyboard(server: ServerProcess, browser: Any) -> None:
    page = _page(browser)
    page.goto(server.http_url + "/ui/?service=shop")
    page.locator("#trace-rows a").first.click()
    page.wait_for_url("**/ui/traces/*")
    trace_id = page.url.rsplit("/", 1)[1]
    button = page.locator("table.waterfall [data-span]").first
    span_id = button.get_attribute("data-span")
    stored = json.loads(get_text(f"{server.http_url}/ui/api/traces/{trace_id}/spans/{span_id}")[1])["span"]
    assert stored["start_ns"] > 2**53
    button.click()
    page.locator("#raw-span", has_text="start_ns").wait_for()
    shown = page.inner_text("#raw-span")
    assert f'"start_ns": {stored["start_ns"]},' in shown and f'"end_ns": {stored["end_ns"]},' in shown

    # the panel takes the focus, Escape closes it and gives the focus back to what opened it
    assert page.evaluate("document.activeElement.hasAttribute('data-close')")
    page.keyboard.press("Escape")
    assert page.locator("#raw-panel").is_hidden()
    assert page.evaluate("document.activeElement.getAttribute('data-span')") == span_id

    page.goto(server.http_url + "/ui/sql")
    big = [2**53 + 1, -(2**63), 2**127 - 1]
    page.fill("#sql-text", f"SELECT {big[0]}::BIGINT AS a, ({big[1]})::BIGINT AS b, {big[2]}::HUGEINT AS c, 1.5 AS d")
    page.click("#sql-form button")
    page.locator("#sql-result table").wait_for()
    cells = page.locator("#sql-result tbody td").all_inner_texts()
    assert cells == [str(n) for n in big] + ["1.5"]


# --- 4 and 5. layout at 1280 px and at 375 px ------------------------------------------------------------

_LINES = """els => els.map(el => {
  const range = document.createRange();
  range.selectNodeContents(el);
  return [el.textContent.trim(), new Set([...range.getClientRects()].map(r => Math.round(r.top))).size];
})"""


def _broken(page: Any, selector: str) -> list[Any]:
    """The elements matching ``selector`` whose text takes more than one line."""
    return [(text, lines) for text, lines in page.locator(selector).evaluate_all(_LINES) if lines > 1]


def _shoot(page: Any, name: str, tmp_path: Path) -> None:
    shots = tmp_path.parent / "ui-qa-screenshots"
    shots.mkdir(exist_ok=True)
    page.screenshot(path=str(shots / f"{name}.png"), full_page=False)


@pytest.mark.slow
@in_browser
def test_headers_ids_and_dates_do_not_break_mid_word(server: ServerProcess, browser: Any, tmp_path: Path) -> None:
    long_query = "tell me everything " * 30 + "x" * 400  # a long word in the free text still wraps
    _send(server.http_url, "wide", [long_query])
    _stored(server, "wide", 1)
    page = _page(browser, 1280)
    page.goto(server.http_url + "/ui/")
    _shoot(page, "traces_1280", tmp_path)
    assert _broken(page, "table.grid th") == []
    assert _broken(page, "#trace-rows a.mono") == []
    assert _broken(page, "#trace-rows td:nth-child(2)") == []  # the start time
    assert page.evaluate("document.documentElement.scrollWidth") <= 1280
    page.goto(server.http_url + "/ui/runs")
    assert _broken(page, "table.grid th") == []


@pytest.mark.slow
@in_browser
def test_a_phone_width_screen_scrolls_tables_and_stacks_the_sql_page(
    server: ServerProcess, browser: Any, tmp_path: Path
) -> None:
    page = _page(browser, 375)
    page.goto(server.http_url + "/ui/")
    _shoot(page, "traces_375", tmp_path)
    assert page.evaluate("document.documentElement.scrollWidth") <= 375  # the page itself does not scroll sideways
    assert _broken(page, "table.grid th") == [] and _broken(page, "#trace-rows a.mono") == []
    box = page.locator("table.grid").evaluate("t => [t.parentElement.scrollWidth, t.parentElement.clientWidth]")
    assert box[0] > box[1]  # the table scrolls inside its container instead
    page.locator("#trace-rows a").first.click()
    page.wait_for_url("**/ui/traces/*")
    _shoot(page, "trace_375", tmp_path)
    assert page.evaluate("document.documentElement.scrollWidth") <= 375
    page.goto(server.http_url + "/ui/sql")
    _shoot(page, "sql_375", tmp_path)
    assert page.locator("#sql-text").evaluate("t => t.clientWidth") > 250
    assert page.evaluate("document.documentElement.scrollWidth") <= 375
    page.click("#sql-form button")
    page.locator("#sql-result table").wait_for()
    assert page.locator("#sql-form button").is_visible()


# --- 6. keyboard ------------------------------------------------------------------------------------------


@pytest.mark.slow
@in_browser
def test_arrow_keys_move_through_a_filter_select_without_reloading(server: ServerProcess, browser: Any) -> None:
    page = _page(browser)
    page.goto(server.http_url + "/ui/")
    page.focus("select[name=status]")
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowDown")
    page.wait_for_timeout(500)  # a submit would have navigated by now
    assert page.url == server.http_url + "/ui/"
    assert page.evaluate("document.activeElement.name") == "status"
    assert page.locator("select[name=status]").input_value() == "error"
    page.keyboard.press("Enter")  # an explicit action applies it
    page.wait_for_url("**status=error*")
    page.goto(server.http_url + "/ui/diff")
    page.focus("select[name=a]")
    page.keyboard.press("ArrowDown")
    page.wait_for_timeout(500)
    assert page.url == server.http_url + "/ui/diff"
    assert page.evaluate("document.activeElement.name") == "a"


# --- 7. a long SQL query and the address bar -------------------------------------------------------------


@pytest.mark.slow
@in_browser
def test_a_long_query_stays_out_of_the_address_so_a_reload_works(server: ServerProcess, browser: Any) -> None:
    page = _page(browser)
    page.goto(server.http_url + "/ui/sql")
    page.fill("#sql-text", "SELECT 1 AS x")
    page.click("#sql-form button")
    page.locator("#sql-result table").wait_for()
    assert page.url.endswith("/ui/sql?q=SELECT%201%20AS%20x")  # a short one can be bookmarked
    page.fill("#sql-text", "SELECT 2 AS x -- " + "y" * 12_000)
    page.click("#sql-form button")
    page.locator("#sql-result td", has_text="2").wait_for()
    assert len(page.url) < 2_100
    assert page.reload().status == 200
