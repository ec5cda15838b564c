"""A store command on a store held by another process, whose sidecar names the port of a server that was killed,
where another program now answers: one clear message and exit 2, never http.client's traceback. Something that
answers no HTTP there is no server holding the store (so the store is said to be held); a server that breaks off
its answer is an error naming it.

Real processes: ``tracegrade serve`` killed with SIGKILL (its sidecar stays), a process holding the store file,
a plain TCP server on the announced port, and the ``tracegrade`` CLI in a process of its own."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.stale_announcement import Answer, held_with_stale_announcement, ssh_banner


def _healthy_then_cut_short(request: bytes) -> bytes:
    """A /healthz answered as a tracegrade server's, any other request's answer broken off: 100 bytes promised, 2
    sent."""
    if request.startswith(b"GET /healthz "):
        health = b'{"status": "ok", "server": "tracegrade"}'
        return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(health), health)
    return b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\nConnection: close\r\n\r\n{}"


def _traces(store: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from tracegrade.cli.main import cli; cli()", "traces", "--store", str(store)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def _traces_on_held(tmp_path: Path, answer: Answer) -> tuple[Path, subprocess.CompletedProcess[str]]:
    with held_with_stale_announcement(tmp_path / "traces.duckdb", answer) as store:
        return store, _traces(store)


def test_a_port_that_answers_no_http_is_no_server_holding_the_store(tmp_path: Path) -> None:
    store, done = _traces_on_held(tmp_path, ssh_banner)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert f"store {store} is held by another process (pid " in done.stderr
    assert f"start `tracegrade serve --store {store}` or stop that process" in done.stderr


def test_a_server_that_breaks_off_its_answer_is_named(tmp_path: Path) -> None:
    _, done = _traces_on_held(tmp_path, _healthy_then_cut_short)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert "the tracegrade server at http://127.0.0.1:" in done.stderr
    said = "did not answer the query: its answer was cut short or is not HTTP (IncompleteRead(2 bytes read"
    assert said in done.stderr
