"""An unknown ``/ui/`` path answers the UI's 404 without asking for the store, so also while the receiver reopens
it (its store provider then raises the receiver's own StoreUnavailable); pages that read the store still answer
503. Apart from the browser tests: Playwright's sync API keeps an event loop running beside these async tests."""

from __future__ import annotations

from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from tracegrade.ingest.intake import StoreUnavailable
from tracegrade.ui import add_ui_routes


async def test_an_unknown_ui_path_is_the_uis_404_while_the_store_is_being_reopened() -> None:
    def reopening(tenant: str | None) -> Any:  # what the receiver's provider raises while it reopens the store
        raise StoreUnavailable("the store is being reopened after a failure; retry shortly", 1.0)

    app = web.Application()
    add_ui_routes(app, reopening)
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        page = await client.get("/ui/nonexistent")
        assert page.status == 404 and "no page at /ui/nonexistent" in await page.text()
        reply = await client.get("/ui/api/nonexistent")
        assert reply.status == 404 and "no UI API endpoint" in (await reply.json())["error"]
        known = await client.get("/ui/runs")  # a page that reads the store still says why it cannot
        assert known.status == 503 and "being reopened" in await known.text()
