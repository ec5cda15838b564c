"""``Expect: 100-continue`` on every POST route: the client is told to send its body only once its request passed
every check that needs no body, and a refusal before then closes the connection.

aiohttp answers ``100 Continue`` itself, before any middleware or handler runs, so a client that asked first would
send its whole body only to be refused. A POST route is added with :func:`add_post` instead, which gives it
:func:`defer_continue` as its ``Expect`` handler: that tells nothing yet, and the handler asks for the body
(:func:`ask_for_body`, :func:`read_body`; an export's :func:`send_continue`) once it is about to read it. A request
refused before then, by a middleware (the failed-authentication limit, several ``Authorization`` headers, the host
guard) or by the handler (a bad token or scope, a body declared too large, an unsupported type, a purge or rebuild
under way, every slot taken), sends no body: its client waits for ``100 Continue`` or a final answer. aiohttp,
though, would keep the connection after the answer and wait up to 10 s for that body, to discard it; and a client
that went on to send its next request there would have it read as that body. :func:`close_unless_continued`, the
outermost middleware (:func:`add_post` puts it there), sends such an answer with ``Connection: close`` and closes
the connection after it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import HttpVersion11, hdrs, web

__all__ = [
    "add_post",
    "ask_for_body",
    "close_unless_continued",
    "defer_continue",
    "expects_continue",
    "read_body",
    "send_continue",
]

CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
_DEFERRED = "tracegrade.continue_deferred"  # request key: told nothing yet, waiting for ``send_continue``


def expects_continue(request: web.BaseRequest) -> bool:
    """Does ``request``'s client wait to be told (``100 Continue``) before it sends its body?"""
    return request.version == HttpVersion11 and request.headers.get("Expect", "").strip().lower() == "100-continue"


async def defer_continue(request: web.Request) -> web.StreamResponse | None:
    """The ``Expect`` handler of a route that calls :func:`send_continue` itself: remembers that its client waits.
    Other expectations get 417, as with aiohttp's own handler, and the connection closed: whether such a client
    sends its body is unknown."""
    if expects_continue(request):
        request[_DEFERRED] = True
    elif request.version == HttpVersion11:
        expect = request.headers.get("Expect", "")
        message = f"unsupported Expect: {expect!r}; send 'Expect: 100-continue' or none"
        return await _close_after(request, web.Response(status=417, text=message))
    return None


def add_post(
    app: web.Application,
    path: str,
    handler: Callable[[web.Request], Awaitable[web.StreamResponse]],
    *,
    method: str = hdrs.METH_POST,
) -> web.AbstractRoute:
    """Add a route for ``method`` (POST; ``"*"``: any) to ``app`` (before it starts) whose waiting client is told to
    send its body only when ``handler`` asks for it (:func:`ask_for_body`), and put :func:`close_unless_continued`
    outermost among ``app``'s middlewares, so that it sees every refusal (the host guard's too, appended later)."""
    if close_unless_continued not in app.middlewares:
        app.middlewares.insert(0, close_unless_continued)
    return app.router.add_route(method, path, handler, expect_handler=defer_continue)


async def ask_for_body(request: web.Request) -> None:
    """Tell a waiting client to send its body (:func:`send_continue`), unless the body it declares is past the app's
    ``client_max_size``: that is refused first (aiohttp's 413, which the callers of ``request.read()`` handle),
    rather than asked for only to be refused once that many bytes came."""
    declared, limit = request.content_length, request.client_max_size
    if declared is not None and limit and declared > limit:
        raise web.HTTPRequestEntityTooLarge(max_size=limit, actual_size=declared)
    await send_continue(request)


async def read_body(request: web.Request) -> bytes:
    """``request``'s body, its client told to send it first (:func:`ask_for_body`)."""
    await ask_for_body(request)
    return await request.read()


async def send_continue(request: web.Request) -> None:
    """Tell a client that waits for it (:func:`defer_continue`) to send its body; nothing otherwise, or twice."""
    if request.pop(_DEFERRED, False):
        await request.writer.write(CONTINUE)
        request.writer.output_size = 0  # what was written so far is no part of the response (as aiohttp's does)


@web.middleware
async def close_unless_continued(request: web.Request, handler: Any) -> web.StreamResponse:
    """The outermost middleware: the answer to a request whose client still waits for ``100 Continue`` (refused
    before its body was asked for) is sent, and then its connection closed, as its client will send no body."""
    try:
        response = await handler(request)
    except web.HTTPException as raised:  # aiohttp would send it and keep the connection, waiting for the body
        if _still_waiting(request, raised):
            await _close_after(request, raised)
        raise
    if _still_waiting(request, response):
        await _close_after(request, response)
    return response


def _still_waiting(request: web.Request, response: web.StreamResponse) -> bool:
    """Whether ``request``'s client waits for ``100 Continue`` yet, ``response`` unsent. One that sent its body
    without waiting (curl does after 1 s) is let finish it, its connection kept: closed under it, its send fails,
    and a client library then reports that rather than the answer."""
    return bool(request.get(_DEFERRED)) and not response.prepared and not request.content.total_bytes


async def _close_after(request: web.Request, response: web.StreamResponse) -> web.StreamResponse:
    """Send ``response`` with ``Connection: close`` and close the connection (aiohttp, given it back, sends
    nothing more)."""
    response.force_close()  # says ``Connection: close``
    await response.prepare(request)
    await response.write_eof()
    request.protocol.force_close()  # what was written is still sent (asyncio flushes a closing transport)
    return response
