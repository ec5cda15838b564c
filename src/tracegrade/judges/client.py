"""One judge call through litellm, and the retry loop around it.

``call_model`` makes a single call (chat completions or the responses API, falling back to chat
completions on an endpoint without the responses API) with instrumentation suppressed and litellm's
logging callbacks off for it, and returns the reply text with its token usage and cost (from litellm's
cost map; 0 when the model has no price). ``retry_delay`` classifies a failure: 429 and 5xx other than
501 are retried with exponential backoff plus jitter, honouring ``Retry-After``; nothing else is.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import context as otel_context

from tracegrade.errors import JudgeError
from tracegrade.judges.endpoints import ENDPOINT_STYLES, EndpointKey, is_responses_object, no_responses_api_reason
from tracegrade.judges.llm import load_litellm
from tracegrade.judges.providers import resolve_model
from tracegrade.models.results import TokenUsage

__all__ = [
    "JudgeCallError",
    "JudgeReply",
    "JudgeRequest",
    "ProviderUnavailable",
    "RetryPolicy",
    "call_model",
    "retry_delay",
    "suppressed_instrumentation",
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
    """A judge's reply text and what it cost (zero usage when it came from the cache)."""

    text: str
    usage: TokenUsage
    cached: bool = False
    attempts: int = 1


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
    """Retries of 429/5xx: ``max_retries`` extra attempts, delay ``base * 2**n`` (with jitter) or Retry-After."""

    max_retries: int = 3
    base_delay: float = 0.5
    max_delay: float = 30.0
    max_retry_after: float = 120.0


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


def retry_delay(exc: BaseException, attempt: int, policy: RetryPolicy) -> float | None:
    """Seconds to wait before retrying after ``exc`` (attempt numbers start at 0), or None: do not retry."""
    status = _status(exc)
    litellm = load_litellm()
    if isinstance(exc, litellm.Timeout) or attempt >= policy.max_retries:
        return None
    server_fault = status is not None and status >= 500 and status != 501  # 501: not implemented stays so
    if not (status == 429 or server_fault or isinstance(exc, litellm.APIConnectionError)):
        return None
    retry_after = _retry_after(exc)
    if retry_after is not None:
        return retry_after if retry_after <= policy.max_retry_after else None
    return min(policy.max_delay, policy.base_delay * 2**attempt) * random.uniform(0.5, 1.0)


def _is_missing_credentials(exc: BaseException) -> bool:
    text = str(exc).lower()
    return any(hint in text for hint in _MISSING_CREDENTIAL_HINTS)


def _reply_text_and_tokens(response: Any, api_style: str) -> tuple[str, int, int]:
    usage = getattr(response, "usage", None)
    if api_style == "responses":
        parts = [
            getattr(block, "text", "") or ""
            for item in getattr(response, "output", None) or []
            if getattr(item, "type", None) == "message"
            for block in getattr(item, "content", None) or []
        ]
        text = "".join(parts)
        tokens = (getattr(usage, "input_tokens", 0), getattr(usage, "output_tokens", 0))
    else:
        text = response.choices[0].message.content or ""
        tokens = (getattr(usage, "prompt_tokens", 0), getattr(usage, "completion_tokens", 0))
    return text, int(tokens[0] or 0), int(tokens[1] or 0)


def _cost(response: Any, litellm_model: str, input_tokens: int, output_tokens: int) -> float:
    """USD cost of one call: litellm's own figure when it computed one, else the cost map; 0 when unpriced."""
    hidden = getattr(response, "_hidden_params", None) or {}
    if "response_cost" in hidden:
        return float(hidden["response_cost"] or 0.0)
    try:
        prompt_cost, completion_cost = load_litellm().cost_per_token(
            model=litellm_model, prompt_tokens=input_tokens, completion_tokens=output_tokens
        )
    except Exception:  # a model without a price in the cost map costs "unknown", reported as 0
        return 0.0
    return float(prompt_cost + completion_cost)


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
                raise ProviderUnavailable(str(exc)) from exc
            raise
    text, input_tokens, output_tokens = _reply_text_and_tokens(response, style)
    usage = TokenUsage(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cost_usd=_cost(response, resolved.litellm_model, input_tokens, output_tokens),
        calls=1,
    )
    return JudgeReply(text=text, usage=usage)


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
                if not is_responses_object(response):
                    ENDPOINT_STYLES.record(endpoint, False, "its reply to POST /responses is not a responses object")
                    return await _chat_call(request, common), "chat"
                ENDPOINT_STYLES.record(endpoint, True)
                return response, "responses"
    if serves:
        return await _responses_call(request, common), "responses"
    return await _chat_call(request, common), "chat"


async def _responses_call(request: JudgeRequest, common: dict[str, Any]) -> Any:
    options = {"text": {"format": {"type": "json_object"}}} if request.json_mode else {}
    call = load_litellm().aresponses(
        input=request.prompt, max_output_tokens=request.max_output_tokens, **common, **options
    )
    return await asyncio.wait_for(call, timeout=request.timeout_seconds)


async def _chat_call(request: JudgeRequest, common: dict[str, Any]) -> Any:
    options = {"response_format": {"type": "json_object"}} if request.json_mode else {}
    messages = [{"role": "user", "content": request.prompt}]
    call = load_litellm().acompletion(messages=messages, max_tokens=request.max_output_tokens, **common, **options)
    return await asyncio.wait_for(call, timeout=request.timeout_seconds)
