"""A page whose reads run past the receiver's query time limit says so with 503 (the server could not answer in
time: try again, or raise --query-timeout), not 500: a soak run on a lake saw the runs page answer "Error 500 the
query was cancelled: it ran longer than its time limit of 3 s" under load. As in test_ui_reopen_404.py, the store
provider raises what the receiver's reads raise then (the store's own QueryCancelled), which makes the failure
certain: a real time limit races the page's few quick queries."""

from __future__ import annotations

from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from tracegrade.errors import QueryCancelled
from tracegrade.ui import add_ui_routes

OUT_OF_TIME = "the query was cancelled: it ran longer than its time limit of 3 s (--query-timeout)"


async def test_a_page_whose_reads_run_out_of_time_answers_503() -> None:
    def out_of_time(tenant: str | None) -> Any:
        raise QueryCancelled(OUT_OF_TIME)

    app = web.Application()
    add_ui_routes(app, out_of_time)
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        for path in ("/ui/runs", "/ui/"):
            page = await client.get(path)
            text = await page.text()
            assert page.status == 503, (path, page.status, text[:300])
            assert "time limit of 3 s" in text, text[:300]
        facets = await client.get("/ui/api/facets")
        assert facets.status == 503 and "time limit of 3 s" in (await facets.json())["error"]
