"""``serve --metrics-address``: the receiver's ``/metrics`` on a listener of its own, apart from the OTLP/HTTP port.

The metrics name tenants and count their work (worker series by tenant and rule, judge cost), and need no token,
as Prometheus scrapes them. On the port tenants reach, any of them could read them; on an address of the
operator's choosing (loopback, or an internal network) only the scraper does. The socket is bound when the
listener is made, so a bad address or a port in use fails at start, before anything is received.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web

from tracegrade.evaluation.worker_endpoint import ListenAddress, listen_socket, parse_listen_address
from tracegrade.ingest.host_guard import host_guard
from tracegrade.ingest.request_error_log import request_error_log

__all__ = ["MetricsListener"]


class MetricsListener:
    """Listens at ``address`` (``HOST:PORT``) once made; serves ``GET /metrics`` from :meth:`start` on the running
    event loop until :meth:`stop`."""

    def __init__(self, address: str) -> None:
        wanted = parse_listen_address(address)
        self._socket = listen_socket(wanted, "/metrics")
        self.address = ListenAddress(wanted.host, int(self._socket.getsockname()[1]))
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://{self.address}/metrics"

    async def start(self, page: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> None:
        guard = host_guard(self.address.host)
        app = web.Application(middlewares=[guard] if guard is not None else [])
        app.router.add_get("/metrics", page)
        self._runner = web.AppRunner(app, handle_signals=False, access_log=None, logger=request_error_log())
        await self._runner.setup()
        await web.SockSite(self._runner, self._socket).start()

    async def stop(self) -> None:
        """Stop serving, and close the socket (also when it never started)."""
        if self._runner is not None:
            await self._runner.cleanup()
        self._socket.close()
