"""The worker's ``/metrics`` and ``/healthz``: a small aiohttp server on a thread and event loop of its own.

Not on the worker's loop: a criterion computes on that loop (and the store is written from it), so a slow or
hung criterion would hold the very answer that should report it. The socket is bound when the endpoint is made,
so a bad address or a port in use fails at start, before the worker grades anything.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from dataclasses import dataclass

from tracegrade.errors import InvalidValueError
from tracegrade.evaluation.worker_metrics import WorkerMetrics

__all__ = ["ListenAddress", "WorkerEndpoint", "listen_socket", "parse_listen_address"]

EXAMPLES = "such as 127.0.0.1:9464, 0.0.0.0:9464 or [::1]:9464 (port 0 picks a free one)"


@dataclass(frozen=True)
class ListenAddress:
    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def parse_listen_address(text: str, option: str = "--metrics-address") -> ListenAddress:
    """``HOST:PORT`` (an IPv6 host in brackets); raises InvalidValueError saying what is wrong."""
    value = text.strip()
    host, colon, port = value.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        host = ""  # an IPv6 address without brackets: its last group would be taken for the port
    if not colon or not host or not port.isdigit() or int(port) > 65535:
        raise InvalidValueError(f"{option} {text!r}: expected HOST:PORT, {EXAMPLES}")
    return ListenAddress(host, int(port))


def listen_socket(address: ListenAddress, what: str) -> socket.socket:
    """A socket listening at ``address`` to serve ``what``; InvalidValueError says why it cannot."""
    try:
        # IPv6 hosts get an IPv6 socket; a name is resolved by bind (its first address)
        family = socket.AF_INET6 if ":" in address.host else socket.AF_INET
        return socket.create_server((address.host, address.port), family=family)
    except OSError as exc:
        raise InvalidValueError(
            f"cannot serve {what} on {address}: {exc.strerror or exc}; choose a free port and a local address with "
            f"--metrics-address, {EXAMPLES}"
        ) from None


class WorkerEndpoint:
    """Listens at ``address`` once made; serves a worker's metrics from :meth:`start` until :meth:`stop`."""

    def __init__(self, address: ListenAddress) -> None:
        self.address = address
        self._socket = listen_socket(address, "the worker's metrics")
        self.port = int(self._socket.getsockname()[1])
        self.metrics: WorkerMetrics | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._started = threading.Event()
        self._failure: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="tracegrade-worker-metrics", daemon=True)

    @property
    def url(self) -> str:
        return f"http://{ListenAddress(self.address.host, self.port)}"

    def start(self, metrics: WorkerMetrics) -> WorkerEndpoint:
        self.metrics = metrics
        self._thread.start()
        self._started.wait()
        if self._failure is not None:
            raise self._failure
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Stop serving (if it started) and close the socket."""
        if self._loop is not None and self._stop is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread.ident is not None:  # started
            self._thread.join(timeout)
        self._socket.close()

    def _run(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as exc:  # handed to start(); after it, the thread ends with the process
            self._failure = exc
        finally:
            self._started.set()

    async def _serve(self) -> None:
        from aiohttp import web

        from tracegrade.ingest.host_guard import host_guard
        from tracegrade.ingest.metrics import CONTENT_TYPE

        metrics = self.metrics
        assert metrics is not None  # set by start()

        async def metrics_page(request: web.Request) -> web.Response:
            return web.Response(body=metrics.render().encode(), headers={"Content-Type": CONTENT_TYPE})

        async def healthz(request: web.Request) -> web.Response:
            health = metrics.health()
            return web.json_response(health.as_json(), status=200 if health.healthy else 503)

        guard = host_guard(self.address.host)
        app = web.Application(middlewares=[guard] if guard is not None else [])
        app.router.add_get("/metrics", metrics_page)
        app.router.add_get("/healthz", healthz)
        runner = web.AppRunner(app, handle_signals=False, access_log=None)
        await runner.setup()
        try:
            await web.SockSite(runner, self._socket).start()
            self._loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()
            self._started.set()
            await self._stop.wait()
        finally:
            await runner.cleanup()
