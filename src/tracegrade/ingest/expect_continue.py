"""``Expect: 100-continue`` on the OTLP/HTTP export routes: the client is told to send its body only once its
request passed every check that needs no body, and a refusal before then closes the connection.

aiohttp answers ``100 Continue`` itself, before any middleware or handler runs, so a client that asked first would
send its whole body only to be refused. An export route is given :func:`defer_continue` as its ``Expect`` handler
instead, which tells nothing yet; the handler calls :func:`send_continue` once it is about to read the body. A
request refused before then, by a middleware (the failed-authentication limit, several ``Authorization`` headers,
the host guard) or by the handler (a bad token, a body declared too large, every slot taken), sends no body: its
client waits for ``100 Continue`` or a final answer. aiohttp, though, would keep the connection after the answer
and wait up to 10 s for that body, to discard it; and a client that went on to send its next request there would
have it read as that body. :func:`close_unless_continued`, the outermost middleware, sends such an answer with
``Connection: close`` and closes the connection after it.

Every other route keeps aiohttp's own handler: its client is told to go on at once, so the body it sends is read
or discarded and its connection stays usable.
"""

from __future__ import annotations

from typing import Any

from aiohttp import HttpVersion11, web

__all__ = ["close_unless_continued", "defer_continue", "expects_continue", "send_continue"]

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
