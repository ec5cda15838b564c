"""Which API each judge endpoint serves, learnt from its first reply and remembered for the process.

``api_style="responses"`` (the default) calls ``POST /v1/responses``, which many OpenAI-compatible servers
(llama.cpp's server, TGI, many vLLM deployments) do not serve: they only have chat completions. The first
responses call to an endpoint is its probe. While it is in flight, other responses calls to the same
endpoint wait for its verdict instead of probing too. Only a clear sign that the endpoint lacks the API
marks it chat-only (said once, as a warning): HTTP 404/405/501 on the route, or litellm's own "this endpoint
is not supported" errors. A probe that succeeds marks it as serving responses. Any other failure decides
nothing and the next call probes: a 429 or a timeout, and a 200 whose body is not a responses object (a
proxy's HTML error page, JSON of another shape), which fails that call (see
:class:`~tracegrade.judges.failures.MalformedReply`) rather than sending every later call elsewhere.
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading
import weakref
from typing import Any

__all__ = ["ENDPOINT_STYLES", "EndpointKey", "EndpointStyles", "is_responses_object", "no_responses_api_reason"]

log = logging.getLogger("tracegrade.judges")

#: (litellm provider, api_base); an api_base of None is the endpoint the provider's environment configures
EndpointKey = tuple[str, str | None]

# Statuses of a server without the route (404), without the method on it (405) or without the API (501).
_NO_RESPONSES_STATUSES = frozenset({404, 405, 501})
# A LiteLLM proxy's words for a model whose deployments lack the endpoint: "/v1/responses is not supported by model=x"
_NOT_SUPPORTED_BY_MODEL = re.compile(r"/responses is not supported by model=")


def no_responses_api_reason(exc: BaseException) -> str | None:
    """Why ``exc``, raised by a responses call, shows the endpoint has no responses API; None if it does not."""
    status = getattr(exc, "status_code", None)
    if status in _NO_RESPONSES_STATUSES:
        return f"it answered POST /responses with HTTP {status}"
    from tracegrade.judges.llm import load_litellm

    unsupported = load_litellm().exceptions
    if isinstance(exc, unsupported.UnsupportedEndpointError | unsupported.EndpointNotSupportedByModelError):
        return f"litellm says it does not serve the responses API ({type(exc).__name__})"
    if status == 400 and _NOT_SUPPORTED_BY_MODEL.search(str(exc)):  # a LiteLLM proxy's answer for such a model
        return "it answered POST /responses with HTTP 400: the responses API is not supported by the model"
    return None


def is_responses_object(response: Any) -> bool:
    """Whether a reply litellm returned from a responses call is one (it carries an ``output`` list)."""
    return isinstance(getattr(response, "output", None), list)


class EndpointStyles:
    """Per-endpoint verdicts (serves the responses API or not) and the locks that make the probe happen once."""

    def __init__(self) -> None:
        self._serves_responses: dict[EndpointKey, bool] = {}
        # asyncio locks belong to one event loop; runs on other loops probe under their own lock
        self._probe_locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[EndpointKey, asyncio.Lock]] = (
            weakref.WeakKeyDictionary()
        )
        self._lock = threading.Lock()

    def serves_responses(self, endpoint: EndpointKey) -> bool | None:
        """True or False once known, None while the endpoint has not been probed successfully."""
        with self._lock:
            return self._serves_responses.get(endpoint)

    def probe_lock(self, endpoint: EndpointKey) -> asyncio.Lock:
        """The lock held by the call probing ``endpoint`` on the running event loop."""
        loop = asyncio.get_running_loop()
        with self._lock:
            return self._probe_locks.setdefault(loop, {}).setdefault(endpoint, asyncio.Lock())

    def record(self, endpoint: EndpointKey, serves: bool, reason: str = "") -> None:
        """Remember the verdict on ``endpoint``; the first chat-only verdict for it is logged as a warning."""
        with self._lock:
            first = endpoint not in self._serves_responses
            self._serves_responses[endpoint] = serves
        if first and not serves:
            provider, api_base = endpoint
            where = api_base or f"the {provider} endpoint from the environment"
            log.warning(
                "judge endpoint %s has no responses API (%s); using chat completions for it from now on "
                "(set api_style='chat' to skip this probe)",
                where,
                reason,
            )


#: the process-wide verdicts every judge call consults
ENDPOINT_STYLES = EndpointStyles()
