"""The limit on wrong credentials counts every token the web UI checks, through a real receiver on loopback.

The UI checks a ``?token=`` link's token, and a sign-in form's, whatever ``Authorization`` header comes with
the request. A guesser that kept one wrong header constant and put a new token in the link or the form each
time must not have every try counted as the same repeated guess (which counts once): the limit must refuse
it like any other guesser, and must never answer a right guess while it does. Nor may a sign-in opened
before its address went over the limit have its form, sent after, tried.
"""

from __future__ import annotations

import http.client
import socket
import urllib.parse
from pathlib import Path

from tests.support.server_inprocess import RunningServer, running_server

GOOD = "the-right-token-0123456789"
STALE = {"Authorization": "Bearer the-same-wrong-header-every-time"}
FORM = {"Content-Type": "application/x-www-form-urlencoded", "Sec-Fetch-Site": "same-origin"}


def _request(
    server: RunningServer, method: str, target: str, headers: dict[str, str], body: bytes | None = None
) -> int:
    """The status of one HTTP request to the receiver from 127.0.0.1."""
    port = server.server.http_port
    assert port is not None
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request(method, target, body=body, headers=headers)
        response = connection.getresponse()
        response.read()
        return response.status
    finally:
        connection.close()


def _link(server: RunningServer, token: str, headers: dict[str, str]) -> int:
    return _request(server, "GET", "/ui/?" + urllib.parse.urlencode({"token": token}), headers)


def _sign_in(server: RunningServer, token: str, headers: dict[str, str]) -> int:
    body = urllib.parse.urlencode({"token": token, "next": "/ui/"}).encode()
    return _request(server, "POST", "/ui/login", {**FORM, **headers}, body)


def test_link_tokens_behind_one_constant_wrong_header_are_each_a_guess(tmp_path: Path) -> None:
    with running_server(tmp_path / "store.duckdb", token=GOOD, auth_failure_limit=3) as server:
        for guess in range(3):
            assert _link(server, f"link-guess-{guess}", STALE) == 401
        # the limit is reached: a right token in the link is refused, not signed in (303)
        assert _link(server, GOOD, STALE) == 429


def test_sign_in_tokens_behind_one_constant_wrong_header_are_each_a_guess(tmp_path: Path) -> None:
    with running_server(tmp_path / "store.duckdb", token=GOOD, auth_failure_limit=3) as server:
        for guess in range(3):
            assert _sign_in(server, f"form-guess-{guess}", STALE) == 401
        assert _sign_in(server, GOOD, STALE) == 429


def test_one_token_in_a_header_a_link_or_a_form_is_still_one_guess(tmp_path: Path) -> None:
    with running_server(tmp_path / "store.duckdb", token=GOOD, auth_failure_limit=2) as server:
        # the same wrong token, sent each way in turn, repeatedly: one guess, never refused for it
        for _ in range(3):
            assert _request(server, "GET", "/ui/api/traces", {"Authorization": "Bearer one-wrong-token"}) == 401
            assert _link(server, "one-wrong-token", {}) == 401
            assert _sign_in(server, "one-wrong-token", {}) == 401
        assert _sign_in(server, GOOD, {}) == 303


def test_a_sign_in_whose_form_arrives_after_its_address_went_over_the_limit_is_refused(tmp_path: Path) -> None:
    with running_server(tmp_path / "store.duckdb", token=GOOD, auth_failure_limit=3) as server:
        port = server.server.http_port
        assert port is not None
        body = urllib.parse.urlencode({"token": GOOD, "next": "/ui/"}).encode()
        # a sign-in opened while the address is still under the limit; "100 Continue" says the receiver has taken
        # its headers and waits for its form
        opened = socket.create_connection(("127.0.0.1", port), timeout=30)
        with opened, opened.makefile("rb") as replies:
            head = (
                f"POST /ui/login HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: {FORM['Content-Type']}\r\n"
                f"Sec-Fetch-Site: same-origin\r\nContent-Length: {len(body)}\r\nExpect: 100-continue\r\n\r\n"
            )
            opened.sendall(head.encode())
            assert replies.readline().startswith(b"HTTP/1.1 100")
            assert replies.readline() == b"\r\n"
            for guess in range(3):  # meanwhile the same address reaches the limit
                assert _sign_in(server, f"form-guess-{guess}", {}) == 401
            opened.sendall(body)  # the form, with the right token, comes now: it must not be tried
            status = replies.readline().split()[1]
        assert status == b"429"
