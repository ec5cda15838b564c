"""The UI's side of the receiver's token rule: a browser proves the token once and then carries a cookie.

A browser cannot send ``Authorization: Bearer`` when it follows a link, so the token is accepted once, from
the sign-in form or a ``?token=`` link, checked with the receiver's own ``authorize`` function, and the browser
is given an HttpOnly, SameSite=Strict cookie scoped to ``/ui``: scripts cannot read it and other sites cannot
make the browser send it. The cookie holds a value derived from the token (``tokens.ui_session``), not the
token: it opens the UI and nothing else, until the token is changed. Every request, page or API, is then
checked again: an ``Authorization`` header, as the CLI sends, with ``authorize``, else the cookie with
``authorize_session``; either names the tenant whose rows the request reads. Without a configured token
``authorize`` accepts everything and so does the UI.
"""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web

from tracegrade.ingest.tokens import Authorize, presented_token, ui_session

__all__ = [
    "COOKIE",
    "SIGN_IN_PATH",
    "Authorize",
    "UiAccess",
    "check",
    "forget",
    "presented_credential",
    "remember",
    "signed_in",
]

COOKIE = "tracegrade_ui_session"
SIGN_IN_PATH = "/ui/login"  # where the sign-in form posts its token


@dataclass(frozen=True)
class UiAccess:
    """How the UI checks a caller: ``authorize`` an ``Authorization`` value, ``authorize_session`` a UI cookie;
    each returns the caller's tenant or raises (an error with ``http_status``) to refuse."""

    authorize: Authorize
    authorize_session: Authorize


def check(request: web.Request, access: UiAccess | None) -> str | None:
    """The tenant of the request's credential (None when no token is needed); raises (what ``access`` raises)
    unless the request carries a token in force, or a cookie made from one."""
    if access is None:
        return None
    header = request.headers.get("Authorization")
    session = request.cookies.get(COOKIE)
    if session and not header:
        return access.authorize_session(session)
    return access.authorize(header)


def remember(response: web.StreamResponse, request: web.Request, token: str) -> None:
    """Sign the browser in with a checked token (the cookie is Secure when the page came over TLS)."""
    response.set_cookie(COOKIE, ui_session(token), path="/ui", httponly=True, samesite="Strict", secure=request.secure)


def forget(response: web.StreamResponse) -> None:
    """Drop the UI cookie: the browser is signed out."""
    response.del_cookie(COOKIE, path="/ui")


def signed_in(request: web.Request) -> bool:
    """Does the browser carry the UI cookie (and so has something to sign out of)?"""
    return bool(request.cookies.get(COOKIE))


async def presented_credential(request: web.Request) -> tuple[bool, str | None]:
    """Did ``request`` present a credential, and which: everything it presented that some handler checks, its
    ``Authorization`` header(s), a ``?token=`` link's token, a sign-in form's (``None`` when the form cannot be
    read again) and the UI cookie, together. The receiver's limit on wrong credentials
    (``ingest/auth_throttle.py``) counts a refused request that presented one; a request that presented none (a
    browser's first visit) guessed nothing. Meant for after the handler: the form it reads is the one the
    handler read (aiohttp keeps it), never a second body.

    All of them, not the first found: the UI checks a link's or a form's token whatever header comes with it,
    so a request whose credential were its header alone could hold one wrong header still and try a new token
    in the link or the form each time, every try counted as the same repeated guess. One token alone is the
    token itself, so one token is one guess whether it came in a header, a link or the form."""
    parts: list[str] = []
    header = ",".join(request.headers.getall("Authorization", ()))
    if header:
        parts.append(presented_token(header))
    if "token" in request.query and request.path.startswith("/ui"):
        parts.append(request.query["token"])
    if request.method == "POST" and request.path == SIGN_IN_PATH:
        try:
            form = await request.post()
        except Exception:  # an unreadable form is still a sign-in attempt, just not one to tell apart
            return True, None
        parts.append(str(form.get("token") or ""))
    session = request.cookies.get(COOKIE)
    if session:
        parts.append("cookie " + session)
    if not parts:
        return False, None
    return True, "\n".join(parts)  # no token holds a newline (check_token): two requests of tokens never collide
