"""Run a ReceiverServer on a background thread's event loop, for tests that talk to it over loopback."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tracegrade.ingest.server import ReceiverServer
from tracegrade.ingest.settings import ServeSettings

__all__ = ["RunningServer", "running_server"]


class RunningServer:
    """A started server plus the loop it runs on; ``call(coro)`` runs a coroutine on that loop."""

    def __init__(self, server: ReceiverServer, loop: asyncio.AbstractEventLoop) -> None:
        self.server = server
        self.loop = loop

    @property
    def http_url(self) -> str:
        return self.server.http_url

    @property
    def grpc_target(self) -> str:
        return self.server.grpc_target

    @property
    def store_path(self) -> Path:
        return self.server.settings.store

    def call(self, coroutine: Any, timeout: float = 60.0) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def stop(self) -> None:
        self.call(self.server.stop())


@contextmanager
def running_server(store: Path, **settings: Any) -> Iterator[RunningServer]:
    """Start a receiver on free loopback ports writing to ``store``; stop it (gracefully) on exit."""
    options = {"store": store, "host": "127.0.0.1", "grpc_port": 0, "http_port": 0, **settings}
    server = ReceiverServer(ServeSettings(**options))
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="test-receiver", daemon=True)
    thread.start()
    handle = RunningServer(server, loop)
    try:
        handle.call(server.start())
        yield handle
    finally:
        try:
            handle.stop()
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(10)
            loop.close()
