"""One judge call through litellm, and the retry loop around it.

``call_model`` makes a single call (chat completions or the responses API, falling back to chat
completions on an endpoint without the responses API) with instrumentation suppressed and litellm's
logging callbacks off for it, and returns the reply text with its token usage and cost (from litellm's
cost map; 0 when the model has no price, said in the reply's ``notes``). ``retry_delay`` classifies a
failure: 429 and 5xx other than 501 are retried with exponential backoff plus jitter, honouring
``Retry-After`` (429s for as long as ``RetryPolicy.rate_limit_patience`` allows); nothing else is.
A call that cannot succeed however often it is made (settings the provider's client refuses, a 200
whose body is no completion: see :mod:`tracegrade.judges.failures`) is not retried either. A reply
streamed although no stream was asked for is joined into one (:mod:`tracegrade.judges.streamed`), and a
verdict sent as a tool call's arguments instead of text is read from them.
``failure_message`` says what a failed call got back, from which endpoint, with credentials redacted.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import random
import re
import time
from collections.abc import Awaitable, Iterator
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import context as otel_context

from tracegrade.errors import JudgeError
from tracegrade.judges.endpoints import ENDPOINT_STYLES, EndpointKey, is_responses_object, no_responses_api_reason
from tracegrade.judges.failures import MalformedReply, malformed_reply, setup_problem, unreachable, unreadable_head
from tracegrade.judges.llm import load_litellm
from tracegrade.judges.providers import resolve_model
from tracegrade.judges.redaction import endpoint_label, judge_secrets, redact
from tracegrade.judges.streamed import assembled, looks_streamed
from tracegrade.models.results import TokenUsage

__all__ = [
    "JudgeCallError",
    "JudgeReply",
    "JudgeRequest",
    "ProviderUnavailable",
    "RetryPolicy",
    "call_model",
    "failure_message",
    "no_usage_note",
    "retry_delay",
    "suppressed_instrumentation",
    "unpriced_note",
]

try:  # the key instrumentations check; its location is private and has moved between OTel versions
    from opentelemetry.context import _SUPPRESS_INSTRUMENTATION_KEY as _SUPPRESS_KEY
except ImportError:  # pragma: no cover - older/newer OTel
    _SUPPRESS_KEY = otel_context.create_key("suppress_instrumentation")

_MISSING_CREDENTIAL_HINTS = ("missing credentials", "api_key client option must be set", "no api key")


@dataclass(frozen=True)
class JudgeRequest:
    """One prompt for one judge model, with the call settings that also key the cache."""

    model: str
    prompt: str
    cache_text: str
    api_style: str = "responses"
    temperature: float = 0.0
    json_mode: bool = True
    max_output_tokens: int = 2048
    timeout_seconds: float = 60.0
    api_base: str | None = None
    api_key: str | None = field(default=None, repr=False)
    use_vertex_ai: bool | None = None
    #: USD per input and per output token from the criterion's config; None: litellm's cost map prices the call
    price: tuple[float, float] | None = None

    def cache_params(self) -> dict[str, Any]:
        """The settings that change a reply (the API key and endpoint do not)."""
        return {
            "api_style": self.api_style,
            "temperature": self.temperature,
            "json_mode": self.json_mode,
            "max_output_tokens": self.max_output_tokens,
        }


@dataclass
class JudgeReply:
    """A judge's reply text and what it cost (zero usage when it came from the cache).

    ``notes`` say what the usage figures lack (no price for the model, no token counts from the provider);
    ``stop_note`` says why the reply may be empty or cut short (a refusal, a content filter, the token limit).
    """

    text: str
    usage: TokenUsage
    cached: bool = False
    attempts: int = 1
    notes: list[str] = field(default_factory=list)
    stop_note: str | None = None


class ProviderUnavailable(JudgeError):
    """No provider can serve the judge model (unknown provider or missing credentials)."""


class JudgeCallError(JudgeError):
    """A judge call failed for good (after any retries)."""

    def __init__(self, message: str, attempts: int, status: int | None = None) -> None:
        super().__init__(message)
        self.attempts = attempts
        self.status = status


@dataclass(frozen=True)
class RetryPolicy:
    """Retries of 429/5xx: delay ``base * 2**n`` (with jitter, at most ``max_delay``) or Retry-After.

    5xx and connection failures get ``max_retries`` extra attempts. A 429 asks the caller to slow down
    rather than reporting a fault, so it is retried (``max_retries`` of 0 excepted) until the endpoint has
    been rate limiting for ``rate_limit_patience`` seconds without answering any call (the runtime keeps
    that streak per endpoint and model): a rate-limit storm is waited out, while a provider that never lets
    a call through costs the run that long once, after which its calls fail at their first 429. A 429 for an
    exhausted quota is not retried, nor a Retry-After above ``max_retry_after``.
    """

    max_retries: int = 3
    base_delay: float = 0.5
    max_delay: float = 30.0
    max_retry_after: float = 120.0
    rate_limit_patience: float = 120.0


@contextlib.contextmanager
def suppressed_instrumentation() -> Iterator[None]:
    """A fresh OTel context (no current span) with instrumentation suppressed, for one judge call."""
    token = otel_context.attach(otel_context.set_value(_SUPPRESS_KEY, True, otel_context.Context()))
    try:
        yield
    finally:
        otel_context.detach(token)


def _status(exc: BaseException) -> int | None:
    status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) else None


def _retry_after(exc: BaseException) -> float | None:
    """Seconds from the Retry-After header of a litellm error (either place litellm keeps headers)."""
    sources = [getattr(exc, "litellm_response_headers", None), getattr(getattr(exc, "response", None), "headers", None)]
    for headers in sources:
        if not headers:
            continue
        value = headers.get("retry-after") or headers.get("Retry-After")
        if value is None:
            continue
        try:
            return max(0.0, float(value))
        except ValueError:
            when = email.utils.parsedate_to_datetime(value)
            return max(0.0, when.timestamp() - time.time())
    return None


def retry_delay(exc: BaseException, attempt: int, policy: RetryPolicy, rate_limited_for: float = 0.0) -> float | None:
    """Seconds to wait before retrying after ``exc`` (attempt numbers start at 0), or None: do not retry.

    ``rate_limited_for`` is how long the endpoint has been rate limiting (bounded by the policy's patience).
    """
    status = _status(exc)
    litellm = load_litellm()
    if isinstance(exc, litellm.Timeout) or policy.max_retries <= 0:
        return None
    if setup_problem(exc, None) is not None or unreadable_head(exc) is not None:  # the same failure every time
        return None
    server_fault = status is not None and status >= 500 and status != 501  # 501: not implemented stays so
    if status != 429 and (attempt >= policy.max_retries or not (server_fault or _connection_failed(exc))):
        return None
    if status == 429 and _quota_exhausted(exc):
        return None
    retry_after = _retry_after(exc)
    if retry_after is not None:
        delay = retry_after if retry_after <= policy.max_retry_after else None
    else:
        delay = min(policy.max_delay, policy.base_delay * 2 ** min(attempt, 32)) * random.uniform(0.5, 1.0)
    if status == 429 and delay is not None and rate_limited_for + delay > policy.rate_limit_patience:
        return None
    return delay


def _quota_exhausted(exc: BaseException) -> bool:
    """A 429 that waiting does not cure: the account's quota or credit is used up (OpenAI: insufficient_quota)."""
    text = str(exc).lower()
    return "insufficient_quota" in text or "exceeded your current quota" in text


def _connection_failed(exc: BaseException) -> bool:
    litellm = load_litellm()
    return (isinstance(exc, litellm.APIConnectionError) and _status(exc) in (None, 500)) or unreachable(exc)


# litellm prefixes a provider's message with its own class names: "litellm.RateLimitError: RateLimitError:
# OpenAIException - slow down"; the status and the provider's own words are what a reader needs. All of them go in
# one pass: removed one at a time, a text of 100k characters of "Error:" took a quarter of a second (quadratic).
_LITELLM_PREFIXES = re.compile(r"^(?:\s*(?:litellm\.)?[A-Za-z]*(?:Error|Exception)(?::| -)\s*)+")
_MAX_FAILURE_TEXT = 2000
_TRACEBACK = "\nTraceback (most recent call last):"


def failure_message(exc: BaseException, request: JudgeRequest, attempts: int, policy: RetryPolicy | None = None) -> str:
    """What a failed judge call got back, naming the model and endpoint, credentials redacted.

    For example: ``judge openai/x at http://host/v1 answered HTTP 404 once (NotFoundError): File Not Found``.
    """
    try:
        provider = resolve_model(request.model, request.use_vertex_ai).provider
    except ValueError:
        provider = "its provider's"
    where = endpoint_label(provider, request.api_base)
    status = _status(exc)
    text = str(exc).split(_TRACEBACK, 1)[0]  # litellm appends its traceback to some errors' text
    text = _LITELLM_PREFIXES.sub("", text, count=1)
    text = redact(text, judge_secrets(request.api_key, request.api_base)) or type(exc).__name__
    if len(text) > _MAX_FAILURE_TEXT:
        text = f"{text[:_MAX_FAILURE_TEXT]}… ({len(text) - _MAX_FAILURE_TEXT} more characters not kept)"
    tries = "once" if attempts == 1 else f"on each of {attempts} attempts"
    if isinstance(exc, MalformedReply):
        body = redact(exc.snippet, judge_secrets(request.api_key, request.api_base))
        what = (
            "a server-sent event stream (not asked for) that ended before its last event"
            if looks_streamed(exc.body)
            else f"a body that is not {exc.expected}"
        )
        shown = "the body began" if exc.quoted else "litellm said"
        return (
            f"judge {request.model} at {where} answered HTTP 200 {tries} with {what} "
            f"(check api_base and any proxy in front of it); {shown}: {body}"
        )
    problem = setup_problem(exc, where if request.api_base else None)  # the label: no credentials in it
    if problem is not None:
        kind = type(exc).__name__
        return f"judge {request.model} at {where} could not be called ({kind}): {problem}; litellm said: {text}"
    head = unreadable_head(exc)
    if head is not None:
        return (
            f"judge {request.model} at {where} sent a reply whose status line or headers the HTTP client could not "
            f"read {tries} ({type(exc).__name__}): {redact(head, judge_secrets(request.api_key, request.api_base))} "
            "(check what the server or a proxy in front of it adds to its responses)"
        )
    if status == 429:
        what = "HTTP 429 (rate limited)"
        retry_after = _retry_after(exc)
        limit = (policy or RetryPolicy()).max_retry_after
        if retry_after is not None and retry_after > limit:
            what += f", asking to retry after {retry_after:g} s, longer than the {limit:g} s tracegrade waits,"
        elif _quota_exhausted(exc):
            what += " for an exhausted quota, which waiting does not cure,"
    elif _connection_failed(exc):
        what = "a connection failure"
    elif status is not None:
        what = f"HTTP {status}"
    else:
        what = type(exc).__name__
    return f"judge {request.model} at {where} answered {what} {tries} ({type(exc).__name__}): {text}"


def _is_missing_credentials(exc: BaseException) -> bool:
    text = str(exc).lower()
    return any(hint in text for hint in _MISSING_CREDENTIAL_HINTS)


def _reply_text_and_tokens(response: Any, api_style: str) -> tuple[str, int | None, int | None]:
    """The reply text and its input/output token counts (None when the provider reported no usage)."""
    usage = getattr(response, "usage", None)
    if api_style == "responses":
        parts = [
            getattr(block, "text", "") or ""
            for item in getattr(response, "output", None) or []
            if getattr(item, "type", None) == "message"
            for block in getattr(item, "content", None) or []
        ]
        text = "".join(parts)
        tokens = (getattr(usage, "input_tokens", None), getattr(usage, "output_tokens", None))
    else:
        text = response.choices[0].message.content or ""
        tokens = (getattr(usage, "prompt_tokens", None), getattr(usage, "completion_tokens", None))
    if not text.strip():
        text = next((arguments for _, arguments in _tool_calls(response, api_style)), text)
    if not tokens[0] and not tokens[1]:  # litellm fills in zeros when the body had no usage; no call costs 0 tokens
        return text, None, None
    return text, int(tokens[0] or 0), int(tokens[1] or 0)


def _tool_calls(response: Any, api_style: str) -> list[tuple[str, str]]:
    """The (name, arguments) of the tool calls a judge answered with instead of text.

    No tools are offered, yet some servers (a gateway adding its own, a model trained to answer through one)
    reply with a call whose arguments are the verdict: the first call's arguments are then read as the reply.
    """
    if api_style == "responses":
        items = [i for i in getattr(response, "output", None) or [] if getattr(i, "type", None) == "function_call"]
        return [(str(getattr(i, "name", "") or ""), str(getattr(i, "arguments", "") or "")) for i in items]
    calls = getattr(response.choices[0].message, "tool_calls", None) or []
    functions = [getattr(call, "function", None) for call in calls]
    return [(str(getattr(f, "name", "") or ""), str(getattr(f, "arguments", "") or "")) for f in functions if f]


def _stop_note(response: Any, api_style: str, max_output_tokens: int) -> str | None:
    """Why the judge stopped, when it was not the end of a complete reply: refusal, content filter, token limit."""
    if api_style == "responses":
        refusals = [
            str(getattr(block, "refusal", "") or "")
            for item in getattr(response, "output", None) or []
            for block in getattr(item, "content", None) or []
            if getattr(block, "type", None) == "refusal"
        ]
        details = getattr(response, "incomplete_details", None)
        reason = getattr(details, "reason", None) or (details.get("reason") if isinstance(details, dict) else None)
        if reason is None and getattr(response, "status", "completed") not in (None, "completed"):
            reason = f"status {getattr(response, 'status', None)}"
    else:
        choice = response.choices[0]
        refusal = getattr(choice.message, "refusal", None)
        refusals = [str(refusal)] if refusal else []
        finish = getattr(choice, "finish_reason", None)
        reason = finish if finish not in (None, "stop", "end_turn", "eos") else None
    notes = [f"the judge refused: {r[:500]!r}" for r in refusals if r]
    names = [name or "unnamed" for name, _ in _tool_calls(response, api_style)]
    if names:
        notes.append(
            f"the judge answered with a tool call ({', '.join(names)}) instead of text; its arguments were read"
        )
        reason = None if reason in ("tool_calls", "function_call") else reason
    if reason in ("length", "max_output_tokens", "max_tokens"):
        notes.append(f"the reply was cut off at the token limit ({reason}, max_output_tokens {max_output_tokens})")
    elif reason == "content_filter":
        notes.append("the provider's content filter stopped the reply (content_filter)")
    elif reason is not None:
        notes.append(f"the judge stopped early ({reason})")
    return "; ".join(notes) or None


def _cost(
    response: Any, litellm_model: str, input_tokens: int, output_tokens: int, price: tuple[float, float] | None
) -> float | None:
    """USD cost of one call: the configured ``price`` when given, else litellm's own figure when it computed
    one, else the cost map; None when unpriced."""
    if price is not None:
        return input_tokens * price[0] + output_tokens * price[1]
    hidden = getattr(response, "_hidden_params", None) or {}
    if hidden.get("response_cost") is not None:
        return float(hidden["response_cost"])
    try:
        prompt_cost, completion_cost = load_litellm().cost_per_token(
            model=litellm_model, prompt_tokens=input_tokens, completion_tokens=output_tokens
        )
    except Exception:  # litellm's cost map has no price for this model
        return None
    return float(prompt_cost + completion_cost)


def unpriced_note(model: str) -> str:
    """The note a reply of a model without a price carries (the same text for every call, so reports count it)."""
    return (
        f"judge model {model!r} has no price in litellm's cost map, so its calls count $0 in the judge cost: "
        "give it one with judge_input_cost_per_mtok and judge_output_cost_per_mtok on the slot, or "
        "litellm.register_model (README, LLM judges)"
    )


def no_usage_note(model: str) -> str:
    """The note a reply without token counts carries."""
    return f"judge model {model!r} reported no token usage, so its calls count 0 tokens and $0"


async def call_model(request: JudgeRequest) -> JudgeReply:
    """One litellm call for ``request`` (no retries); raises litellm's errors or ProviderUnavailable.

    ``api_style="responses"`` falls back to chat completions on an endpoint without the responses API
    (see :mod:`tracegrade.judges.endpoints`): the probe and the fallback are one attempt, never retried.
    """
    litellm = load_litellm()
    resolved = resolve_model(request.model, request.use_vertex_ai)
    common: dict[str, Any] = {
        "model": resolved.litellm_model,
        "temperature": request.temperature,
        "timeout": request.timeout_seconds,
        "max_retries": 0,  # retries are ours (they honour Retry-After and release the concurrency slot)
        "drop_params": True,
        "no-log": True,  # keep litellm's logging/OTel callbacks off for judge calls
    }
    if request.api_base:
        common["api_base"] = request.api_base
    if request.api_key:
        common["api_key"] = request.api_key
    with suppressed_instrumentation():
        try:
            if request.api_style == "responses" and hasattr(litellm, "aresponses"):
                response, style = await _responses_or_chat(request, common, (resolved.provider, request.api_base))
            else:
                response, style = await _chat_call(request, common), "chat"
        except Exception as exc:
            if _is_missing_credentials(exc):
                secrets = judge_secrets(request.api_key, request.api_base)
                raise ProviderUnavailable(redact(str(exc), secrets)) from None
            raise
    text, input_tokens, output_tokens = _reply_text_and_tokens(response, style)
    notes: list[str] = []
    if input_tokens is None or output_tokens is None:
        notes.append(no_usage_note(request.model))
        input_tokens = output_tokens = 0
    cost = _cost(response, resolved.litellm_model, input_tokens, output_tokens, request.price)
    if cost is None:
        notes.append(unpriced_note(request.model))
    usage = TokenUsage(input_tokens=input_tokens, output_tokens=output_tokens, cost_usd=cost or 0.0, calls=1)
    stop_note = _stop_note(response, style, request.max_output_tokens)
    return JudgeReply(text=text, usage=usage, notes=notes, stop_note=stop_note)


async def _responses_or_chat(request: JudgeRequest, common: dict[str, Any], endpoint: EndpointKey) -> tuple[Any, str]:
    """The reply and its API style: responses, unless ``endpoint`` is known (or now found) to lack it."""
    serves = ENDPOINT_STYLES.serves_responses(endpoint)
    if serves is None:
        async with ENDPOINT_STYLES.probe_lock(endpoint):  # the other calls wait for this probe's verdict
            serves = ENDPOINT_STYLES.serves_responses(endpoint)
            if serves is None:
                try:
                    response = await _responses_call(request, common)
                except Exception as exc:
                    reason = no_responses_api_reason(exc)
                    if reason is None:
                        raise
                    ENDPOINT_STYLES.record(endpoint, False, reason)
                    return await _chat_call(request, common), "chat"
                ENDPOINT_STYLES.record(endpoint, True)
                return response, "responses"
    if serves:
        return await _responses_call(request, common), "responses"
    return await _chat_call(request, common), "chat"


async def _responses_call(request: JudgeRequest, common: dict[str, Any]) -> Any:
    """A responses API call; a 200 whose body is no responses object raises MalformedReply."""
    options = {"text": {"format": {"type": "json_object"}}} if request.json_mode else {}
    call = load_litellm().aresponses(
        input=request.prompt, max_output_tokens=request.max_output_tokens, **common, **options
    )
    response = await _reply_of(call, "responses", request.timeout_seconds)
    if not is_responses_object(response):  # litellm parsed it, but it has no output list to read a verdict from
        raise MalformedReply("responses", str(response))
    return response


async def _chat_call(request: JudgeRequest, common: dict[str, Any]) -> Any:
    options = {"response_format": {"type": "json_object"}} if request.json_mode else {}
    messages = [{"role": "user", "content": request.prompt}]
    call = load_litellm().acompletion(messages=messages, max_tokens=request.max_output_tokens, **common, **options)
    return await _reply_of(call, "chat", request.timeout_seconds)


async def _reply_of(call: Awaitable[Any], api: str, timeout: float) -> Any:
    """The reply of one litellm call, its error as MalformedReply when the body was not the API's (a stream
    sent although none was asked for is joined into its reply instead)."""
    try:
        return await asyncio.wait_for(call, timeout=timeout)
    except Exception as exc:
        malformed = malformed_reply(exc, api)
        if malformed is None:
            raise
        response = assembled(malformed.body, api)
        if response is not None:
            return response
        raise malformed from None  # litellm's text quotes the body twice over; the snippet is what matters
