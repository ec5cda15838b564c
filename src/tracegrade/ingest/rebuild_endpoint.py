"""``POST /v1/rebuild``: map stored traces again with this receiver's trajectory mapper while it holds the store file
and goes on taking exports (``tracegrade rebuild`` on a file a receiver holds asks it so).

The body is ``{"all": false, "tenant": null, "batch": null}``, as the command's options: every trajectory or only
those an older mapper built, one tenant's or every tenant's, and how many traces each step rebuilds and commits.
Through a tokens file each token is one tenant's, and rebuilds that tenant's traces only (another tenant named is
refused, 403); the token needs the ``record`` scope, the one that writes what is derived from the spans. Spans are
mapped ``--mapping-batch-bytes`` (the receiver's) at a time.

The answer streams as the rebuild goes, one JSON line each (``store.rebuild_progress``): the count of traces, then
each step once committed, then ``{"done": true}``, or ``{"error": …}`` saying why it ended early (the steps before
it stay committed: the same request again goes on with the traces still out of date). Streaming rather than one answer
at the end keeps a rebuild of hours from outliving any client or proxy timeout, and needs no job for a client to
poll: the client's time limit is per step. One rebuild runs at a time (another gets 409); it takes turns with the
receiver's own builds a claim at a time (``rebuilder.build_turn``) and with reopening the store (a purge, a failure)
a step at a time. A stop of the receiver (SIGTERM) or a client that hangs up ends it after the step in progress.
A lake is rebuilt beside its receivers, so its receivers answer 400.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from aiohttp import web

from tracegrade.errors import StoreError
from tracegrade.ingest.expect_continue import add_post
from tracegrade.ingest.json_posts import Refusal, error_response, read_json_post
from tracegrade.ingest.tokens import Authorize
from tracegrade.json_input import parse_json
from tracegrade.store.outdated import RebuildScope, RebuiltStep, rebuild_steps
from tracegrade.store.rebuild_progress import MAX_BATCH, RebuildDone, error_line, progress_line, start_rebuild
from tracegrade.store.tenancy import check_tenant_name

if TYPE_CHECKING:
    from tracegrade.store.backend import StoreBackend

__all__ = ["RebuildRequests"]

ON_A_LAKE = (
    "this receiver's store is a lake, which is rebuilt beside its receivers: run `tracegrade rebuild --store "
    "<the lake> --lake-data <its data path>`"
)
SHAPE = '{"all": false, "tenant": null, "batch": null}'

log = logging.getLogger(__name__)


class RebuildRequests:
    """The rebuilds asked of a receiver, one at a time, on the store ``store()`` returns (it raises what has an
    ``http_status`` while the store is being reopened; None: a lake). ``store_turn`` is held around each step (the
    receiver holds it to close and reopen the store); ``stopping()`` says the receiver is stopping; ``per_tenant()``
    whether each token is one tenant's; ``mapping_batch_bytes`` the receiver's."""

    def __init__(
        self,
        store: Callable[[], StoreBackend] | None,
        store_turn: asyncio.Lock,
        stopping: Callable[[], bool],
        per_tenant: Callable[[], bool],
        mapping_batch_bytes: int,
    ) -> None:
        self._store = store
        self._store_turn = store_turn
        self._stopping = stopping
        self._per_tenant = per_tenant
        self._mapping_batch_bytes = mapping_batch_bytes
        self._idle = asyncio.Event()
        self._idle.set()

    def add_route(self, app: web.Application, authorize: Authorize) -> None:
        """Add ``POST /v1/rebuild`` to ``app`` (before it starts)."""

        async def rebuild(request: web.Request) -> web.StreamResponse:
            try:
                tenant, body = await read_json_post(request, authorize, SHAPE, f"send {SHAPE}", self._ready)
                scope, step = self._parse(body, tenant)
                self._ready()  # again: another rebuild may have started while this one's body came
            except Refusal as refusal:
                return refusal.response()
            except ValueError as exc:
                return error_response(400, str(exc))
            assert self._store is not None  # _ready() refused a lake
            try:
                store = self._store()
            except Exception as exc:  # the store is being reopened, or the receiver stops: retryable
                status = getattr(exc, "http_status", None)
                if status is None:
                    raise
                return error_response(status, str(exc))
            self._idle.clear()
            try:
                return await self._stream(request, store, scope, step)
            finally:
                self._idle.set()

        add_post(app, "/v1/rebuild", rebuild)

    def _ready(self) -> None:
        """Refuse what needs no body: a lake (400), a rebuild under way (409)."""
        if self._store is None:
            raise Refusal(400, ON_A_LAKE)
        if not self._idle.is_set():
            raise Refusal(
                409,
                "a rebuild of the stored trajectories is under way already (one runs at a time): wait for it "
                "to end, then send the request again to rebuild what it did not select",
            )

    async def ended(self) -> None:
        """Wait until no rebuild runs (a stop calls this once ``stopping()`` is true: the one running ends after
        its step in progress)."""
        await self._idle.wait()

    def _parse(self, body: bytes, caller: str) -> tuple[RebuildScope, int | None]:
        """The scope and step size asked for, of the caller's tenant alone when tokens are each one tenant's."""
        try:
            document = parse_json(body or b"{}")
        except (ValueError, UnicodeDecodeError) as exc:
            raise ValueError(f"the body is not valid JSON: {exc}; send {SHAPE}") from None
        if not isinstance(document, dict):
            raise ValueError(f"the body must be a JSON object {SHAPE}")
        unknown = set(document) - {"all", "tenant", "batch"}
        if unknown:
            raise ValueError(f"unknown keys {sorted(unknown)}; only all, tenant and batch may be given: send {SHAPE}")
        every, tenant, step = document.get("all", False), document.get("tenant"), document.get("batch")
        if not isinstance(every, bool):
            raise ValueError(f"$.all must be true or false; got {every!r}"[:200])
        if tenant is not None:
            tenant = check_tenant_name(tenant, "$.tenant")
        if step is not None and (isinstance(step, bool) or not isinstance(step, int) or not 1 <= step <= MAX_BATCH):
            raise ValueError(f"$.batch must be a whole number from 1 to {MAX_BATCH:,}; got {step!r}"[:200])
        if self._per_tenant():
            if tenant not in (None, caller):
                raise Refusal(
                    403,
                    f"this token is tenant {caller}'s: it rebuilds that tenant's traces only, not tenant "
                    f"{tenant}'s; leave the tenant out, or use a token of tenant {tenant}",
                )
            tenant = caller
        return RebuildScope(every=every, tenant=tenant), step

    async def _stream(
        self, request: web.Request, store: StoreBackend, scope: RebuildScope, step: int | None
    ) -> web.StreamResponse:
        """Rebuild, each step in an executor thread, its progress written as it goes."""
        loop = asyncio.get_running_loop()
        try:
            start = await loop.run_in_executor(
                None, lambda: start_rebuild(store, scope, name_tenants=not self._per_tenant())
            )
        except StoreError as exc:
            return error_response(503, f"counting the traces to rebuild failed: {exc}; send the request again")
        response = web.StreamResponse(headers={"Content-Type": "application/x-ndjson"})
        await response.prepare(request)
        await response.write(progress_line(start))
        if not start.total:
            await response.write(progress_line(RebuildDone()))
            return response
        log.warning(
            "rebuilding %d trace(s) with mapper revision %d, asked over HTTP", start.total, start.mapper_revision
        )
        steps = rebuild_steps(store, scope, step=step, max_bytes=self._mapping_batch_bytes)
        done = 0
        try:
            while True:
                rebuilt, why = await self._step(request, store, steps)
                if why is not None:
                    log.warning("the rebuild stopped after %d of %d trace(s): %s", done, start.total, why)
                    await response.write(error_line(why))
                    break
                if rebuilt is None:
                    log.warning("rebuilt the trajectories of %d trace(s), asked over HTTP", done)
                    await response.write(progress_line(RebuildDone()))
                    break
                done += rebuilt.traces
                await response.write(progress_line(rebuilt))
        except ConnectionError:  # the client hung up while a line was written: nothing more to tell it
            log.warning("the rebuild stopped after %d of %d trace(s): its client hung up", done, start.total)
        except Exception as exc:  # a step failed (a full disk, a failed store): the client is owed the reason
            log.error("the rebuild failed after %d of %d trace(s): %s", done, start.total, exc)
            await response.write(error_line(f"the rebuild failed: {exc}"))
        return response

    async def _step(
        self, request: web.Request, store: StoreBackend, steps: Iterator[RebuiltStep]
    ) -> tuple[RebuiltStep | None, str | None]:
        """The next step, done in an executor thread while the receiver does not close the store (None when none is
        left), or why no step may be taken now."""
        async with self._store_turn:
            why = self._why_stop(request, store)
            if why is not None:
                return None, why
            return await asyncio.get_running_loop().run_in_executor(None, next, steps, None), None

    def _why_stop(self, request: web.Request, store: StoreBackend) -> str | None:
        """Why the rebuild must not take another step, or None."""
        if self._stopping():
            return "the receiver is stopping"
        if request.transport is None or request.transport.is_closing():
            return "its client hung up"
        assert self._store is not None
        try:
            if self._store() is store:
                return None
        except Exception as exc:  # the store is being reopened (a purge, a failure)
            if getattr(exc, "http_status", None) is None:
                raise
        return "the store was closed and opened again meanwhile (a purge, or after a failure)"
