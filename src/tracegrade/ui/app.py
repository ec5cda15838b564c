"""The web UI as aiohttp routes: ``add_ui_routes`` mounts the pages, their JSON API and the static assets at ``/ui/``.

``tracegrade serve`` mounts it on its HTTP port over the receiver's store and token check; ``tracegrade ui``
mounts it on a store file opened read-only. Store reads are blocking DuckDB calls, so every handler runs
its reads on the loop's thread pool; the store provider is called per request, with the tenant the
request's token names, because each tenant reads its own rows and a receiver reopens its store after a
failure (the provider then raises, and the UI answers 503 until the store is back). Inside ``serve`` a request
first waits on the loop for one of the receiver's query turns, holding no thread, and its reads then run in that
turn, one after another: a page's several queries wait once, not each for a turn of its own while holding a thread.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Awaitable, Callable
from importlib import resources
from typing import Any, Protocol, runtime_checkable
from urllib.parse import urlencode

from aiohttp import web

from tracegrade.errors import QueryCancelled, QueryPreempted, QueryRefused, StoreError, TracegradeError
from tracegrade.ingest.expect_continue import add_post, ask_for_body, read_body
from tracegrade.json_input import parse_json
from tracegrade.store import TraceStore
from tracegrade.store.results import json_safe
from tracegrade.store.tenant_scope import TenantStore
from tracegrade.ui import api, pages
from tracegrade.ui.auth import SIGN_IN_PATH, Authorize, UiAccess, check, forget, remember, signed_in
from tracegrade.ui.openapi import openapi_document

__all__ = ["MAX_REQUEST_LINE", "SQL_TIMEOUT", "add_ui_routes", "redirect_to_ui"]

StoreProvider = Callable[[str | None], Any]  # the caller's tenant (None: no token needed) -> what it reads
SQL_TIMEOUT = 30.0  # seconds an ad-hoc query from the SQL page may run (the receiver's --query-timeout default)
# Longest request line (method, address, version) the HTTP servers that serve the UI accept. aiohttp's default,
# 8190 bytes, answered a hand-typed or bookmarked UI address beyond it (a long ?q= of the SQL page, a long text
# filter) with a bare "400 Bad Request: Got more than 8190 bytes"; browsers send addresses far longer. OTLP
# clients send short request lines and are unaffected; headers keep aiohttp's own limit.
MAX_REQUEST_LINE = 64 * 1024
LINK_FROM_ANOTHER_SITE = (
    "This sign-in link was followed from another site. Press Sign in to use its token (it replaces the one this "
    "browser uses, and may show another tenant's data), or go back."
)
WRONG_TOKEN = (
    "This server does not accept that token: check that all of it was pasted, or ask whoever runs the server for a "
    "current one."
)
CROSS_SITE_REFUSAL = "Sign in from this server's own page: a sign-in sent by another site is refused."
CROSS_SITE_SIGN_OUT = "Sign out from this server's own page: a sign-out sent by another site is refused."
_Reader = Callable[[Any, web.Request, Any], Any]  # (store, request, parsed body) -> page HTML or JSON data

# pages load only what this server serves: the one script and two stylesheets (inline styles are the
# waterfall's and the report case view's widths; no inline script runs)
_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
_HEADERS = {
    "Content-Security-Policy": _CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
_STATIC = {
    "ui.css": ("tracegrade.ui.static", "text/css"),
    "ui.js": ("tracegrade.ui.static", "text/javascript"),
    "report.css": ("tracegrade.reporters", "text/css"),  # the HTML report's look, shared by every page
}


@runtime_checkable
class _TakesTurns(Protocol):
    """What ``serve`` gives the UI to read (its GatedStore): a request's reads wait for a query turn on the loop."""

    async def take_turn(self, request: web.Request) -> Any: ...


class _PageOfError(TracegradeError):
    """A page's reader failed with ``cause``, and has its own page that says so (the diff page keeps its run
    pickers, so that the user can pick again), answered with the cause's status."""

    def __init__(self, cause: BaseException, page: str) -> None:
        super().__init__(str(cause))
        self.http_status = _status_of(cause)
        self.page = page


def _status_of(exc: BaseException) -> int:
    if isinstance(exc, api.NotFound):
        return 404
    if isinstance(exc, (api.BadRequest, QueryRefused)):
        return 400
    if isinstance(exc, QueryCancelled):  # a page's own reads ran past the time limit: the server's, not a bug
        return 503
    return int(getattr(exc, "http_status", 500))


def _strict_json(answer: Any) -> str:
    """``answer`` as JSON every parser accepts: a NaN or an infinity (a run's undefined score) becomes the string
    the API documents for it. Most answers hold none, so they are written once, without a second walk."""
    try:
        return json.dumps(answer, allow_nan=False)
    except ValueError:
        return json.dumps(json_safe(answer), allow_nan=False)


def _expected(exc: BaseException) -> bool:
    """An error to show the user (ours, or a refusal such as the receiver's 503); anything else is a bug."""
    return isinstance(exc, TracegradeError) or hasattr(exc, "http_status")


class _UI:
    def __init__(self, store_provider: StoreProvider, access: UiAccess | None) -> None:
        self.store_provider = store_provider
        self.access = access

    async def _read(self, request: web.Request, reader: _Reader, body: Any, tenant: str | None) -> Any:
        if reader in _STORELESS:  # answered without the store, so even while the receiver reopens it
            return reader(None, request, body)
        store = self.store_provider(tenant)  # may raise: the receiver is reopening its store
        loop = asyncio.get_running_loop()
        if not isinstance(store, _TakesTurns):  # a store of its own (tracegrade ui): nothing to wait for
            return await loop.run_in_executor(None, reader, store, request, body)
        held = await store.take_turn(request)  # may raise: no turn came within the receiver's time limit
        try:
            return await loop.run_in_executor(None, reader, held, request, body)
        finally:
            held.close()

    def page(self, reader: _Reader) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        async def handle(request: web.Request) -> web.StreamResponse:
            if "token" in request.query:
                return self._accept_link_token(request)
            try:
                tenant = check(request, self.access)
            except Exception as exc:
                status = int(getattr(exc, "http_status", 401))
                return _html(pages.login_page(_sign_in_problem(request, exc), request.path_qs), status)
            status = 200
            try:
                page = await self._read(request, reader, None, tenant)
            except Exception as exc:
                if not _expected(exc):
                    raise
                status = _status_of(exc)
                page = exc.page if isinstance(exc, _PageOfError) else pages.error_page(status, str(exc))
            return _html(pages.with_sign_out(page) if signed_in(request) else page, status)

        return handle

    def json(self, reader: _Reader, *, body: bool = False) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        async def handle(request: web.Request) -> web.StreamResponse:
            try:
                tenant = check(request, self.access)
            except Exception as exc:
                return _error(int(getattr(exc, "http_status", 401)), str(exc))
            try:
                parsed = await _json_body(request) if body else None
                answer = await self._read(request, reader, parsed, tenant)
                return web.json_response(answer, headers=_HEADERS, dumps=_strict_json)
            except Exception as exc:
                if not _expected(exc):
                    raise
                return _error(_status_of(exc), str(exc), getattr(exc, "retry_after", None))

        return handle

    def _accept_link_token(self, request: web.Request) -> web.StreamResponse:
        """``?token=…``: check it, keep it in the cookie and reload the page without it in the address.

        Any site can send a browser to such a link, with a token of its choosing that would replace the one the
        browser is signed in with (whose cookie such a visit does not even carry). So a link followed from
        another site signs in only once the user presses the sign-in form, filled in with the link's token."""
        token = request.query["token"]
        rest = {k: v for k, v in request.query.items() if k != "token"}
        target = request.path + ("?" + urlencode(rest) if rest else "")
        if _cross_site(request):
            return _html(pages.login_page(LINK_FROM_ANOTHER_SITE, target, token))
        return self._sign_in(request, token, target)

    def _sign_in(self, request: web.Request, token: str, target: str) -> web.StreamResponse:
        """Check ``token``; if it is good, keep it in the cookie and go to ``target``, else show the login page."""
        try:
            if self.access is not None:
                self.access.authorize(f"Bearer {token}")
        except Exception as exc:
            status = int(getattr(exc, "http_status", 401))
            # the receiver's words for a wrong bearer token speak of headers: the user pasted a token
            return _html(pages.login_page(WRONG_TOKEN if status == 401 else str(exc), target), status)
        response = web.HTTPSeeOther(target, headers=_HEADERS)
        remember(response, request, token)
        return response

    async def login(self, request: web.Request) -> web.StreamResponse:
        if request.method == "GET":
            return _html(pages.login_page(None, _safe_next(request.query.get("next"))))
        if _cross_site(request):
            # another site's form would sign the browser in with a token of that site's choosing
            return _html(pages.login_page(CROSS_SITE_REFUSAL, "/ui/"), 403)
        await ask_for_body(request)  # (the failed-authentication limit may have asked for it already)
        form = await request.post()
        token, target = str(form.get("token") or ""), _safe_next(str(form.get("next") or ""))
        return self._sign_in(request, token, target)

    async def logout(self, request: web.Request) -> web.StreamResponse:
        if _cross_site(request):
            return _html(pages.login_page(CROSS_SITE_SIGN_OUT, "/ui/"), 403)
        response = web.HTTPSeeOther(SIGN_IN_PATH, headers=_HEADERS)
        forget(response)
        return response


def _sign_in_problem(request: web.Request, refusal: BaseException) -> str | None:
    """What the sign-in page says about a page request refused for ``refusal``: nothing to a browser that presented
    no credential (a first visit: the page says where the token comes from, not that a header is missing), else
    why (a sign-in no longer valid, a token that may not read, a wrong ``Authorization`` header)."""
    if not request.headers.get("Authorization") and not signed_in(request):
        return None
    return str(refusal)


def _cross_site(request: web.Request) -> bool:
    """Did another site's page send this request? Browsers say so (``Sec-Fetch-Site``, else ``Origin``);
    a client that says neither is not a browser, which no other site can drive."""
    fetch_site = request.headers.get("Sec-Fetch-Site")
    if fetch_site is not None:
        return fetch_site not in ("same-origin", "none")
    origin = request.headers.get("Origin")
    return origin is not None and origin != f"{request.scheme}://{request.host}"


def _safe_next(value: str | None) -> str:
    """Where to go after signing in: a path under /ui/ only (never another site)."""
    return value if value and value.startswith("/ui/") and not value.startswith("//") else "/ui/"


async def _json_body(request: web.Request) -> Any:
    # only JSON: a plain-text body is what another site's form can send without the browser asking first
    if request.content_type != "application/json":
        raise api.BadRequest(f"send the body as Content-Type: application/json, not {request.content_type}")
    try:
        return parse_json(await read_body(request))
    except (ValueError, UnicodeDecodeError) as exc:
        raise api.BadRequest(f"the body is not valid JSON: {exc}") from None


def _html(text: str, status: int = 200) -> web.Response:
    return web.Response(text=text, status=status, content_type="text/html", headers=_HEADERS)


def _error(status: int, message: str, retry_after: float | None = None) -> web.Response:
    """``message`` as the JSON API's error answer; ``retry_after``: seconds after which the request may be sent again
    (a refusal of the receiver's that is no fault of the request's)."""
    headers = _HEADERS if retry_after is None else {**_HEADERS, "Retry-After": str(max(1, math.ceil(retry_after)))}
    return web.json_response({"error": message}, status=status, headers=headers)


# --- readers: (store, request, body) -> data; they run on a worker thread -----------------------------


def _filters(request: web.Request) -> api.TraceFilters:
    return api.TraceFilters.from_mapping(request.query)


def _traces_data(store: Any, request: web.Request, _: Any) -> dict[str, Any]:
    q = request.query
    return api.list_traces(store, _filters(request), q.get("limit", 50), q.get("cursor") or None)


def _traces_html(store: Any, request: web.Request, _: Any) -> str:
    page = _traces_data(store, request, None)
    if request.query.get("fragment") == "rows":
        return pages.trace_rows(page["traces"], filtered=_filters(request).active(), next_cursor=page["next_cursor"])
    query = {k: v for k, v in request.query.items() if v and k != "fragment"}
    return pages.traces_page(page, _filters(request), api.facets(store), query)


def _trace_html(store: Any, request: web.Request, _: Any) -> str:
    return pages.trace_page(api.trace_detail(store, request.match_info["trace_id"]))


def _runs_html(store: Any, request: web.Request, _: Any) -> str:
    return pages.runs_page(api.list_runs(store))


def _run_html(store: Any, request: web.Request, _: Any) -> str:
    return pages.run_page(*api.run_report(store, request.match_info["run_id"]))


def _diff_html(store: Any, request: web.Request, _: Any) -> str:
    a, b = request.query.get("a") or None, request.query.get("b") or None
    runs = api.list_runs(store)
    ids = [r["run_id"] for r in runs]  # newest first
    if a is None and b is None and ids:
        b = ids[0]
    if b is None and a in ids:  # compare A with the run recorded just after it (none after the newest)
        b = ids[ids.index(a) - 1] if ids.index(a) > 0 else None
    if a is None and b is not None:  # compare with the run recorded just before B
        a = ids[ids.index(b) + 1] if b in ids and ids.index(b) + 1 < len(ids) else None
    try:
        diff = api.diff_runs(store, a, b) if a and b else None
    except (api.NotFound, api.BadRequest) as exc:  # an unknown or ambiguous run id: show it beside the pickers
        raise _PageOfError(exc, pages.diff_page(runs, a, b, None, str(exc))) from None
    return pages.diff_page(runs, a, b, diff)


def _sql_html(store: Any, request: web.Request, _: Any) -> str:
    return pages.sql_page(api.schema(store), request.query.get("q", ""))


def _sql_data(store: Any, request: web.Request, body: Any) -> dict[str, Any]:
    sql = body.get("sql") if isinstance(body, dict) else request.query.get("q")
    if not isinstance(sql, str):
        raise api.BadRequest('send the query as a JSON body {"sql": "SELECT ..."} or as ?q=SELECT ...')
    # an ad-hoc query can cost anything: on a local store it stops at a time limit, as the receiver's do
    timeout = SQL_TIMEOUT if isinstance(store, (TraceStore, TenantStore)) else None
    try:
        return api.run_sql(store, sql, timeout)
    except (QueryRefused, QueryPreempted):  # a refusal (400), or the receiver closing its store meanwhile (503)
        raise
    except StoreError as exc:  # the user's SQL failed (unknown column, type error…): their request to fix
        raise api.BadRequest(str(exc)) from None


def _run_data(store: Any, request: web.Request, _: Any) -> dict[str, Any]:
    row, report = api.run_report(store, request.match_info["run_id"])
    return {"run": row, "report": report.model_dump(mode="json")}


def _diff_data(store: Any, request: web.Request, _: Any) -> dict[str, Any]:
    a, b = request.query.get("a"), request.query.get("b")
    if not a or not b:
        raise api.BadRequest("give both runs: ?a=<run id>&b=<run id>")
    return api.diff_runs(store, a, b)


async def _strict_transport(request: web.Request, response: web.StreamResponse) -> None:
    """Over TLS, tell the browser to keep to HTTPS for this host: a later plain-HTTP visit would send the cookie's
    token in the clear (Secure keeps the cookie off it, but not a token typed into a page loaded over HTTP)."""
    if request.secure and request.path.startswith("/ui"):
        response.headers["Strict-Transport-Security"] = "max-age=31536000"


async def redirect_to_ui(request: web.Request) -> web.StreamResponse:
    """``/ui`` (and a UI-only server's ``/``) lead to the traces page."""
    raise web.HTTPFound("/ui/")


async def _static(request: web.Request) -> web.StreamResponse:
    name = request.match_info["name"]
    if name not in _STATIC:
        raise web.HTTPNotFound()
    package, content_type = _STATIC[name]
    text = resources.files(package).joinpath(name).read_text(encoding="utf-8")
    return web.Response(text=text, content_type=content_type, headers={"Cache-Control": "no-cache"})


async def _openapi(request: web.Request) -> web.StreamResponse:
    return web.json_response(openapi_document())


def add_ui_routes(
    app: web.Application,
    store_provider: StoreProvider,
    authorize: Authorize | None = None,
    authorize_session: Authorize | None = None,
) -> None:
    """Mount the UI at ``/ui/`` on ``app`` (before it starts).

    ``store_provider(tenant)`` returns what a caller of ``tenant`` reads (anything with ``query(sql, params)``);
    ``authorize`` receives an ``Authorization`` value and returns the caller's tenant or raises to refuse (the
    receiver's ``Intake.authorize``), or is None for an open UI (the provider then gets None);
    ``authorize_session`` does the same for the UI's cookie, whose value ``tokens.ui_session`` makes from a
    token (the receiver's ``Intake.authorize_ui_session``), and is needed with ``authorize``.
    """
    access = None
    if authorize is not None or authorize_session is not None:
        if authorize is None or authorize_session is None:
            raise ValueError("add_ui_routes takes authorize and authorize_session together (or neither: an open UI)")
        access = UiAccess(authorize, authorize_session)
    ui = _UI(store_provider, access)
    app.on_response_prepare.append(_strict_transport)
    router = app.router
    router.add_get("/ui", redirect_to_ui)
    router.add_get("/ui/", ui.page(_traces_html))
    router.add_get("/ui/traces/{trace_id}", ui.page(_trace_html))
    router.add_get("/ui/runs", ui.page(_runs_html))
    router.add_get("/ui/runs/{run_id}", ui.page(_run_html))
    router.add_get("/ui/diff", ui.page(_diff_html))
    router.add_get("/ui/sql", ui.page(_sql_html))
    add_post(app, SIGN_IN_PATH, ui.login, method="*")  # GET shows the form
    add_post(app, "/ui/logout", ui.logout)
    router.add_get("/ui/logout", _post_only)  # signing out changes state: never by a link (nor the 404 below)
    router.add_get("/ui/static/{name}", _static)
    router.add_get("/ui/api/openapi.json", _openapi)
    router.add_get("/ui/api/traces", ui.json(_traces_data))
    router.add_get("/ui/api/facets", ui.json(lambda store, request, _: api.facets(store)))
    router.add_get("/ui/api/traces/{trace_id}", ui.json(lambda s, r, _: api.trace_detail(s, r.match_info["trace_id"])))
    router.add_get(
        "/ui/api/traces/{trace_id}/spans/{span_id}",
        ui.json(lambda s, r, _: api.span_detail(s, r.match_info["trace_id"], r.match_info["span_id"])),
    )
    router.add_get("/ui/api/runs", ui.json(lambda s, r, _: {"runs": api.list_runs(s, r.query.get("limit", 100))}))
    router.add_get("/ui/api/runs/{run_id}", ui.json(_run_data))
    router.add_get(
        "/ui/api/runs/{run_id}/failing", ui.json(lambda s, r, _: api.failing_cases(s, r.match_info["run_id"]))
    )
    router.add_get("/ui/api/diff", ui.json(_diff_data))
    router.add_get("/ui/api/sql", ui.json(_sql_data))
    add_post(app, "/ui/api/sql", ui.json(_sql_data, body=True))
    router.add_get("/ui/api/schema", ui.json(lambda s, r, _: {"tables": api.schema(s)}))
    # anything else under /ui: the UI's own 404 (JSON under /ui/api/, else a page), not the receiver's OTLP one
    router.add_get("/ui/api/{rest:.*}", ui.json(_no_endpoint))
    router.add_get("/ui/{rest:.*}", ui.page(_no_page))


async def _post_only(request: web.Request) -> web.StreamResponse:
    raise web.HTTPMethodNotAllowed(request.method, ["POST"])


def _no_endpoint(store: Any, request: web.Request, _: Any) -> Any:
    raise api.NotFound(f"no UI API endpoint at {request.path}; /ui/api/openapi.json lists them")


def _no_page(store: Any, request: web.Request, _: Any) -> Any:
    raise api.NotFound(f"no page at {request.path}: the UI has traces (/ui/), runs (/ui/runs), diff and SQL pages")


# readers that read nothing from the store: a path with no page is a 404 whether or not the store is open
_STORELESS: frozenset[_Reader] = frozenset({_no_endpoint, _no_page})
