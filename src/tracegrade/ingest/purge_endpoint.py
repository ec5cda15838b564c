"""``POST /v1/purge``: rewrite the DuckDB store file a receiver holds without the bytes of its deleted rows (of
forgotten or expired traces), so that they leave the disk while the receiver runs.

The body is ``{}``; the token needs the ``forget`` scope, the one that erases data. The receiver does the purge
itself (``ReceiverServer.purge_deleted``): exports and queries are refused retryably meanwhile, as while a
failed store is reopened, and nothing acknowledged is lost. The answer, once the file is replaced and the store
open again, is ``{"purged": {"bytes_before": n, "bytes_after": n}}``. One purge runs at a time: a request made
while one runs gets 409 at once (it does not wait: the purge under way will have removed what it would). A lake
is purged beside its receivers (``tracegrade maintain --purge-deleted``), so its receivers answer 400. A purge
whose copy did not fit on the disk is answered 507 Insufficient Storage (sent again, it fails alike until space is
freed; the store file is as it was); any other failure 500.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable

from aiohttp import web

from tracegrade.errors import StoreError
from tracegrade.ingest.disk_room import says_disk_full
from tracegrade.ingest.expect_continue import add_post
from tracegrade.ingest.json_posts import Refusal, error_response, read_json_post
from tracegrade.ingest.tokens import Authorize
from tracegrade.json_input import parse_json
from tracegrade.store.file_purge import Purged

__all__ = ["add_purge_route"]

ON_A_LAKE = (
    "this receiver's store is a lake, which is purged beside its receivers: run `tracegrade maintain --store "
    "<the lake> --lake-data <its data path> --purge-deleted`"
)


def add_purge_route(app: web.Application, purge: Callable[[], Awaitable[Purged]] | None, authorize: Authorize) -> None:
    """Add ``POST /v1/purge`` to ``app`` (before it starts); ``purge()`` purges the store file and gives its sizes
    (None: the store is a lake). Raises what has an ``http_status`` to refuse (a store being reopened: 503)."""
    under_way = False

    def ready() -> None:
        """Refuse what needs no body: a lake (400), a purge under way (409)."""
        if purge is None:
            raise Refusal(400, ON_A_LAKE)
        if under_way:
            raise Refusal(
                409, "a purge of the store file is under way already; its answer says the sizes (one runs at a time)"
            )

    async def purge_store(request: web.Request) -> web.Response:
        nonlocal under_way
        try:
            _, body = await read_json_post(request, authorize, "{}", "send {}", ready)
            _check_empty(body)
            ready()  # again: another purge may have started while this one's body came
        except Refusal as refusal:
            return refusal.response()
        except ValueError as exc:
            return error_response(400, str(exc))
        assert purge is not None  # ready() refused a lake
        under_way = True
        try:
            purged = await purge()
        except StoreError as exc:
            return _failed(str(exc))
        except Exception as exc:  # the store is being reopened, or the receiver stops: retryable
            status = getattr(exc, "http_status", None)
            if status is None:
                raise
            return _retryable(status, str(exc), getattr(exc, "retry_after", None))
        finally:
            under_way = False
        return web.json_response({"purged": {"bytes_before": purged.bytes_before, "bytes_after": purged.bytes_after}})

    add_post(app, "/v1/purge", purge_store)


def _check_empty(body: bytes) -> None:
    """The body is ``{}`` (an empty one too): a purge takes no parameters."""
    try:
        document = parse_json(body or b"{}")
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"the body is not valid JSON: {exc}; send {{}}") from None
    if document != {}:
        raise ValueError("a purge takes no parameters: send {}")


def _failed(reason: str) -> web.Response:
    """The answer to a purge that failed (the store is open again as it was): 507 when the disk lacked room."""
    if says_disk_full(reason):
        return error_response(
            507,
            f"{reason}. The disk holding the store file has too little room for the purge's copy of its live rows "
            "(up to the file's size); the file was left as it was, the store is open again and nothing was lost. "
            "Free space on that disk, then send the request again",
        )
    return error_response(500, f"{reason}; the store is open again and nothing was lost: send the request again")


def _retryable(status: int, message: str, retry_after: float | None) -> web.Response:
    response = error_response(status, message)
    if retry_after is not None:
        response.headers["Retry-After"] = str(max(1, math.ceil(retry_after)))
    return response
