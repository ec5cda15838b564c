"""``POST /v1/forget``: delete traces on request (a user's conversation, under privacy law) while a receiver
holds the store.

The body is ``{"trace_ids": ["<32 hex digits>", ...]}`` (at most ``MAX_FORGET_IDS``); the traces are the
caller's tenant's (its bearer token decides, as on every endpoint). The answer, once the deletion is durable,
is ``{"forgotten": {"traces": n, "spans": n, ...}}``: what went (``traces`` counts those the store held
anything of). A forgotten trace stays forgotten: spans of it that are still on their way are dropped when
they arrive (``store.trace_deletion``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import TYPE_CHECKING

from aiohttp import web

from tracegrade.errors import StoreError
from tracegrade.ingest.tokens import Authorize
from tracegrade.store.trace_deletion import Deleted, checked_trace_ids

if TYPE_CHECKING:
    from tracegrade.store.backend import StoreBackend

__all__ = ["add_forget_route"]


def add_forget_route(
    app: web.Application,
    store: Callable[[], StoreBackend],
    authorize: Authorize,
    on_forgotten: Callable[[Deleted], object] = lambda deleted: None,
) -> None:
    """Add ``POST /v1/forget`` to ``app`` (before it starts), deleting from the store ``store()`` returns at the
    time (a receiver reopens its store after a failure); ``on_forgotten`` hears what each request deleted."""

    async def forget(request: web.Request) -> web.Response:
        try:
            tenant = authorize(request.headers.get("Authorization"))
        except Exception as exc:
            return _error(getattr(exc, "http_status", 401), str(exc))
        if request.content_type != "application/json":
            # a plain-text body is what another site's form can post without the browser asking first
            return _error(415, f"send the trace ids as Content-Type: application/json, not {request.content_type}")
        try:
            trace_ids = _parse(await request.read())
        except ValueError as exc:
            return _error(400, str(exc))
        except web.HTTPRequestEntityTooLarge as exc:
            return _error(413, f"the request is too large for this server ({exc.text}); send fewer trace ids")
        try:
            target = store()
        except Exception as exc:  # the store is being reopened: retryable
            return _error(getattr(exc, "http_status", 503), str(exc))
        try:
            deleted = await asyncio.get_running_loop().run_in_executor(None, target.forget, trace_ids, tenant)
        except StoreError as exc:
            return _error(503, f"forgetting the traces failed: {exc}; send the request again (it does no harm twice)")
        on_forgotten(deleted)
        return web.json_response({"forgotten": deleted.as_dict()})

    app.router.add_post("/v1/forget", forget)


def _parse(body: bytes) -> list[str]:
    try:
        document = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"the body is not valid JSON: {exc}") from None
    if not isinstance(document, dict) or not isinstance(document.get("trace_ids"), list):
        raise ValueError('the body must be a JSON object {"trace_ids": ["<trace id>", ...]}')
    unknown = set(document) - {"trace_ids"}
    if unknown:
        raise ValueError(f"unknown keys {sorted(unknown)}; only trace_ids is accepted")
    return checked_trace_ids(document["trace_ids"], "$.trace_ids")


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)
