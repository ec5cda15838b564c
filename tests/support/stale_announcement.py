"""A store held by another process whose sidecar still names the port of a ``tracegrade serve`` killed with
SIGKILL, where another program now answers: what a CLI command or a pytest session finds after a crash when the
port has been taken since."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from tests.support.server_process import ServerProcess
from tracegrade.store import TraceStore

__all__ = ["Answer", "held_with_stale_announcement", "serve_answers", "ssh_banner"]

# holds the store file open (DuckDB's lock) until its standard input closes
HOLDER = (
    "import sys; from tracegrade.store import TraceStore; "
    "s = TraceStore(sys.argv[1]); print('held', flush=True); sys.stdin.read()"
)

Answer = Callable[[bytes], bytes]  # the request's first bytes -> what the program on the port sends back


def ssh_banner(request: bytes) -> bytes:
    """What an SSH server says to anyone: no HTTP at all."""
    return b"SSH-2.0-OpenSSH_9.6\r\n"


def serve_answers(listener: socket.socket, answer: Answer) -> None:
    """Answer every connection to ``listener`` with ``answer`` of its first bytes, until the listener closes."""
    while True:
        try:
            client, _ = listener.accept()
        except OSError:  # closed
            return
        with client:
            client.sendall(answer(client.recv(65536)))


@contextmanager
def held_with_stale_announcement(store: Path, answer: Answer) -> Iterator[Path]:
    """``store`` (created) held by another process, its sidecar naming the port of a server that was killed, where
    ``answer`` is given; everything stopped on leaving."""
    TraceStore(store).close()
    server = ServerProcess(store).start()
    port = server.http_port
    server.kill()  # SIGKILL: the sidecar stays
    assert server.sidecar.exists()
    with ExitStack() as stack:
        listener = stack.enter_context(socket.create_server(("127.0.0.1", port)))
        threading.Thread(target=serve_answers, args=(listener, answer), daemon=True).start()
        holder = subprocess.Popen(
            [sys.executable, "-c", HOLDER, str(store)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        stack.callback(holder.wait, 30)  # run last: after the kill below
        stack.callback(holder.kill)
        assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
        yield store
