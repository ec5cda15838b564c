"""A pytest plugin (``-p tests.support.loopback_only``) that fails the session if anything in the test process
tries to reach a host that is not this machine.

The agent-SDK tests (Google ADK, OpenAI Agents SDK) run scripted models; this shows that neither SDK, nor
tracegrade around them, phones home (telemetry, model lists, trace export). Every socket connection and name
lookup goes through Python's audit events: the hook refuses those for other hosts and records them, so an
attempt that a library catches and swallows still fails the run at its end.
"""

from __future__ import annotations

import ipaddress
import socket
import sys
from typing import Any

import pytest

__all__ = ["attempts"]

attempts: list[str] = []  # "event host:port", in the order they were tried


class InternetAccessRefused(OSError):
    """Raised inside the code under test when it tries to reach another host."""


def _is_local(host: object) -> bool:
    if host is None or host in ("", "localhost"):
        return True
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    if not isinstance(host, str):
        return False
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]).is_loopback
    except ValueError:
        return host.endswith(".localhost")


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event == "socket.connect":
        sock, address = args
        if sock.family not in (socket.AF_INET, socket.AF_INET6):
            return  # Unix sockets and the like stay on this machine
        host, port = address[0], address[1]
    elif event == "socket.getaddrinfo":
        host, port = args[0], args[1]
    else:
        return
    if not _is_local(host):
        attempts.append(f"{event} {host}:{port}")
        raise InternetAccessRefused(f"test process tried to reach {host}:{port} ({event}); only loopback is allowed")


def pytest_configure(config: pytest.Config) -> None:
    sys.addaudithook(_audit)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if attempts:
        sys.stderr.write("loopback_only: the tests tried to reach other hosts:\n  " + "\n  ".join(attempts) + "\n")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
