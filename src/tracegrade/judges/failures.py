"""What a failed judge call means: a reply that is not the API's, or settings the provider's client refused.

litellm folds very different failures into one "HTTP 500": a server's own 500, a refused connection, but also
an ``api_base`` without its scheme, a provider package that is not installed, a setting its client rejects
before sending anything. The first two pass and are worth retrying; the others fail the same way every time,
so ``setup_problem`` tells them apart by the exceptions litellm's error was raised from (an HTTP status or a
network error means the provider was reached or tried) and says what to fix.

A reply whose status line or headers the HTTP client cannot parse (headers above its size limit, too many
of them) is not retried either: ``unreadable_head`` gives the client's words. A 200 whose body is not a
completion (a proxy's HTML error page, JSON of another shape, JSON cut short, server-sent events nobody asked
for) is ``MalformedReply``: asking again gets the same page, so it is not retried, and its message quotes the
start of the body, which is what tells a reader which proxy or server answered.
"""

from __future__ import annotations

import ast
import json
import re

from tracegrade.errors import JudgeError

__all__ = ["MalformedReply", "cause_chain", "malformed_reply", "setup_problem", "unreachable", "unreadable_head"]

#: how much of a malformed body a message quotes
SNIPPET_CHARS = 300

# litellm's own words when a chat completion's body is no completion (the body follows "Received:")
_NOT_A_COMPLETION = ("Empty or invalid response from LLM endpoint", "provider returned a response with no 'choices'")
# read with match() from the first "Received: " only: searched for, it was tried from every "Received: " in the
# text, each try reading on to the end (quadratic: 10k of them took 11 s)
_RECEIVED = re.compile(r"(?:(?!Received: ).)*Received: (.*?)\. Check the reverse proxy", re.DOTALL)


class MalformedReply(JudgeError):
    """The endpoint answered HTTP 200 with a body that is not a reply of the API asked (not retried)."""

    status_code = 200  # read like a litellm error's: the runtime reports it without retrying

    def __init__(self, api: str, body: str, *, quoted: bool = True) -> None:
        self.api = api
        self.body = body
        self.quoted = quoted  # False: litellm described the body without quoting it; ``body`` is its words
        self.snippet = snippet(body)
        super().__init__(f"HTTP 200 with a body that is not {self.expected}: {self.snippet}")

    @property
    def expected(self) -> str:
        """What the body should have been (``a responses object``, ``a chat completion``)."""
        return _API_NAMES.get(self.api, f"a {self.api} reply")


_API_NAMES = {"responses": "a responses object", "chat": "a chat completion"}


def snippet(body: str) -> str:
    """The start of ``body`` on one line, saying how much was left out (``<empty body>`` for nothing)."""
    text = " ".join(body.split())
    if not text:
        return "<empty body>"
    if len(text) <= SNIPPET_CHARS:
        return text
    return f"{text[:SNIPPET_CHARS]}… ({len(text) - SNIPPET_CHARS} more characters)"


def cause_chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and the exceptions it was raised from or while handling, outermost first (no cycles)."""
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and all(current is not seen for seen in chain):
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def malformed_reply(exc: BaseException, api: str) -> MalformedReply | None:
    """``exc`` as a MalformedReply when litellm raised it over a 200 body that is not the API's, else None.

    litellm says so three ways: its error carries status 200 (the responses API), the chain holds the
    ``JSONDecodeError`` of the body (chat completions, a body that is not JSON), or its message says the body
    had no ``choices`` (chat completions, JSON of another shape).
    """
    chain = cause_chain(exc)
    decode = next((e for e in chain if isinstance(e, json.JSONDecodeError)), None)
    if decode is not None and not _network_failure(chain):
        return MalformedReply(api, decode.doc)
    text = str(exc)
    if getattr(exc, "status_code", None) == 200:
        return MalformedReply(api, _provider_words(text))
    if any(words in text for words in _NOT_A_COMPLETION):
        received = _RECEIVED.match(text)
        if received is None:
            return MalformedReply(api, _provider_words(text), quoted=False)
        return MalformedReply(api, _unquoted(received.group(1)))
    return None


def _unquoted(shown: str) -> str:
    """The body litellm quoted with ``repr`` (newlines escaped, in quotes), as it was sent."""
    try:
        body = ast.literal_eval(shown)
    except (ValueError, SyntaxError):
        return shown
    if isinstance(body, bytes):
        return body.decode("utf-8", "replace")
    return body if isinstance(body, str) else shown


def _provider_words(text: str) -> str:
    """What follows litellm's class-name prefixes ("litellm.APIError: APIError: OpenAIException - ...")."""
    _, dash, rest = text.partition("Exception - ")
    return _ERROR_PREFIX.sub("", rest if dash else text)


_ERROR_PREFIX = re.compile(r"^(?:litellm\.\w*Error: )+")


def setup_problem(exc: BaseException, api_base: str | None) -> str | None:
    """What to fix when ``exc`` is a failure of the call's own settings that litellm reports as a 500-style
    error (so retrying cannot help); None when the provider was reached or the network tried. ``api_base`` is
    quoted as given: pass its redacted label."""
    chain = cause_chain(exc)
    if _network_failure(chain) or not _retryable_looking(exc):
        return None
    import httpx

    for cause in chain[1:]:
        if isinstance(cause, ImportError):
            module = f" (module {cause.name!r})" if cause.name else ""
            return f"a package litellm needs for this provider is not installed{module}: install it"
        if isinstance(cause, httpx.InvalidURL | httpx.UnsupportedProtocol) or _is_aiohttp_invalid_url(cause):
            return (
                f"api_base {api_base!r} is not a URL the provider's client can call: give the full URL with its "
                "scheme, for example http://localhost:8000/v1"
            )
    if any(_is_settings_error(cause) for cause in chain[1:]):
        return "the provider's client refused the judge's settings before sending anything: fix what it names"
    return None


def _retryable_looking(exc: BaseException) -> bool:
    """A 5xx or a connection error: what the retry rules would otherwise retry."""
    from tracegrade.judges.llm import load_litellm

    status = getattr(exc, "status_code", None)
    return isinstance(exc, load_litellm().APIConnectionError) or (isinstance(status, int) and status >= 500)


def unreadable_head(exc: BaseException) -> str | None:
    """The HTTP client's words when it could not parse the reply's status line or headers (too large, too
    many, malformed): the same reply every time, so not worth retrying, whatever status litellm gives it."""
    from aiohttp import http_exceptions

    chain = cause_chain(exc)
    if _network_failure(chain):  # a body cut short also raises an HttpProcessingError, inside a payload error
        return None
    for cause in chain[1:]:
        if isinstance(cause, http_exceptions.HttpProcessingError) and not isinstance(
            cause, http_exceptions.PayloadEncodingError
        ):
            return snippet(cause.message)
    return None


def unreachable(exc: BaseException) -> bool:
    """Whether the call failed on the network (refused, reset, DNS, cut off) before any HTTP status came back:
    litellm reports that as a 500 too."""
    import httpx

    causes = cause_chain(exc)[1:]
    return any(_is_transport_error(c) for c in causes) and not any(isinstance(c, httpx.HTTPStatusError) for c in causes)


def _network_failure(chain: list[BaseException]) -> bool:
    """Whether the chain shows a request on the wire: an HTTP status came back, or the network failed.

    Only the causes count: litellm's own error subclasses the OpenAI SDK's status errors whatever happened.
    """
    import httpx

    return any(
        isinstance(cause, httpx.HTTPStatusError | TimeoutError) or _is_transport_error(cause) for cause in chain[1:]
    )


def _is_transport_error(cause: BaseException) -> bool:
    import aiohttp
    import httpx

    if isinstance(cause, httpx.UnsupportedProtocol) or _is_aiohttp_invalid_url(cause):
        return False  # raised before any connection: a setting, not the network
    transport = (httpx.TransportError, aiohttp.ClientConnectionError, aiohttp.ClientPayloadError, OSError)
    return isinstance(cause, transport)


def _is_aiohttp_invalid_url(cause: BaseException) -> bool:
    import aiohttp

    return isinstance(cause, aiohttp.InvalidURL)


def _is_settings_error(cause: BaseException) -> bool:
    """An exception a client raises over its own settings: ValueError/TypeError (not a body's decode or
    validation error, which is about a reply), or the OpenAI SDK's bare OpenAIError (raised for missing
    credentials and endpoints, never for a reply)."""
    import openai
    import pydantic

    if isinstance(cause, UnicodeDecodeError | json.JSONDecodeError | pydantic.ValidationError):
        return False
    return isinstance(cause, ValueError | TypeError) or type(cause) is openai.OpenAIError
