"""Web UI and query-answer defects a QA pass left open, each checked through a real ``tracegrade serve`` and, where
the defect showed in the browser, Debian's headless Chromium driven by Playwright.

NaN and the infinities come back from ``/v1/query``, the SQL API and the SQL page as "NaN", "Infinity" and
"-Infinity" (valid JSON; RemoteStore gives floats back), an address over 8 KB opens its page, the diff page's
error keeps the run pickers, a clicked long span name keeps its row's indentation, and the sign-in page tells a
browser user where the token comes from.
"""

from __future__ import annotations

import json
import math
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.chromium import CHROMIUM_FLAGS
from tests.support.grading_traces import AgentRun, fill_store, keywords_config
from tests.support.server_process import ServerProcess
from tracegrade.evaluation.offline import TraceGrader, TraceSelection
from tracegrade.evaluation.run_records import record_report
from tracegrade.models.span import SpanRecord
from tracegrade.store import RemoteStore

CHROMIUM = Path("/usr/bin/chromium")
TOKEN = "ui-fixes-token-41d7"
NESTED = "cd" * 16  # a trace of five spans, each the child of the one before, two of them with long names
LONG_NAME = "verylongspanname_" * 40
NON_FINITE = "SELECT 'nan'::DOUBLE AS n, 'inf'::DOUBLE AS p, '-inf'::FLOAT AS m, 1.5 AS f, ['nan'::DOUBLE, 2.0] AS l"

try:
    from playwright import sync_api as playwright_api
except ImportError:  # pragma: no cover
    playwright_api = None
in_browser = pytest.mark.skipif(
    playwright_api is None or not CHROMIUM.exists(), reason="needs Playwright and Debian's chromium"
)


def _nested_spans() -> list[SpanRecord]:
    base, parent, spans = 1_700_000_000_000_000_000, None, []
    for depth in range(5):
        span_id = f"{depth + 1:016x}"
        name = f"step{depth} " + (LONG_NAME if depth in (2, 3) else "short")
        spans.append(
            SpanRecord(
                trace_id=NESTED,
                span_id=span_id,
                name=name,
                start_ns=base + depth * 1000,
                end_ns=base + 1_000_000,
                parent_span_id=parent,
                attributes={},
                resource={"service.name": "nested"},
            )
        )
        parent = span_id
    return spans


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, list[str]]]:
    """An open receiver over a store of three graded traces (two recorded runs) and the nested trace."""
    path = tmp_path_factory.mktemp("ui-fixes") / "store.duckdb"
    store = fill_store(path, [AgentRun(n, f"question {n}", f"answer {n}") for n in (1, 2, 3)])
    try:
        written = store.write(_nested_spans())
        store.rebuild_trajectories(sorted(written.trace_ids))
        graded = TraceSelection(trace_ids=[AgentRun(n, "", "").trace_id for n in (1, 2, 3)])
        runs = ["run-a", "run-b"]
        for run_id, word in zip(runs, ("answer", "1")):
            record_report(store, TraceGrader(store, keywords_config(word)).grade_traces_sync(graded), "live", run_id)
    finally:
        store.close()
    with ServerProcess(path) as server:
        yield server, runs


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with ServerProcess(tmp_path_factory.mktemp("ui-fixes-token") / "store.duckdb", extra_args=("--token", TOKEN)) as s:
        yield s


@pytest.fixture(scope="module")
def browser(served: tuple[ServerProcess, list[str]], guarded: ServerProcess) -> Iterator[Any]:
    # servers before the browser: Playwright's sync API keeps an event loop running, and grading needs none
    with playwright_api.sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_FLAGS, headless=True)
        yield instance
        instance.close()


def _page(browser: Any) -> Any:
    page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
    page.set_default_timeout(20_000)
    return page


def _fetch(url: str, body: dict[str, Any] | None = None) -> tuple[int, str]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _strict_json(text: str) -> Any:
    """``text`` parsed as JSON proper: a bare NaN or Infinity (Python's json.dumps default) is refused."""

    def refuse(constant: str) -> Any:
        raise ValueError(f"not JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


# --- 6. NaN and the infinities -------------------------------------------------------------------------


def test_nan_and_infinities_come_back_as_strings_in_valid_json(served: tuple[ServerProcess, list[str]]) -> None:
    url = served[0].http_url
    expected = ["NaN", "Infinity", "-Infinity", 1.5, ["NaN", 2.0]]
    status, text = _fetch(url + "/v1/query", {"sql": NON_FINITE})
    assert status == 200 and _strict_json(text)["rows"] == [expected], text
    status, text = _fetch(url + "/ui/api/sql", {"sql": NON_FINITE})
    assert status == 200 and _strict_json(text)["rows"] == [expected], text
    [row] = RemoteStore(url).query(NON_FINITE).rows  # a remote reader gets floats back, as a local file gives
    assert math.isnan(row[0]) and row[1] == math.inf and row[2] == -math.inf and row[3] == 1.5
    assert math.isnan(row[4][0]) and row[4][1] == 2.0
    status, text = _fetch(url + "/ui/api/openapi.json")
    assert '"NaN", "Infinity" and "-Infinity"' in json.loads(text)["info"]["description"]


@pytest.mark.slow
@in_browser
def test_the_sql_page_shows_nan_and_infinities(served: tuple[ServerProcess, list[str]], browser: Any) -> None:
    page = _page(browser)
    page.goto(served[0].http_url + "/ui/sql")
    page.fill("#sql-text", NON_FINITE)
    page.click("#sql-form button")
    page.locator("#sql-result table").wait_for()
    cells = page.locator("#sql-result tbody td").all_inner_texts()
    assert cells == ["NaN", "Infinity", "-Infinity", "1.5", '["NaN",2]'], cells


# --- 8. a long address ---------------------------------------------------------------------------------


def test_an_address_over_8_kb_opens_its_page(served: tuple[ServerProcess, list[str]]) -> None:
    url = served[0].http_url
    query = "SELECT 1 AS x -- " + "y" * 12_000
    status, text = _fetch(f"{url}/ui/sql?q={urllib.request.quote(query)}")
    assert status == 200 and "y" * 12_000 in text and "Got more than" not in text
    status, text = _fetch(f"{url}/ui/?text={'z' * 10_000}")
    assert status == 200 and "z" * 10_000 in text
    status, _ = _fetch(url + "/v1/traces", {"resourceSpans": []})  # OTLP/HTTP as before
    assert status == 200


# --- 9. the diff page's error --------------------------------------------------------------------------


@pytest.mark.slow
@in_browser
def test_the_diff_pages_error_keeps_the_run_pickers(served: tuple[ServerProcess, list[str]], browser: Any) -> None:
    server, (run_a, run_b) = served
    page = _page(browser)
    response = page.goto(f"{server.http_url}/ui/diff?a=no-such-run&b={run_b}")
    assert response.status == 404
    assert "no-such-run" in page.inner_text("pre.error-message")
    page.select_option("#diff-form select[name=a]", run_a)
    page.select_option("#diff-form select[name=b]", run_b)
    page.click("#diff-form button")
    page.wait_for_url(f"**/ui/diff?a={run_a}&b={run_b}")
    assert page.locator("table.diff").count() == 1 and page.locator("pre.error-message").count() == 0


# --- 10. the waterfall's indentation -------------------------------------------------------------------

_LEFTS = (
    "Array.from(document.querySelectorAll('table.waterfall td.wf-name button'))"
    ".map(b => Math.round(b.getBoundingClientRect().left))"
)


@pytest.mark.slow
@in_browser
def test_a_clicked_long_span_name_keeps_its_rows_indentation(
    served: tuple[ServerProcess, list[str]], browser: Any
) -> None:
    page = _page(browser)
    page.goto(f"{served[0].http_url}/ui/traces/{NESTED}")
    before = page.evaluate(_LEFTS)
    assert before == sorted(before) and len(set(before)) == 5  # each level further in
    for row in (3, 2):  # the long names
        page.locator("table.waterfall [data-span]").nth(row).click()
        page.locator("#raw-span", has_text="verylongspanname").wait_for()
        assert page.evaluate(_LEFTS) == before
        scrolled = page.locator("table.waterfall td.wf-name").nth(row).evaluate("td => td.scrollLeft")
        assert scrolled == 0


# --- 11. the sign-in page ------------------------------------------------------------------------------


@pytest.mark.slow
@in_browser
def test_the_sign_in_page_speaks_to_a_browser_user(guarded: ServerProcess, browser: Any) -> None:
    page = _page(browser)
    assert page.goto(guarded.http_url + "/ui/runs").status == 401
    text = page.inner_text("main")
    assert "Paste the token you were given" in text and "whoever runs the server" in text, text
    for cli_words in ("bearer", "Authorization", "header", "serve --token"):
        assert cli_words not in text, cli_words
    page.fill("input[name=token]", "not-the-token")
    page.click("form.login button")
    text = page.inner_text("main")
    assert "This server does not accept that token" in text and "bearer" not in text, text
    page.fill("input[name=token]", TOKEN)
    page.click("form.login button")
    page.wait_for_url(guarded.http_url + "/ui/runs")
