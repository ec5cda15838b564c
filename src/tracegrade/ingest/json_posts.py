"""What the receiver's JSON endpoints beside OTLP and SQL share (``POST /v1/runs``, ``POST /v1/forget``): the
caller's tenant from its bearer token, a body of ``application/json`` only, asked for (``Expect: 100-continue``)
only once every check that needs none passed, and refusals as ``{"error": …}``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aiohttp import web

from tracegrade.errors import TracegradeError
from tracegrade.ingest.decode.checks import type_name
from tracegrade.ingest.expect_continue import read_body
from tracegrade.ingest.tokens import Authorize
from tracegrade.json_input import parse_json
from tracegrade.store.tenancy import DEFAULT_TENANT

__all__ = ["Refusal", "error_response", "json_object", "read_json_post"]


class Refusal(TracegradeError):
    """A request refused with an HTTP status and a message saying why."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status

    def response(self) -> web.Response:
        return error_response(self.status, str(self))


def error_response(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


async def read_json_post(
    request: web.Request,
    authorize: Authorize | None,
    what: str,
    when_too_large: str,
    ready: Callable[[], None] = lambda: None,
) -> tuple[str, bytes]:
    """The caller's tenant (``authorize`` given the ``Authorization`` header; ``DEFAULT_TENANT`` without it) and
    the body. Raises Refusal: the authorizer's refusal with its status (401, 403), 415 for a body that is not
    JSON (``what`` names what to send), ``ready()``'s (the endpoint's own checks that need no body, such as a 409),
    413 for one larger than the server takes (``when_too_large`` says what to do). A client waiting for
    ``100 Continue`` is told to send its body only once all but the last have passed."""
    tenant = DEFAULT_TENANT
    if authorize is not None:
        try:
            tenant = authorize(request.headers.get("Authorization"))
        except Exception as exc:
            status = getattr(exc, "http_status", None)
            if status is None:  # a fault of the server's own, not a refusal: it must not read as "unauthorized"
                raise
            raise Refusal(status, str(exc)) from None
    if request.content_type != "application/json":
        # a plain-text body is what another site's form can post without the browser asking first
        raise Refusal(415, f"send {what} as Content-Type: application/json, not {request.content_type}")
    ready()
    try:
        return tenant, await read_body(request)
    except web.HTTPRequestEntityTooLarge as exc:
        raise Refusal(413, f"the request is too large for this server ({exc.text}); {when_too_large}") from None


def json_object(body: bytes, shape: str, required: tuple[str, type], optional: tuple[str, ...] = ()) -> dict[str, Any]:
    """``body`` as a JSON object that holds the key ``required[0]`` with a value of type ``required[1]``, and
    no keys but the ``optional`` ones besides; ValueError says what is wrong (``shape`` shows the object wanted)."""
    try:
        document = parse_json(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"the body is not valid JSON: {exc}") from None
    key, kind = required
    if not isinstance(document, dict):
        raise ValueError(f"the body must be a JSON object {shape}; got {type_name(document)}")
    if not isinstance(document.get(key), kind):
        found = "it is missing" if key not in document else f"got {type_name(document[key])}"
        raise ValueError(f"'{key}' must be a JSON {type_name(kind())} ({found}): send {shape}")
    unknown = set(document) - {key, *optional}
    if unknown:
        accepted = [key, *optional]
        raise ValueError(f"unknown keys {sorted(unknown)}; only {', '.join(accepted)} may be given")
    return document
