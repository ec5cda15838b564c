"""A store whose sidecar names the port of a ``tracegrade serve`` killed with SIGKILL, where a plain web server now
answers (200 with ``{}``, or 404): that web server is no tracegrade server. A store another process holds is then
said to be held (exit 2), never queried through the web server (whose HTTP error the command used to print); a
store nobody holds is opened directly.

Real processes: ``tracegrade serve`` killed with SIGKILL, a process holding the store file, a plain HTTP server on
the announced port, and the ``tracegrade`` CLI in a process of its own."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path

import pytest

from tests.support.receiver_before_server_field import LAUNCH as RECEIVER_BEFORE_SERVER_FIELD
from tests.support.server_process import ServerProcess
from tests.support.stale_announcement import Answer, held_with_stale_announcement, serve_answers
from tracegrade.store import TraceStore


def _web_server(status: bytes, body: bytes) -> Answer:
    """A web server that answers every request with ``status`` and the JSON ``body``."""

    def answer(request: bytes) -> bytes:
        head = f"HTTP/1.1 {status.decode()}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        return head.encode() + b"Connection: close\r\n\r\n" + body

    return answer


def _service_with_metrics(request: bytes) -> bytes:
    """Another service with a health check shaped like an old receiver's and Prometheus metrics of its own."""
    if request.startswith(b"GET /healthz "):
        return _web_server(b"200 OK", b'{"status": "ok"}')(request)
    return _web_server(b"200 OK", b"# HELP process_cpu_seconds_total CPU time.\nprocess_cpu_seconds_total 1.5\n")(
        request
    )


WEB_SERVERS = {
    "200 {}": _web_server(b"200 OK", b"{}"),
    "200 status ok": _web_server(b"200 OK", b'{"status": "ok"}'),  # a health check of another program
    "status ok and own metrics": _service_with_metrics,
    "404": _web_server(b"404 Not Found", b'{"detail": "Not Found"}'),
}


def _tracegrade(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-c", "from tracegrade.cli.main import cli; cli()", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("answer", list(WEB_SERVERS), ids=list(WEB_SERVERS))
def test_a_web_server_on_a_killed_servers_port_is_no_server_holding_the_store(tmp_path: Path, answer: str) -> None:
    with held_with_stale_announcement(tmp_path / "traces.duckdb", WEB_SERVERS[answer]) as store:
        done = _tracegrade("sql", "SELECT 1 AS one", "--store", str(store))
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert f"store {store} is held by another process (pid " in done.stderr
    assert "answered" not in done.stderr  # the web server's HTTP error is not taken for the store's


def test_a_store_nobody_holds_opens_though_its_sidecar_names_a_web_server(tmp_path: Path) -> None:
    store = tmp_path / "traces.duckdb"
    TraceStore(store).close()
    server = ServerProcess(store).start()
    port = server.http_port
    server.kill()  # SIGKILL: the sidecar stays, naming the port
    with socket.create_server(("127.0.0.1", port)) as listener:
        threading.Thread(target=serve_answers, args=(listener, WEB_SERVERS["200 {}"]), daemon=True).start()
        done = _tracegrade("sql", "SELECT 41 + 1 AS answer", "--format", "csv", "--store", str(store))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["answer", "42"]


def test_a_running_tracegrade_server_still_answers_for_its_store(tmp_path: Path) -> None:
    store = tmp_path / "traces.duckdb"
    TraceStore(store).close()
    with ServerProcess(store):
        done = _tracegrade("sql", "SELECT 41 + 1 AS answer", "--format", "csv", "--store", str(store))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["answer", "42"]


def test_a_receiver_from_before_healthz_named_its_server_still_answers_for_its_store(tmp_path: Path) -> None:
    """During an upgrade, a receiver not yet restarted answers /healthz without ``server``: a CLI from after it
    still sends it the store's queries, rather than calling the store held."""
    store = tmp_path / "traces.duckdb"
    TraceStore(store).close()
    with ServerProcess(store, launch=RECEIVER_BEFORE_SERVER_FIELD) as server:
        with urllib.request.urlopen(f"{server.http_url}/healthz", timeout=10) as response:
            assert json.loads(response.read()) == {"status": "ok"}  # as such a receiver answers
        done = _tracegrade("sql", "SELECT 41 + 1 AS answer", "--format", "csv", "--store", str(store))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["answer", "42"]
