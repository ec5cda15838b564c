"""tests/support/loopback_only.py, the plugin CI's agent-SDK run uses to show nothing reaches the internet: a
session whose code tries another host fails even when the code swallows the refusal; loopback stays allowed."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _plugin_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # the sessions import tests.support.loopback_only from here


def _run(pytester: pytest.Pytester, body: str) -> pytest.RunResult:
    pytester.makepyfile(test_net=body)
    # a subprocess: the audit hook it installs cannot be removed, so it must not land in this test process
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "tests.support.loopback_only")


def test_a_swallowed_attempt_to_reach_another_host_fails_the_session(pytester: pytest.Pytester) -> None:
    result = _run(
        pytester,
        """
import socket

def test_phones_home():
    sock = socket.socket()
    sock.settimeout(0.1)
    try:
        sock.connect(("192.0.2.1", 443))  # TEST-NET-1: never routed
    except OSError:
        pass  # as a library's telemetry client would
    finally:
        sock.close()
""",
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*1 passed*"])
    result.stderr.fnmatch_lines(["*tried to reach other hosts*", "*socket.connect 192.0.2.1:443*"])


def test_a_name_lookup_of_another_host_is_refused(pytester: pytest.Pytester) -> None:
    result = _run(
        pytester,
        """
import socket
import pytest

def test_lookup():
    with pytest.raises(OSError, match="only loopback"):
        socket.getaddrinfo("example.com", 443)
""",
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stderr.fnmatch_lines(["*socket.getaddrinfo example.com:443*"])


def test_loopback_connections_pass(pytester: pytest.Pytester) -> None:
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    accepting = threading.Thread(target=lambda: server.accept()[0].close(), daemon=True)
    accepting.start()
    try:
        result = _run(
            pytester,
            f"""
import socket

def test_local():
    socket.create_connection(("127.0.0.1", {port}), timeout=5).close()
    socket.getaddrinfo("localhost", {port})
""",
        )
    finally:
        accepting.join(timeout=10)
        server.close()
    result.assert_outcomes(passed=1)
    assert result.ret == pytest.ExitCode.OK
