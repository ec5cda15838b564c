"""HTTP/1.1 spoken over a raw loopback socket, for tests that need what a client library hides: a request's headers
sent without its body (``Expect: 100-continue``), an interim answer, a connection the server closes."""

from __future__ import annotations

import socket

__all__ = ["first_answer", "request_head"]

DEFAULT_HEADERS = ("Host: 127.0.0.1", "Content-Type: application/x-protobuf")


def request_head(path: str, length: int, *headers: str) -> bytes:
    """The head of a POST to ``path`` declaring a ``length``-byte body, with ``headers`` (and ``DEFAULT_HEADERS``
    those do not name)."""
    named = {header.partition(":")[0].lower() for header in headers}
    defaults = [header for header in DEFAULT_HEADERS if header.partition(":")[0].lower() not in named]
    lines = (f"POST {path} HTTP/1.1", *defaults, *headers)
    return "\r\n".join((*lines, f"Content-Length: {length}", "", "")).encode()


def first_answer(client: socket.socket) -> tuple[bytes, dict[str, str], bytes]:
    """The first answer on ``client``, an interim one (``100 Continue``) included: status line, headers, body."""
    with client.makefile("rb") as replies:
        status = replies.readline().rstrip()
        headers = {}
        while line := replies.readline().rstrip():
            name, _, value = line.decode().partition(":")
            headers[name.lower()] = value.strip()
        return status, headers, replies.read(int(headers.get("content-length", 0)))
