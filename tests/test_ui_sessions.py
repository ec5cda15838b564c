"""The web UI's sign-in cookie against real receivers: it is not the token, opens the UI and nothing else,
names its tenant on every receiver given the same tokens, and stops working when its token is removed."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from tests.support.server_process import ServerProcess
from tests.support.server_requests import exchange, ui_sign_in
from tests.support.tenant_traffic import sql, write_tokens
from tests.support.waiting import wait_until
from tracegrade.ui.auth import COOKIE

ACME, GLOBEX = "acme-session-token-0001", "globex-session-token-02"


def _sign_in(server: ServerProcess, token: str) -> str:
    """Sign in with the form, as a browser on the server's own page would; the cookie's value."""
    status, cookie, body = ui_sign_in(server.http_url, token, "/ui/runs")
    assert status == 303 and cookie, body
    return cookie


def test_the_cookie_is_not_the_token_and_opens_the_ui_only(tmp_path: Path) -> None:
    tokens = write_tokens(tmp_path / "tokens.yaml", {"acme": [ACME], "globex": [GLOBEX]})
    with ServerProcess(tmp_path / "store.duckdb", extra_args=("--tokens", str(tokens))) as server:
        cookie = _sign_in(server, ACME)
        assert ACME not in cookie and cookie != _sign_in(server, GLOBEX)
        status, _, _ = exchange(server.http_url + "/ui/api/traces", Cookie=f"{COOKIE}={cookie}")
        assert status == 200
        # the cookie's value is no bearer token: the query, runs and OTLP endpoints refuse it
        assert sql(server.http_url, "SELECT 1", cookie).status == 401
        status, _, _ = exchange(
            server.http_url + "/v1/traces",
            "POST",
            b"{}",
            Content_Type="application/json",
            Authorization=f"Bearer {cookie}",
        )
        assert status == 401
        # a made-up cookie opens nothing
        status, _, answer = exchange(server.http_url + "/ui/api/traces", Cookie=f"{COOKIE}=s1.{'0' * 64}")
        assert status == 401 and b"sign in again" in answer


def test_a_cookie_holds_on_every_receiver_with_the_same_tokens_until_its_token_goes(tmp_path: Path) -> None:
    tokens = write_tokens(tmp_path / "tokens.yaml", {"acme": [ACME], "globex": [GLOBEX]})
    args = ("--tokens", str(tokens))
    with (
        ServerProcess(tmp_path / "one.duckdb", extra_args=args) as one,
        ServerProcess(tmp_path / "two.duckdb", extra_args=args) as two,
    ):
        cookie = _sign_in(one, GLOBEX)
        for server in (one, two):  # behind a load balancer, the next request may reach another receiver
            status, _, _ = exchange(server.http_url + "/ui/runs", Cookie=f"{COOKIE}={cookie}")
            assert status == 200
        write_tokens(tokens, {"acme": [ACME], "globex": ["globex-rotated-token-03"]})
        os.kill(one.pid, signal.SIGHUP)
        wait_until(lambda: sql(one.http_url, "SELECT 1", "globex-rotated-token-03").status == 200, "the reload", 30)
        status, _, page = exchange(one.http_url + "/ui/runs", Cookie=f"{COOKIE}={cookie}")
        assert status == 401 and b"sign in again" in page  # the sign-in form, saying why
        status, _, _ = exchange(two.http_url + "/ui/runs", Cookie=f"{COOKIE}={cookie}")
        assert status == 200  # not reloaded yet: still the old tokens
