"""Bearer tokens and the tenants they name: ``serve --token`` (one tenant) or ``serve --tokens FILE``.

The tokens file is YAML, one entry per tenant with its tokens (several, so a token can be rotated)::

    tenants:
      acme: [tok1, tok2]
      globex:
        - tok3
        - {token: tok4, scopes: [ingest]}

A request's token decides its tenant: what it sends is stored as that tenant's, and what it reads is that
tenant's alone. A token's scopes decide what it may do (``SCOPES``): a plain token may do everything, so an
exporter's token, which sits in every agent's environment, is best limited to ``ingest``. ``serve`` reloads
the file on SIGHUP; a file that does not load is refused with what is wrong and where, and the tokens in use
stay. Tokens are looked up by their SHA-256 digest, so the lookup takes the same time whichever token (or
none) a request carries.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal, NamedTuple

from tracegrade.errors import FileFormatError, InvalidValueError, MissingFileError, did_you_mean
from tracegrade.store.tenancy import DEFAULT_TENANT, check_tenant_name

__all__ = [
    "SCOPES",
    "SHORT_TOKEN_CHARS",
    "Authorize",
    "Grant",
    "Scope",
    "TokenTable",
    "TokensFileError",
    "check_token",
    "presented_token",
    "ui_session",
]

Scope = Literal["ingest", "read", "record", "forget", "purge", "judge"]

#: what a token may do, each scope with what it allows (the words finish "this token may not ...")
SCOPES: dict[Scope, str] = {
    "ingest": "send spans and logs (OTLP over gRPC and HTTP)",
    "read": "read the store (POST /v1/query: sql, traces, show, export; the web UI; the MCP tools)",
    "record": "record graded runs (POST /v1/runs: grade and worker through the server), or rebuild the stored "
    "trajectories from their spans (POST /v1/rebuild)",
    "forget": "delete traces and the runs that graded them (POST /v1/forget)",
    # its own scope: a purge rewrites the whole file, every tenant's rows, and pauses every tenant's exports and
    # queries meanwhile, so a tenant that may erase its own data need not be able to stall the others
    "purge": "purge the store file of the bytes deleted rows leave (POST /v1/purge), which pauses every tenant's "
    "exports and queries while it runs",
    "judge": "call this server's LLM judges (the MCP grade tool with LLM-judged criteria, paid by the server)",
}
EVERY_SCOPE = frozenset(SCOPES)

# An ``Authorization`` header value (or None) -> the caller's tenant; raises (an error with ``http_status``)
# to refuse. The receiver's is ``Intake.authorize``.
Authorize = Callable[[str | None], str]


class TokensFileError(InvalidValueError):
    """A tokens file that cannot be used: the message names the file, the entry and the fix; ``problems`` lists
    each ``(JSON path, what is wrong)``, as :class:`FileFormatError` does."""

    def __init__(self, path: str | Path, problems: list[tuple[str, str]]) -> None:
        self.problems = problems
        said = "; ".join(what if where == "$" else f"at {where}: {what}" for where, what in problems)
        super().__init__(f"tokens file {path}: {said}")


def check_token(token: object, where: str) -> str:
    """``token`` when it can be a bearer token (non-empty, no whitespace or control characters)."""
    if not isinstance(token, str) or not token or any(c.isspace() or not c.isprintable() for c in token):
        raise ValueError(f"{where}: a token must be a non-empty string without whitespace or control characters")
    return token


def presented_token(authorization: str) -> str:
    """The token of an ``Authorization`` value (``Bearer <token>``), else the value as it is: what a wrong
    credential counts as (``auth_throttle``), so that one token is one guess however it was sent."""
    scheme, _, token = authorization.strip().partition(" ")
    return token.strip() if scheme.lower() == "bearer" else authorization.strip()


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8")).digest()


def ui_session(token: str) -> str:
    """What the web UI's cookie holds for a signed-in ``token``: derived from it, but not the token, so a cookie
    that leaks opens the UI (until the token is changed) and not the OTLP and query endpoints, which take the
    token alone. Every receiver given the same token derives the same value, so it holds behind a load balancer."""
    return "s1." + hmac.new(token.encode("utf-8"), b"tracegrade web UI session", hashlib.sha256).hexdigest()


#: tokens shorter than this are reported at start: the receiver refuses an address after a few wrong guesses
#: (``auth_throttle``), but many addresses together can still find a short token by trying
SHORT_TOKEN_CHARS = 16


class Grant(NamedTuple):
    """What a token grants: its tenant, and the scopes (of ``SCOPES``) it may act in."""

    tenant: str
    scopes: frozenset[str]


class TokenTable:
    """What each bearer token grants (``grant_of``); ``open`` when no token is required."""

    def __init__(self, tenants: Mapping[str, Mapping[str, frozenset[str]]], source: str | None = None) -> None:
        """``tenants``: each tenant's tokens, each with its scopes."""
        self.source = source
        self._tenants = sorted(tenants)
        self._by_digest: dict[bytes, Grant] = {}
        self._by_session: dict[bytes, Grant] = {}  # by the digest of ``ui_session``'s value
        self._short = sorted({t for t, tokens in tenants.items() for token in tokens if len(token) < SHORT_TOKEN_CHARS})
        for tenant, tokens in tenants.items():
            for token, scopes in tokens.items():
                self._by_digest[_digest(token)] = self._by_session[_digest(ui_session(token))] = Grant(tenant, scopes)

    def short_token_warning(self) -> str | None:
        """What to tell the operator when a tenant has a token short enough to be guessed, else None."""
        if not self._short:
            return None
        return (
            f"tenant(s) {', '.join(self._short)} have a token of fewer than {SHORT_TOKEN_CHARS} characters, which "
            "anyone who can reach this server could find by trying; use long random tokens, e.g. "
            "python -c 'import secrets; print(secrets.token_urlsafe(24))'"
        )

    @classmethod
    def single(cls, token: str | None) -> TokenTable:
        """``--token``: one token for the one default tenant (None: no token, every request is the default tenant's)."""
        return cls({DEFAULT_TENANT: {token: EVERY_SCOPE} if token else {}})

    @classmethod
    def from_file(cls, path: str | Path) -> TokenTable:
        """Load a tokens file, read as every file tracegrade reads (a key given twice, a recursive alias or a pipe
        is refused); TokensFileError says what is wrong with it."""
        from tracegrade.models.file_text import read_json_file  # the models package is not needed to look tokens up

        try:
            document = read_json_file(path, "tokens", as_yaml=True)
        except FileFormatError as exc:
            raise TokensFileError(path, exc.problems) from None
        except MissingFileError:
            raise TokensFileError(path, [("$", "the file is not there (moved or deleted?); put it back")]) from None
        try:
            return cls(_tenants_of(document), str(path))
        except ValueError as exc:
            raise TokensFileError(path, [("$", str(exc))]) from None

    @property
    def per_tenant(self) -> bool:
        """The tokens come from a tokens file: each caller reads its own tenant's rows only. (With one
        ``--token``, or none, the receiver has one tenant and its caller reads the whole store.)"""
        return self.source is not None

    @property
    def open(self) -> bool:
        """No token is configured: every request is accepted as the default tenant's."""
        return not self._by_digest

    @property
    def tenants(self) -> list[str]:
        return list(self._tenants)

    def describe(self) -> str:
        """The tenants, how many tokens they have, and how many of those may not do everything."""
        limited = sum(grant.scopes != EVERY_SCOPE for grant in self._by_digest.values())
        tokens = f"{len(self._by_digest)} token{'s' * (len(self._by_digest) != 1)}"
        return f"tenants {', '.join(self._tenants)}; {tokens}, {limited} of them limited to some scopes"

    def grant_of(self, token: str) -> Grant | None:
        """What ``token`` grants, or None when it is not in force."""
        return self._by_digest.get(_digest(token))

    def grant_of_session(self, session: str) -> Grant | None:
        """What the token a UI cookie was made from (``ui_session``) grants, or None."""
        return self._by_session.get(_digest(session))


_EXAMPLE = (
    "write it as\ntenants:\n  acme: [token1, token2]\n  globex:\n    - token3\n    - {token: token4, scopes: [ingest]}"
)


def _token_entry(entry: Any, where: str) -> tuple[str, frozenset[str]]:
    """A token and its scopes: a plain token may do everything; ``{token: ..., scopes: [...]}`` what it lists."""
    if not isinstance(entry, dict):
        return check_token(entry, where), EVERY_SCOPE
    if set(entry) != {"token", "scopes"}:
        found = sorted(map(str, entry))
        raise ValueError(f"{where}: give a token alone, or {{token: ..., scopes: [...]}} (found keys {found})")
    scopes = entry["scopes"]
    if isinstance(scopes, str):
        scopes = [scopes]
    if not isinstance(scopes, list) or not scopes:
        raise ValueError(f"{where}.scopes: list one or more of {', '.join(SCOPES)}")
    for scope in scopes:
        if scope not in SCOPES:
            raise ValueError(
                f"{where}.scopes: unknown scope {scope!r}{did_you_mean(scope, SCOPES)}; the scopes are "
                f"{', '.join(SCOPES)}"
            )
    return check_token(entry["token"], f"{where}.token"), frozenset(scopes)


def _tenants_of(document: Any) -> dict[str, dict[str, frozenset[str]]]:
    """The tenants, tokens and scopes of a parsed tokens file; ValueError names the entry that is wrong."""
    if not isinstance(document, dict) or set(document) != {"tenants"}:
        found = sorted(map(str, document)) if isinstance(document, dict) else type(document).__name__
        raise ValueError(f"expected one key, 'tenants' (found {found}); {_EXAMPLE}")
    entries = document["tenants"]
    if not isinstance(entries, dict) or not entries:
        raise ValueError(f"'tenants' must map each tenant to a list of its tokens; {_EXAMPLE}")
    owners: dict[str, str] = {}
    tenants: dict[str, dict[str, frozenset[str]]] = {}
    for name, tokens in entries.items():
        check_tenant_name(name, "tenants")
        if isinstance(tokens, (str, dict)):
            tokens = [tokens]
        if not isinstance(tokens, list) or not tokens:
            raise ValueError(f"tenants.{name}: give a list of one or more tokens, e.g. {name}: [token1]")
        granted: dict[str, frozenset[str]] = {}
        for index, entry in enumerate(tokens):
            where = f"tenants.{name}[{index}]"
            token, scopes = _token_entry(entry, where)
            if token in owners and owners[token] != name:
                raise ValueError(
                    f"{where}: this token is listed for tenant {owners[token]!r} too; "
                    "a token must name exactly one tenant"
                )
            if granted.get(token, scopes) != scopes:
                raise ValueError(f"{where}: this token is listed twice with different scopes; list it once")
            owners[token] = name
            granted[token] = scopes
        tenants[name] = granted
    return tenants
