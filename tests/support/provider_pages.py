"""The scripted LLM server with verbatim pages: what a proxy or a misbehaving provider sends instead of a reply.

``PageServer`` is :class:`~tests.support.llm_server.LLMServer` except that :class:`Page` objects queued in
``server.pages[api]`` (``"chat"`` or ``"responses"``) are answered first, byte for byte: an HTML error page
with status 200, a server-sent event stream nobody asked for, oversized headers, a body cut off mid-way.
"""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.support.llm_server import LLMServer

__all__ = ["Page", "PageServer", "chat_stream", "responses_stream"]


@dataclass
class Page:
    """One verbatim answer. ``cut_after``: send that many bytes of ``body`` (announcing all of it), then close."""

    body: str
    content_type: str = "application/json"
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    cut_after: int | None = None


class PageServer(LLMServer):
    """The scripted server; queued pages are answered before its scripted replies."""

    def __init__(self) -> None:
        super().__init__()
        self.pages: dict[str, deque[Page]] = {"chat": deque(), "responses": deque()}

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        api = "chat" if request.path.endswith("/chat/completions") else "responses"
        if not self.pages[api]:
            return await super()._handle(request)
        received = self._received(request, await request.json())
        with self._lock:
            self.requests.append(received)
            page = self.pages[api].popleft()
        if page.cut_after is None:
            return web.Response(
                text=page.body, content_type=page.content_type, status=page.status, headers=page.headers
            )
        body = page.body.encode()
        response = web.StreamResponse(
            status=page.status, headers={"Content-Type": page.content_type, "Content-Length": str(len(body))}
        )
        await response.prepare(request)
        await response.write(body[: page.cut_after])
        if request.transport is not None:
            request.transport.close()
        return response


def _sse(events: list[dict[str, Any]], done: bool) -> str:
    lines = [f"data: {json.dumps(event)}\n\n" for event in events]
    return "".join(lines) + ("data: [DONE]\n\n" if done else "")


def chat_stream(pieces: list[str], finished: bool = True, usage: dict[str, int] | None = None) -> str:
    """A chat completion streamed as server-sent events: one chunk per piece of text, then (``finished``)
    the chunk with the finish reason, the usage and ``[DONE]``."""
    base = {"id": "chatcmpl-s", "object": "chat.completion.chunk", "created": 1, "model": "test-judge"}
    events = [{**base, "choices": [{"index": 0, "delta": {"content": p}, "finish_reason": None}]} for p in pieces]
    if finished:
        events.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], "usage": usage})
    return _sse(events, finished)


def responses_stream(response: dict[str, Any]) -> str:
    """A responses API reply streamed as its events: created, one text delta, completed (with ``response``)."""
    text = response["output"][0]["content"][0]["text"]
    started = {**response, "status": "in_progress", "output": []}
    events = [
        {"type": "response.created", "response": started},
        {"type": "response.output_text.delta", "delta": text},
        {"type": "response.completed", "response": response},
    ]
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)
