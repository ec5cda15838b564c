"""DNS-rebinding protection for the HTTP servers that listen on a loopback address.

A server on 127.0.0.1 with no token (the default of ``tracegrade serve`` and ``tracegrade ui``) trusts that only
this machine can reach it. A web page can break that trust: it makes its own host name resolve to 127.0.0.1, and
the browser then treats the server's answers as the page's own origin, so the page can read the UI, run queries
and record runs. Such requests still name the page's host in their ``Host`` header, so a server bound to a
loopback address answers only requests for a loopback name (``localhost``, ``127.0.0.1``, ``[::1]``), and
refuses the others with 421 Misdirected Request, as the MCP SDK does for ``/mcp``. A server bound to any other
address is reached by names this process cannot know; it relies on its tokens instead.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # aiohttp only when a server is built: settings check is_loopback without it
    from aiohttp import web
    from aiohttp.typedefs import Middleware

__all__ = ["host_guard", "is_loopback"]

Handler = Callable[["web.Request"], Awaitable["web.StreamResponse"]]


def is_loopback(host: str) -> bool:
    """Is ``host`` (an address, ``[v6]``, or a name) one that only this machine reaches?"""
    name = host.strip().strip("[]").lower()
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _host_name(host_header: str) -> str:
    """The name in a ``Host`` header, without its port (``[::1]:8321`` -> ``::1``)."""
    if host_header.startswith("["):
        return host_header[1 : host_header.find("]")] if "]" in host_header else host_header
    return host_header.rsplit(":", 1)[0] if host_header.count(":") == 1 else host_header


def host_guard(bind_host: str) -> Middleware | None:
    """The middleware for a server listening on ``bind_host``: None unless that is a loopback address."""
    if not is_loopback(bind_host):
        return None
    from aiohttp import web

    @web.middleware
    async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
        name = _host_name(request.headers.get("Host", ""))
        if not is_loopback(name):
            return web.json_response(
                {
                    "error": f"this server listens on {bind_host} and answers requests for localhost only, not "
                    f"{name or 'a request without a Host header'!r} (a web page may be trying DNS rebinding); "
                    "reach it as http://localhost:<port>/ or http://127.0.0.1:<port>/"
                },
                status=421,
            )
        return await handler(request)

    return guard
