"""OTLP/HTTP exports whose bodies are still being sent: raw loopback connections that hold part of the body
budget for as long as a test keeps them open."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager

from tests.support.server_inprocess import RunningServer

__all__ = ["ANSWER_WAIT", "slow_sender"]

ANSWER_WAIT = 60.0  # generous: only a receiver that never answers should reach it


@contextmanager
def slow_sender(server: RunningServer, declared: int, sent: bytes) -> Iterator[socket.socket]:
    """A connection that sent an export's headers, declaring ``declared`` body bytes, then ``sent`` of them."""
    assert server.server.http_port is not None
    with socket.create_connection(("127.0.0.1", server.server.http_port), timeout=ANSWER_WAIT) as client:
        client.sendall(
            b"POST /v1/traces HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-protobuf\r\n"
            + f"Content-Length: {declared}\r\n\r\n".encode()
            + sent
        )
        yield client
