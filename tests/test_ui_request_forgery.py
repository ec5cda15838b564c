"""Other sites cannot drive a browser against a receiver: DNS rebinding, sign-in forgery, forged runs and queries.

Against real ``tracegrade serve`` processes on 127.0.0.1: a request naming another host is refused (421) on a
loopback address; ``/v1/runs`` and the UI's SQL API take JSON bodies only (a cross-site form can send plain text
without the browser asking first). In Debian's Chromium, driven by Playwright, a page of another site (served on
``localhost``, another site than ``127.0.0.1``) neither signs a signed-in browser in with its own token by a form
nor by a link: a link followed from another site asks the user first, and only the user's own press switches.
"""

from __future__ import annotations

import http.client
import http.server
import json
import threading
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.chromium import CHROMIUM_FLAGS
from tests.support.server_otlp import post
from tests.support.server_process import ServerProcess
from tests.support.server_requests import count_spans, exchange, span_json, traces_json, unique_trace_id
from tests.support.tenant_traffic import write_tokens
from tracegrade.ingest.tokens import ui_session
from tracegrade.ui.auth import COOKIE

CHROMIUM = Path("/usr/bin/chromium")
ACME, EVIL = "acme-token-1111", "evil-token-2222"


@pytest.fixture(scope="module")
def open_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A receiver without a token on 127.0.0.1, as ``tracegrade serve`` starts by default."""
    with ServerProcess(tmp_path_factory.mktemp("open") / "store.duckdb") as server:
        yield server


@pytest.fixture(scope="module")
def tenants_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    workdir = tmp_path_factory.mktemp("tenants")
    tokens = write_tokens(workdir / "tokens.yaml", {"acme": [ACME], "evil": [EVIL]})
    with ServerProcess(workdir / "store.duckdb", extra_args=("--tokens", str(tokens))) as server:
        yield server


# --- DNS rebinding ------------------------------------------------------------------------------------------------


def test_on_a_loopback_address_a_request_for_another_host_name_is_refused(open_server: ServerProcess) -> None:
    base, port = open_server.http_url, open_server.http_port
    trace_id = unique_trace_id()
    body = json.dumps(traces_json([span_json(trace_id, 0)])).encode()
    query = json.dumps({"sql": "SELECT count(*) FROM spans"}).encode()
    rebound = f"attacker.example:{port}"
    for method, path, payload in (("GET", "/ui/api/traces", None), ("POST", "/v1/query", query)):
        status, _, answer = exchange(base + path, method, payload, Host=rebound, Content_Type="application/json")
        assert status == 421, (path, status, answer)
        assert "attacker.example" in json.loads(answer)["error"] and "localhost" in json.loads(answer)["error"]
    status, _, _ = exchange(base + "/v1/traces", "POST", body, Host=rebound, Content_Type="application/json")
    assert status == 421
    assert count_spans(base, trace_id) == 0
    for name in (f"localhost:{port}", f"127.0.0.1:{port}"):  # what exporters, the CLI and browsers send
        status, _, _ = exchange(base + "/ui/api/traces", Host=name)
        assert status == 200, name
    assert post(base + "/v1/traces", body, "application/json").status == 200
    assert count_spans(base, trace_id) == 1


# --- bodies another site's form could send ------------------------------------------------------------------------


def test_runs_and_sql_take_json_bodies_only(open_server: ServerProcess) -> None:
    base = open_server.http_url
    count = "SELECT count(*) FROM eval_runs"
    runs_before = json.loads(post(base + "/v1/query", json.dumps({"sql": count}).encode(), "application/json").body)
    forged = json.dumps({"report": {"eval_set_id": "x", "results": []}, "run_id": "forged"}).encode()
    reply = post(base + "/v1/runs", forged, "text/plain")
    assert reply.status == 415 and "application/json" in reply.json()["error"]
    runs_after = json.loads(post(base + "/v1/query", json.dumps({"sql": count}).encode(), "application/json").body)
    assert runs_after["rows"] == runs_before["rows"]
    sql = json.dumps({"sql": "SELECT 1"}).encode()
    reply = post(base + "/ui/api/sql", sql, "text/plain")
    assert reply.status == 400 and "application/json" in reply.json()["error"]
    assert post(base + "/ui/api/sql", sql, "application/json").status == 200


def test_a_sign_in_posted_by_another_site_is_refused_and_one_from_a_client_is_not(
    tenants_server: ServerProcess,
) -> None:
    url = tenants_server.http_url + "/ui/login"
    form = urllib.parse.urlencode({"token": EVIL, "next": "/ui/runs"}).encode()
    kind = "application/x-www-form-urlencoded"
    for foreign in ({"Sec_Fetch_Site": "cross-site"}, {"Sec_Fetch_Site": "same-site"}, {"Origin": "http://evil.test"}):
        status, headers, _ = exchange(url, "POST", form, Content_Type=kind, **foreign)
        assert status == 403 and "Set-Cookie" not in headers, foreign
    status, headers, _ = exchange(url, "POST", form, Content_Type=kind, Sec_Fetch_Site="same-origin")
    assert status == 303 and ui_session(EVIL) in headers["Set-Cookie"]
    status, headers, _ = exchange(url, "POST", form, Content_Type=kind)  # a script or curl: no browser to misuse
    assert status == 303 and ui_session(EVIL) in headers["Set-Cookie"]


def test_a_sign_out_posted_by_another_site_is_refused(tenants_server: ServerProcess) -> None:
    url = tenants_server.http_url + "/ui/logout"
    cookie = f"{COOKIE}={ui_session(ACME)}"
    for foreign in ({"Sec_Fetch_Site": "cross-site"}, {"Origin": "http://evil.test"}):
        status, headers, answer = exchange(url, "POST", b"", Cookie=cookie, **foreign)
        assert status == 403 and "Set-Cookie" not in headers and b"another site" in answer, foreign
    status, headers, _ = exchange(url, "POST", b"", Cookie=cookie, Sec_Fetch_Site="same-origin")
    assert status == 303 and headers["Location"] == "/ui/login"
    assert headers["Set-Cookie"].startswith(f'{COOKIE}=""') and "Max-Age=0" in headers["Set-Cookie"]
    status, _, _ = exchange(url, "GET")  # signing out changes state: never by a link
    assert status == 405


# --- in a real browser --------------------------------------------------------------------------------------------


class _AttackerSite:
    """Pages of another site (``localhost`` on a port of its own) that send the browser to the receiver."""

    def __init__(self, root: Path, target: str) -> None:
        login = f"{target}/ui/login"
        (root / "form.html").write_text(
            f'<form id="f" method="post" action="{login}"><input name="token" value="{EVIL}">'
            '<input name="next" value="/ui/runs"></form><script>document.getElementById("f").submit()</script>',
            encoding="utf-8",
        )
        (root / "link.html").write_text(
            f'<script>location = "{target}/ui/runs?token={EVIL}"</script>', encoding="utf-8"
        )
        handler = lambda *args: http.server.SimpleHTTPRequestHandler(*args, directory=str(root))  # noqa: E731
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.base = f"http://localhost:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def browser_context(tenants_server: ServerProcess, tmp_path: Path) -> Iterator[tuple[Any, _AttackerSite]]:
    """A browser signed in as acme (its page is ``context.pages[0]``), and the attacker's site."""
    if not CHROMIUM.exists():
        pytest.skip("needs Debian's chromium (apt-get install chromium)")
    playwright_api = pytest.importorskip("playwright.sync_api")
    site = _AttackerSite(tmp_path, tenants_server.http_url)
    with playwright_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_FLAGS, headless=True)
        context = browser.new_context()
        page = context.new_page()
        page.set_default_timeout(15_000)
        page.goto(f"{tenants_server.http_url}/ui/runs?token={ACME}")  # signed in, as acme
        assert _ui_token(context) == ui_session(ACME)
        try:
            yield context, site
        finally:
            browser.close()
            site.close()


def _ui_token(context: Any) -> str:
    (cookie,) = [c for c in context.cookies() if c["name"] == COOKIE]
    return str(cookie["value"])


@pytest.mark.slow
def test_another_sites_form_does_not_sign_the_browser_in_with_its_token(
    tenants_server: ServerProcess, browser_context: tuple[Any, _AttackerSite]
) -> None:
    context, site = browser_context
    page = context.pages[0]
    response = page.goto(site.base + "/form.html")
    page.wait_for_url(f"{tenants_server.http_url}/ui/login")
    assert page.locator(".warn-inline").inner_text().startswith("Sign in from this server's own page")
    assert response is not None and _ui_token(context) == ui_session(ACME)


@pytest.mark.slow
def test_a_link_from_another_site_asks_before_it_switches(
    tenants_server: ServerProcess, browser_context: tuple[Any, _AttackerSite]
) -> None:
    context, site = browser_context
    page = context.pages[0]
    page.goto(site.base + "/link.html")
    page.wait_for_url(f"{tenants_server.http_url}/ui/runs?token={EVIL}")
    assert "followed from another site" in page.locator(".warn-inline").inner_text()
    assert _ui_token(context) == ui_session(ACME)  # nothing switched by the link alone
    page.click("form.login button")  # the user's own choice
    page.wait_for_url(f"{tenants_server.http_url}/ui/runs")
    assert _ui_token(context) == ui_session(EVIL)
