"""The limit on failed authentication: a client that presents too many wrong credentials is refused a while.

Without it a client could try tokens as fast as the receiver answers, on every port. Each client address
(``client_address``) may present ``limit`` wrong credentials (bearer tokens, UI cookies, sign-in forms, over
gRPC and HTTP alike) in a window of ``window`` seconds that starts with its first; all may come at once.
Once it has, every request from that address is refused with :class:`TooManyAuthFailures` (HTTP 429 with
``Retry-After``, gRPC ``RESOURCE_EXHAUSTED`` with a ``RetryInfo``, the throttling answers the OTLP
specification has exporters retry after the delay) until the window ends, whatever credential it carries:
were a right token served meanwhile, its answer would tell the guesser which guess was right. Requests
from other addresses are never refused for it, and a success does not reset an address's count (a caller
holding one tenant's token must not earn fresh guesses at another's).

A wrong credential counts once: a client that repeats the same one (an exporter left with a token that was
rotated away, a browser with a stale cookie) tries nothing new, so repeating it does not bring the refusal
nearer and does not shut out the good clients behind the same address. Each address remembers the last few
wrong credentials it presented as 64-bit keyed hashes (never the credential).

The table of addresses is bounded (``max_clients``, least recently failed dropped first), and an address
that never failed costs nothing: a look-up and no entry. An address reaching the limit is logged as a WARNING
naming it and its count, and then at most once a minute while it is refused; the receiver's metrics count
failures and refusals by protocol (never by address, which would grow without bound).
"""

from __future__ import annotations

import logging
import math
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING

import grpc

from tracegrade.ingest.client_address import TrustedProxies
from tracegrade.ingest.intake import ExportRefused

if TYPE_CHECKING:
    from tracegrade.ingest.metrics import ReceiverMetrics
    from tracegrade.ingest.settings import ServeSettings

__all__ = [
    "DEFAULT_LIMIT",
    "DEFAULT_WINDOW",
    "MAX_CLIENTS",
    "MAX_WINDOW",
    "AuthThrottle",
    "TooManyAuthFailures",
]

DEFAULT_LIMIT = 10  # wrong credentials per window: a mistyped token or two, never a search
DEFAULT_WINDOW = 60.0  # seconds
# a day: the refusal states its delay in whole seconds (Retry-After, RetryInfo), which an infinite window has not,
# and an address refused for longer is better unblocked by hand anyway (restart the receiver)
MAX_WINDOW = 86_400.0
# ~200 bytes an entry: 50,000 addresses trying at once hold about 10 MB, and an attacker with more addresses than
# that gains little, since each one gets only ``limit`` guesses a window anyway
MAX_CLIENTS = 50_000
REMEMBERED = 4  # wrong credentials an address remembers, so that repeating one does not count again
LOG_EVERY = 60.0  # seconds between two warnings about one address

log = logging.getLogger(__name__)


class TooManyAuthFailures(ExportRefused):
    """A request from an address that presented too many wrong credentials lately (HTTP 429, gRPC
    ``RESOURCE_EXHAUSTED`` with a retry delay): refused, unread, until its window ends."""

    http_status = 429
    grpc_code = grpc.StatusCode.RESOURCE_EXHAUSTED


class _Client:
    """One address's failures in its current window (slots: the table holds many of these)."""

    __slots__ = ("failures", "logged_at", "recent", "refused", "window_start")

    def __init__(self, now: float) -> None:
        self.window_start = now
        self.failures = 0
        self.refused = 0
        self.recent: list[int] = []
        self.logged_at = -math.inf


class AuthThrottle:
    """Counts wrong credentials per client address and refuses an address that presented ``limit`` of them,
    until ``window`` seconds after its first; ``limit`` 0 turns the limit off.

    ``clock`` (monotonic seconds) can be replaced, so tests drive the window without waiting. Used from the
    receiver's event loop only, so nothing here needs a lock.
    """

    def __init__(
        self,
        limit: int = DEFAULT_LIMIT,
        window: float = DEFAULT_WINDOW,
        *,
        proxies: TrustedProxies | None = None,
        metrics: ReceiverMetrics | None = None,
        clock: Callable[[], float] = time.monotonic,
        max_clients: int = MAX_CLIENTS,
    ) -> None:
        if limit < 0 or not 0 < window <= MAX_WINDOW or max_clients < 1:  # ``not``: a NaN window is refused too
            raise ValueError(
                f"limit {limit} (0 or more), window {window} (above 0, at most {MAX_WINDOW:g} s), "
                f"max_clients {max_clients} (1+)"
            )
        self.limit = limit
        self.window = window
        self.proxies = proxies or TrustedProxies()
        self.clock = clock
        self._metrics = metrics
        self._max_clients = max_clients
        self._clients: OrderedDict[str, _Client] = OrderedDict()

    @classmethod
    def from_settings(cls, settings: ServeSettings, metrics: ReceiverMetrics | None = None) -> AuthThrottle:
        """The limit ``serve`` sets: ``--auth-failure-limit`` per ``--auth-failure-window``, ``--trusted-proxies``."""
        return cls(
            settings.auth_failure_limit,
            settings.auth_failure_window,
            proxies=TrustedProxies.parse(settings.trusted_proxies),
            metrics=metrics,
        )

    @property
    def tracked(self) -> int:
        """Addresses the table holds now (at most ``max_clients``)."""
        return len(self._clients)

    def client(self, peer: str, forwarded_for: list[str] | tuple[str, ...] = ()) -> str:
        """The address a request from ``peer`` counts under (``X-Forwarded-For`` only from a trusted proxy)."""
        return self.proxies.client_of(peer, forwarded_for)

    def check(self, address: str, protocol: str) -> None:
        """Raise TooManyAuthFailures while ``address`` is over the limit (it says for how long); else nothing."""
        entry = self._clients.get(address)
        if entry is None or entry.failures < self.limit or self.limit == 0:
            return
        now = self.clock()
        left = entry.window_start + self.window - now
        if left <= 0:
            return  # the window is over: the next failure starts a new one
        entry.refused += 1
        if self._metrics is not None:
            self._metrics.auth_throttled.inc(protocol=protocol)
        self._warn(address, entry, now, left)
        raise TooManyAuthFailures(
            f"too many wrong credentials from {address}: {entry.failures} in {self.window:g} s (the limit, "
            f"--auth-failure-limit); every request from this address is refused for {math.ceil(left)} s more. "
            "Check the token this client sends",
            left,
        )

    def failed(self, address: str, credential: str | None, protocol: str) -> None:
        """Count a request from ``address`` refused for a wrong ``credential`` (None: one that cannot be told
        apart from others, such as a sign-in form's, which always counts)."""
        if self._metrics is not None:
            self._metrics.auth_failures.inc(protocol=protocol)
        if self.limit == 0:
            return
        now = self.clock()
        entry = self._clients.get(address)
        if entry is None:
            entry = self._clients[address] = _Client(now)
            if len(self._clients) > self._max_clients:
                self._clients.popitem(last=False)
        else:
            self._clients.move_to_end(address)
            if now - entry.window_start >= self.window:
                entry.window_start, entry.failures, entry.refused = now, 0, 0
        if credential is not None:
            # a keyed hash (Python's string hash, seeded per process): a guesser cannot make two guesses collide
            fingerprint = hash(credential)
            if fingerprint in entry.recent:
                return
            entry.recent.append(fingerprint)
            del entry.recent[:-REMEMBERED]
        entry.failures += 1
        if entry.failures == self.limit:
            self._warn(address, entry, now, entry.window_start + self.window - now)

    def _warn(self, address: str, entry: _Client, now: float, left: float) -> None:
        if now - entry.logged_at < LOG_EVERY:
            return
        entry.logged_at = now
        log.warning(
            "client %s presented %d wrong credentials (--auth-failure-limit %d per %g s): its requests are refused "
            "for %.0f s more (%d so far); someone guessing tokens, or a client given several wrong ones",
            address,
            entry.failures,
            self.limit,
            self.window,
            max(left, 0.0),
            entry.refused,
        )
