"""A store command on a store held by another process, whose sidecar names the port of a server that was killed,
where another program now answers: one clear message and exit 2, never http.client's traceback. Something that
answers no HTTP there is no server holding the store (so the store is said to be held); a server that breaks off
its answer is an error naming it.

Real processes: ``tracegrade serve`` killed with SIGKILL (its sidecar stays), a process holding the store file,
a plain TCP server on the announced port, and the ``tracegrade`` CLI in a process of its own."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.server_process import ServerProcess
from tracegrade.store import TraceStore

# holds the store file open (DuckDB's lock) until its standard input closes
HOLDER = (
    "import sys; from tracegrade.store import TraceStore; "
    "s = TraceStore(sys.argv[1]); print('held', flush=True); sys.stdin.read()"
)

Answer = Callable[[bytes], bytes]  # the request's first bytes -> what the program on the port sends back


def _ssh_banner(request: bytes) -> bytes:
    return b"SSH-2.0-OpenSSH_9.6\r\n"


def _healthy_then_cut_short(request: bytes) -> bytes:
    """A /healthz answered as HTTP, any other request's answer broken off: 100 bytes promised, 2 sent."""
    if request.startswith(b"GET /healthz "):
        return b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"
    return b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\nConnection: close\r\n\r\n{}"


def _serve(listener: socket.socket, answer: Answer) -> None:
    while True:
        try:
            client, _ = listener.accept()
        except OSError:  # closed
            return
        with client:
            client.sendall(answer(client.recv(65536)))


@pytest.fixture
def held_store(tmp_path: Path) -> Iterator[Callable[[Answer], Path]]:
    """Makes a store held by another process, its sidecar naming a port where ``answer`` is given."""
    cleanups: list[Callable[[], None]] = []

    def make(answer: Answer) -> Path:
        store = tmp_path / "traces.duckdb"
        TraceStore(store).close()
        server = ServerProcess(store).start()
        port = server.http_port
        server.kill()  # SIGKILL: the sidecar stays
        assert server.sidecar.exists()
        listener = socket.create_server(("127.0.0.1", port))
        cleanups.append(listener.close)
        threading.Thread(target=_serve, args=(listener, answer), daemon=True).start()
        holder = subprocess.Popen(
            [sys.executable, "-c", HOLDER, str(store)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        cleanups.append(lambda: (holder.kill(), holder.wait(30)))
        assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
        return store

    try:
        yield make
    finally:
        for cleanup in reversed(cleanups):
            cleanup()


def _traces(store: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from tracegrade.cli.main import cli; cli()", "traces", "--store", str(store)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_port_that_answers_no_http_is_no_server_holding_the_store(held_store: Callable[[Answer], Path]) -> None:
    store = held_store(_ssh_banner)
    done = _traces(store)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert f"store {store} is held by another process (pid " in done.stderr
    assert f"start `tracegrade serve --store {store}` or stop that process" in done.stderr


def test_a_server_that_breaks_off_its_answer_is_named(held_store: Callable[[Answer], Path]) -> None:
    store = held_store(_healthy_then_cut_short)
    done = _traces(store)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert "the tracegrade server at http://127.0.0.1:" in done.stderr
    said = "did not answer the query: its answer was cut short or is not HTTP (IncompleteRead(2 bytes read"
    assert said in done.stderr
