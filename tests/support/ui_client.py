"""The web UI's routes on a real aiohttp server over loopback, reading one open store, for a test's requests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from tracegrade.ui import add_ui_routes


@asynccontextmanager
async def ui_client(store: Any) -> AsyncIterator[TestClient]:
    """A client of the UI serving ``store``; the store is closed when the client is."""
    app = web.Application()
    add_ui_routes(app, lambda _: store)
    try:
        async with TestClient(TestServer(app, host="127.0.0.1")) as opened:
            yield opened
    finally:
        store.close()
