"""The receiver's JSON endpoints (``POST /v1/forget`` here) answer an authorizer's refusal with its status and
message, and a fault in the authorizer itself with 500: a server bug must not read as "unauthorized"."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from tracegrade.ingest.forget_endpoint import add_forget_route
from tracegrade.ingest.intake import Forbidden, Unauthenticated


def _refusing(error: Exception) -> Callable[[str | None], str]:
    def authorize(header: str | None) -> str:
        raise error

    return authorize


def _no_store() -> object:
    raise AssertionError("a refused request must not reach the store")


@pytest.mark.parametrize(
    ("error", "status", "message"),
    [
        (Unauthenticated("invalid bearer token"), 401, "invalid bearer token"),
        (Forbidden("this token may not delete traces"), 403, "this token may not delete traces"),
        (RuntimeError("a bug in the authorizer"), 500, None),
    ],
)
async def test_the_authorizers_refusal_keeps_its_status_and_a_fault_is_500(
    error: Exception, status: int, message: str | None
) -> None:
    app = web.Application()
    add_forget_route(app, _no_store, _refusing(error))  # type: ignore[arg-type]
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        response = await client.post("/v1/forget", json={"trace_ids": ["0" * 32]})
        assert response.status == status
        if message is not None:
            assert (await response.json()) == {"error": message}
        else:
            assert "a bug in the authorizer" not in await response.text()  # the fault's details stay in the log


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            b'["abc"]',
            'the body must be a JSON object {"trace_ids": ["<trace id>", ...], "delete_runs": false}; got array',
        ),
        (b'{"trace_ids": "abc"}', "'trace_ids' must be a JSON array (got string): send {\"trace_ids\": ["),
        (b"{}", "'trace_ids' must be a JSON array (it is missing): send"),
        (b'{"trace_ids": [1]}', "$.trace_ids[0] must be a trace id (a string of 1 to"),
    ],
)
async def test_a_malformed_forget_body_is_told_what_is_wrong_with_it(body: bytes, message: str) -> None:
    app = web.Application()
    add_forget_route(app, _no_store, lambda header: "default")
    async with TestClient(TestServer(app)) as client:
        answer = await client.post("/v1/forget", data=body, headers={"Content-Type": "application/json"})
        assert answer.status == 400
        error = (await answer.json())["error"]
        assert message in error, error
        if body == b'{"trace_ids": [1]}':
            assert error.endswith("got 1")  # the number, not the string '1'
