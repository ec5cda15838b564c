"""``tracegrade serve`` answering /healthz as receivers did before it named its server (``{"status": "ok"}``, no
``server`` field): a receiver not yet restarted during an upgrade, for a client from after it. Everything else is
today's receiver. Run in the server's process: ``ServerProcess(store, launch=LAUNCH)``."""

from __future__ import annotations

import json

from aiohttp import web

from tracegrade.cli.main import main
from tracegrade.ingest.http_app import HttpFrontEnd

__all__ = ["LAUNCH", "serve"]

LAUNCH = "from tests.support.receiver_before_server_field import serve; serve()"


def serve() -> None:
    """The CLI, with /healthz's answer stripped of the field receivers from before it did not send."""
    healthz = HttpFrontEnd._healthz

    async def healthz_before_server_field(self: HttpFrontEnd, request: web.Request) -> web.Response:
        answer = await healthz(self, request)
        body = json.loads(answer.body)  # type: ignore[arg-type]
        del body["server"]
        return web.json_response(body)

    HttpFrontEnd._healthz = healthz_before_server_field  # type: ignore[method-assign]
    main()
