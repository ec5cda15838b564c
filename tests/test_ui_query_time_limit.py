"""A page whose reads run past the receiver's query time limit says so with 503 (the server could not answer in
time: try again, or raise --query-timeout), not 500: a soak run on a lake saw the runs page answer "Error 500 the
query was cancelled: it ran longer than its time limit of 3 s" under load. The store and the query gate are the
receiver's own, the gate's limit so short that every read is cancelled."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from tracegrade.ingest.query_gate import GatedStore, QueryGate
from tracegrade.store import TraceStore
from tracegrade.ui import add_ui_routes


async def test_a_page_whose_reads_run_out_of_time_answers_503(tmp_path: Path) -> None:
    gate = QueryGate(max_queries=1, timeout=1e-9)
    with TraceStore(tmp_path / "s.duckdb") as store:

        def reads(tenant: str | None) -> Any:  # as the receiver gives the UI its store
            return GatedStore(store, gate)

        app = web.Application()
        add_ui_routes(app, reads)
        async with TestClient(TestServer(app, host="127.0.0.1")) as client:
            for path in ("/ui/runs", "/ui/"):
                page = await client.get(path)
                text = await page.text()
                assert page.status == 503, (path, page.status, text[:300])
                assert "time limit" in text, text[:300]
            facets = await client.get("/ui/api/facets")
            assert facets.status == 503 and "time limit" in (await facets.json())["error"]
