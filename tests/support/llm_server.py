"""A scripted OpenAI-compatible HTTP server on 127.0.0.1 for judge and simulator tests.

It answers ``POST /v1/chat/completions`` and ``POST /v1/responses`` with replies taken from a queue
(``server.script(...)``) or, when the queue is empty, from a responder function of the request (so a
test can answer by prompt content). Every request is recorded (``server.requests``). Faults are
scripted replies: :meth:`Reply.rate_limited`, :meth:`Reply.server_error`, :meth:`Reply.hang`,
:meth:`Reply.malformed_body`. ``LLMServer(apis={"chat"})`` serves chat completions only, as llama.cpp's
server or TGI do: ``/v1/responses`` is then answered 404 (still recorded, without taking a scripted reply).
Each server mounts its API under a path of its own (``base_url`` ends ``/llm<N>/v1``; recorded paths
start at ``/v1``): the judges remember per endpoint which API it serves, and a port a later server reuses
must not inherit what an earlier one taught them.
The server runs in a background thread with its own event loop.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
import time
from collections import deque
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

__all__ = ["API_PATHS", "LLMServer", "ReceivedRequest", "Reply"]

#: the path of each API the server can serve
API_PATHS = {"chat": "/v1/chat/completions", "responses": "/v1/responses"}
_MOUNTS = itertools.count(1)


@dataclass
class Reply:
    """One scripted answer: model text (HTTP 200) or an HTTP fault."""

    text: str = ""
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    raw_body: str | None = None  # sent verbatim instead of a well-formed completion
    delay: float = 0.0  # seconds to wait before answering (on top of the server latency)
    input_tokens: int = 100
    output_tokens: int = 20

    @classmethod
    def json(cls, **payload: Any) -> Reply:
        return cls(text=json.dumps(payload))

    @classmethod
    def score(cls, score: Any, reasoning: str = "scripted", **extra: Any) -> Reply:
        return cls.json(score=score, reasoning=reasoning, **extra)

    @classmethod
    def rate_limited(cls, retry_after: float = 1.0) -> Reply:
        return cls(status=429, headers={"Retry-After": f"{retry_after:g}"})

    @classmethod
    def server_error(cls, status: int = 500) -> Reply:
        return cls(status=status)

    @classmethod
    def hang(cls, seconds: float) -> Reply:
        return cls(text='{"score": 1.0, "reasoning": "answered too late"}', delay=seconds)

    @classmethod
    def malformed_body(cls) -> Reply:
        return cls(raw_body='{"id": "chatcmpl-x", "choices": [ {"message": ')


@dataclass
class ReceivedRequest:
    """What the server received: the path, the JSON body and the prompt text it carried."""

    path: str
    body: dict[str, Any]
    headers: dict[str, str]
    received_at: float

    @property
    def prompt(self) -> str:
        if "messages" in self.body:
            return "\n".join(_content_text(m.get("content")) for m in self.body["messages"])
        raw = self.body.get("input")
        if isinstance(raw, str):
            return raw
        return "\n".join(_content_text(item.get("content")) for item in raw or [] if isinstance(item, dict))

    @property
    def model(self) -> str:
        return str(self.body.get("model", ""))


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    return ""


Responder = Callable[[ReceivedRequest], "Reply | str"]


class LLMServer:
    """The scripted server; use as a context manager (``with LLMServer() as server: ...``)."""

    def __init__(
        self, responder: Responder | None = None, latency: float = 0.0, apis: Collection[str] = tuple(API_PATHS)
    ) -> None:
        unknown = set(apis) - set(API_PATHS)
        if unknown:
            raise ValueError(f"unknown APIs {sorted(unknown)}; choose from {sorted(API_PATHS)}")
        self.apis = frozenset(apis)
        self.mount = f"/llm{next(_MOUNTS)}"
        self.responder = responder
        self.latency = latency
        self.requests: list[ReceivedRequest] = []
        self._queue: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self.port = 0
        self.in_flight = 0
        self.max_in_flight = 0  # the most requests the server was answering at once

    # -- scripting ---------------------------------------------------------------------------
    def script(self, *replies: Reply | str | Iterable[Reply | str]) -> None:
        """Queue replies, answered in order before the responder is consulted."""
        with self._lock:
            for item in replies:
                items = [item] if isinstance(item, Reply | str) else list(item)
                self._queue.extend(Reply(text=r) if isinstance(r, str) else r for r in items)

    def clear(self, settle_seconds: float = 5.0) -> None:
        """Forget queued replies and recorded requests, after waiting for requests still being answered."""
        deadline = time.monotonic() + settle_seconds
        while self.in_flight and time.monotonic() < deadline:
            time.sleep(0.02)
        with self._lock:
            self._queue.clear()
            self.requests.clear()
            self.max_in_flight = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}{self.mount}/v1"

    def _next_reply(self, request: ReceivedRequest) -> Reply:
        with self._lock:
            self.requests.append(request)
            if self._queue:
                return self._queue.popleft()
        if self.responder is None:
            return Reply.score(1.0, "default reply")
        reply = self.responder(request)
        return Reply(text=reply) if isinstance(reply, str) else reply

    # -- HTTP ----------------------------------------------------------------------------------
    async def _handle(self, request: web.Request) -> web.StreamResponse:
        try:
            body = await request.json()
        except json.JSONDecodeError:
            return web.json_response({"error": {"message": "body is not JSON"}}, status=400)
        received = self._received(request, body)
        reply = self._next_reply(received)
        self.in_flight += 1  # only touched on the server's loop thread
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.latency or reply.delay:
                await asyncio.sleep(self.latency + reply.delay)
        finally:
            self.in_flight -= 1
        if reply.status != 200:
            error = {
                "error": {
                    "message": f"scripted HTTP {reply.status}",
                    "type": "scripted_fault",
                    "code": str(reply.status),
                }
            }
            return web.json_response(error, status=reply.status, headers=reply.headers)
        if reply.raw_body is not None:
            return web.Response(text=reply.raw_body, content_type="application/json")
        build = _chat_payload if request.path.endswith("/chat/completions") else _responses_payload
        return web.json_response(build(next(self._ids), received.model, reply))

    async def _not_served(self, request: web.Request) -> web.StreamResponse:
        """An API this server lacks: recorded, then answered the way llama.cpp's server answers it."""
        body = await request.json()
        with self._lock:
            self.requests.append(self._received(request, body))
        error = {"error": {"code": 404, "message": "File Not Found", "type": "not_found_error"}}
        return web.json_response(error, status=404)

    def _received(self, request: web.Request, body: dict[str, Any]) -> ReceivedRequest:
        return ReceivedRequest(request.path.removeprefix(self.mount), body, dict(request.headers), time.monotonic())

    def requests_to(self, api: str) -> list[ReceivedRequest]:
        """The recorded requests to one API (``"chat"`` or ``"responses"``)."""
        with self._lock:
            return [r for r in self.requests if r.path == API_PATHS[api]]

    def _build_app(self) -> web.Application:
        app = web.Application()
        for api, path in API_PATHS.items():
            app.router.add_post(self.mount + path, self._handle if api in self.apis else self._not_served)
        return app

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self) -> LLMServer:
        started = threading.Event()

        def serve() -> None:
            self._loop = asyncio.new_event_loop()
            asyncio.set_event_loop(self._loop)
            self._runner = web.AppRunner(self._build_app(), access_log=None, handler_cancellation=True)
            self._loop.run_until_complete(self._runner.setup())
            site = web.TCPSite(self._runner, "127.0.0.1", 0)
            self._loop.run_until_complete(site.start())
            self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
            started.set()
            self._loop.run_forever()
            self._loop.run_until_complete(self._runner.cleanup())
            self._loop.close()

        self._thread = threading.Thread(target=serve, name="llm-test-server", daemon=True)
        self._thread.start()
        if not started.wait(10):
            raise RuntimeError("the scripted LLM server did not start within 10 s")
        return self

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            self._loop = self._thread = None

    def __enter__(self) -> LLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _chat_payload(n: int, model: str, reply: Reply) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{n}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": reply.text}, "finish_reason": "stop"}],
        "usage": {
            "prompt_tokens": reply.input_tokens,
            "completion_tokens": reply.output_tokens,
            "total_tokens": reply.input_tokens + reply.output_tokens,
        },
    }


def _responses_payload(n: int, model: str, reply: Reply) -> dict[str, Any]:
    return {
        "id": f"resp_{n}",
        "object": "response",
        "created_at": int(time.time()),
        "status": "completed",
        "model": model,
        "output": [
            {
                "type": "message",
                "id": f"msg_{n}",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": reply.text, "annotations": []}],
            }
        ],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": reply.input_tokens,
            "output_tokens": reply.output_tokens,
            "total_tokens": reply.input_tokens + reply.output_tokens,
        },
    }
