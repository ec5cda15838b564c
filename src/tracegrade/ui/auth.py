"""The UI's side of the receiver's token rule: a browser proves the token once and then carries a cookie.

A browser cannot send ``Authorization: Bearer`` when it follows a link, so the token is accepted once, from
the sign-in form or a ``?token=`` link, checked with the receiver's own ``authorize`` function, and kept in
an HttpOnly, SameSite=Strict cookie scoped to ``/ui``: scripts cannot read it and other sites cannot make
the browser send it. Every request, page or API, is then checked with the same ``authorize`` again (an
``Authorization`` header, as the CLI sends, takes precedence over the cookie), which names the tenant whose
rows the request reads. Without a configured token ``authorize`` accepts everything and so does the UI.
"""

from __future__ import annotations

from aiohttp import web

from tracegrade.ingest.tokens import Authorize

__all__ = ["COOKIE", "Authorize", "check", "credential", "forget", "remember", "signed_in"]

COOKIE = "tracegrade_ui_token"


def credential(request: web.Request) -> str | None:
    """The ``Authorization`` value a request carries: its header, else one made from the UI cookie."""
    header = request.headers.get("Authorization")
    if header:
        return header
    token = request.cookies.get(COOKIE)
    return f"Bearer {token}" if token else None


def check(request: web.Request, authorize: Authorize | None) -> str | None:
    """The tenant of the request's token (None when no token is needed); raises (what ``authorize`` raises)
    unless the request carries a token in force."""
    return authorize(credential(request)) if authorize is not None else None


def remember(response: web.StreamResponse, request: web.Request, token: str) -> None:
    """Keep a checked token in the UI cookie (Secure when the page came over TLS)."""
    response.set_cookie(COOKIE, token, path="/ui", httponly=True, samesite="Strict", secure=request.secure)


def forget(response: web.StreamResponse) -> None:
    """Drop the UI cookie: the browser is signed out."""
    response.del_cookie(COOKIE, path="/ui")


def signed_in(request: web.Request) -> bool:
    """Does the browser carry the UI cookie (and so has something to sign out of)?"""
    return bool(request.cookies.get(COOKIE))
