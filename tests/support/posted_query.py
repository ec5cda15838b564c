"""A ``POST`` of a query on an HTTP connection of its own, whose reply is read later (or never: hang up), and the
receiver's query turns as its ``/metrics`` shows them."""

from __future__ import annotations

import http.client
import json
import urllib.parse
from typing import Any

from tests.support.server_requests import receiver_metric

__all__ = ["PostedQuery", "query_turns"]


class PostedQuery:
    """A query posted on a connection of its own; ``answer()`` reads its reply, ``hang_up()`` closes the
    connection unread (the receiver then cancels the query, or drops it from the line)."""

    def __init__(self, http_url: str, path: str, token: str | None, sql: str) -> None:
        parts = urllib.parse.urlsplit(http_url)
        self._connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=120)
        headers = {"Content-Type": "application/json"}
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        self._connection.request("POST", path, json.dumps({"sql": sql}).encode(), headers)

    def answer(self) -> tuple[int, Any]:
        response = self._connection.getresponse()
        return response.status, json.loads(response.read())

    def hang_up(self) -> None:
        self._connection.close()


def query_turns(http_url: str) -> tuple[float, float]:
    """The receiver's queries holding a turn and waiting for one."""
    return receiver_metric(http_url, "queries_running"), receiver_metric(http_url, "queries_waiting")
