"""A ``POST`` of a query (or any request) on an HTTP connection of its own, whose reply is read later (or never:
hang up), and the receiver's query turns as its ``/metrics`` shows them."""

from __future__ import annotations

import http.client
import json
import urllib.parse
from typing import Any

from tests.support.server_requests import receiver_metric

__all__ = ["PostedQuery", "mcp_run_sql", "query_turns"]


class PostedQuery:
    """A query posted on a connection of its own (``{"sql": sql}``; or ``document`` as the JSON body; neither: a
    GET); ``answer()`` reads its reply, ``hang_up()`` closes the connection unread (the receiver then cancels the
    query, or drops it from the line)."""

    def __init__(
        self,
        http_url: str,
        path: str,
        token: str | None,
        sql: str | None = None,
        *,
        document: Any = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.reply_headers: http.client.HTTPMessage | None = None  # the reply's, once ``answer`` read it
        parts = urllib.parse.urlsplit(http_url)
        self._connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=120)
        sent = {"Content-Type": "application/json", **(headers or {})}
        if token is not None:
            sent["Authorization"] = f"Bearer {token}"
        body = {"sql": sql} if sql is not None else document
        if body is None:
            self._connection.request("GET", path, headers=sent)
        else:
            self._connection.request("POST", path, json.dumps(body).encode(), sent)

    def answer(self) -> tuple[int, Any]:
        response = self._connection.getresponse()
        self.reply_headers = response.headers
        return response.status, json.loads(response.read())

    def answer_text(self) -> tuple[int, str]:
        """The reply as text (a page of the web UI)."""
        response = self._connection.getresponse()
        return response.status, response.read().decode()

    def hang_up(self) -> None:
        self._connection.close()


def mcp_run_sql(http_url: str, token: str | None, sql: str) -> PostedQuery:
    """A call of MCP's ``run_sql`` tool at ``/mcp`` (stateless: no session to open first); its ``answer()`` is the
    JSON-RPC reply, whose ``result`` holds the tool's text and ``isError``."""
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "run_sql", "arguments": {"sql": sql}}}
    accept = {"Accept": "application/json, text/event-stream"}
    return PostedQuery(http_url, "/mcp", token, document=call, headers=accept)


def query_turns(http_url: str) -> tuple[float, float]:
    """The receiver's queries holding a turn and waiting for one."""
    return receiver_metric(http_url, "queries_running"), receiver_metric(http_url, "queries_waiting")
