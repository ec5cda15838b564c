"""``POST /v1/forget``: delete traces on request (a user's conversation, under privacy law) while a receiver
holds the store.

The body is ``{"trace_ids": ["<32 hex digits>", ...]}`` (at most ``MAX_FORGET_IDS``), with ``"delete_runs":
true`` to delete whole the runs people recorded that graded one of the traces; the traces are the caller's
tenant's (its bearer token decides, as on every endpoint). The answer, once the deletion is durable, is
``{"forgotten": {"traces": n, "spans": n, ..., "recorded_runs": n, "runs_kept": ["<run id>", ...]}}``: what
went (``traces`` counts those the store held anything of), and the recorded runs kept that hold a copy. A
forgotten trace stays forgotten: spans of it that are still on their way are dropped when they arrive
(``store.trace_deletion``).
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Callable
from typing import TYPE_CHECKING

from aiohttp import web

from tracegrade.errors import StoreError
from tracegrade.ingest.expect_continue import add_post
from tracegrade.ingest.json_posts import Refusal, error_response, json_object, read_json_post
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
    settle: Callable[[], object] = lambda: None,
) -> None:
    """Add ``POST /v1/forget`` to ``app`` (before it starts), deleting from the store ``store()`` returns at the
    time (a receiver reopens its store after a failure); ``on_forgotten`` hears what each request deleted.
    ``settle`` (on a worker thread, before each deletion) waits until what was acknowledged before the request is
    committed: the spans of an export acknowledged just before would otherwise be dropped only as they arrive,
    uncounted in the answer."""

    async def forget(request: web.Request) -> web.Response:
        try:
            tenant, body = await read_json_post(request, authorize, "the trace ids", "send fewer trace ids")
            trace_ids, delete_runs = _parse(body)
        except Refusal as refusal:
            return refusal.response()
        except ValueError as exc:
            return error_response(400, str(exc))
        try:
            target = store()
        except Exception as exc:  # the store is being reopened: retryable
            return error_response(getattr(exc, "http_status", 503), str(exc))
        try:
            forget = functools.partial(_settled_forget, settle, target, trace_ids, tenant, delete_runs)
            deleted = await asyncio.get_running_loop().run_in_executor(None, forget)
        except StoreError as exc:
            return error_response(
                503, f"forgetting the traces failed: {exc}; send the request again (it does no harm twice)"
            )
        on_forgotten(deleted)
        return web.json_response({"forgotten": deleted.as_dict()})

    add_post(app, "/v1/forget", forget)


def _settled_forget(
    settle: Callable[[], object], store: StoreBackend, trace_ids: list[str], tenant: str, delete_runs: bool
) -> Deleted:
    settle()
    return store.forget(trace_ids, tenant, delete_runs=delete_runs)


def _parse(body: bytes) -> tuple[list[str], bool]:
    """The trace ids, and whether to delete the recorded runs that graded them."""
    shape = '{"trace_ids": ["<trace id>", ...], "delete_runs": false}'
    document = json_object(body, shape, ("trace_ids", list), ("delete_runs",))
    delete_runs = document.get("delete_runs", False)
    if not isinstance(delete_runs, bool):
        raise ValueError(f"$.delete_runs must be true or false; got {json.dumps(delete_runs)[:80]}")
    return checked_trace_ids(document["trace_ids"], "$.trace_ids"), delete_runs
