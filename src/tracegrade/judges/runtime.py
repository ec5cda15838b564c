"""The per-run judge runtime: one concurrency limit, retries, the cache and usage totals.

The grading engine enters ``judge_runtime(JudgeRuntime.from_config(cfg))`` around a run; criteria and
the user simulator call ``current_judge_runtime().complete(...)``. Outside such a scope a process-wide
default runtime (default settings) is used.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from pathlib import Path
from typing import TypeVar

from tracegrade.errors import InvalidValueError
from tracegrade.judges.cache import JudgeCache, cache_key, open_judge_cache
from tracegrade.judges.client import (
    JudgeCallError,
    JudgeReply,
    JudgeRequest,
    RetryPolicy,
    call_model,
    failure_message,
    retry_delay,
)
from tracegrade.judges.parsing import UnreadableReply
from tracegrade.models.config import EvalConfig
from tracegrade.models.results import TokenUsage
from tracegrade.store.tenancy import GRADING_TENANT

__all__ = ["JudgeRuntime", "current_judge_runtime", "judge_runtime"]

log = logging.getLogger("tracegrade.judges")

T = TypeVar("T")


class JudgeRuntime:
    """Runs judge calls for one grading run.

    ``max_concurrency`` bounds the calls in flight across every criterion and case of the run (a call
    waiting out a retry delay does not hold a slot). A 429 from an endpoint holds back every call of the run
    to that endpoint and model for the delay it asked for, so a rate-limit storm is waited out together
    instead of each call spending its retries on it. ``cache`` (or None) stores readable replies;
    ``cache_opener`` opens it on the first judge call instead, so runs that judge nothing never touch it.
    ``usage`` totals what the run's calls cost; ``calls`` and ``cache_hits`` count them.
    """

    def __init__(
        self,
        *,
        max_concurrency: int = 16,
        cache: JudgeCache | None = None,
        retry: RetryPolicy | None = None,
        cache_opener: Callable[[], JudgeCache | None] | None = None,
    ) -> None:
        if max_concurrency < 1:
            raise InvalidValueError(f"max_concurrency must be at least 1, got {max_concurrency}")
        self.max_concurrency = max_concurrency
        self._cache = cache
        self._cache_opener = cache_opener
        self.retry = retry or RetryPolicy()
        self.usage = TokenUsage()
        self.cache_hits = 0
        self._semaphores: dict[asyncio.AbstractEventLoop, asyncio.Semaphore] = {}
        self._lock = threading.Lock()
        # (api_base, model) -> time.monotonic() before which no call to it starts (set by its 429s)
        self._cooldowns: dict[tuple[str | None, str], float] = {}
        # (api_base, model) -> when its current 429 streak began (cleared by any answered call)
        self._limited_since: dict[tuple[str | None, str], float] = {}

    @classmethod
    def from_config(cls, config: EvalConfig) -> JudgeRuntime:
        path = Path(config.judge_cache_path) if config.judge_cache_path else None
        return cls(
            max_concurrency=config.judge_max_concurrency,
            cache_opener=(lambda: open_judge_cache(path)) if config.judge_cache else None,
            retry=RetryPolicy(max_retries=config.judge_max_retries, base_delay=config.judge_retry_base_seconds),
        )

    @property
    def cache(self) -> JudgeCache | None:
        with self._lock:
            if self._cache_opener is not None:
                self._cache, self._cache_opener = self._cache_opener(), None
            return self._cache

    def _semaphore(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        with self._lock:
            semaphore = self._semaphores.get(loop)
            if semaphore is None:
                for stale in [lp for lp in self._semaphores if lp.is_closed()]:
                    del self._semaphores[stale]
                semaphore = self._semaphores[loop] = asyncio.Semaphore(self.max_concurrency)
            return semaphore

    async def _wait_cooldown(self, key: tuple[str | None, str]) -> None:
        """Wait until the endpoint's rate-limit cooldown, if any, has passed."""
        while True:
            with self._lock:
                remaining = self._cooldowns.get(key, 0.0) - time.monotonic()
            if remaining <= 0:
                return
            await asyncio.sleep(remaining)

    def _rate_limited_for(self, key: tuple[str | None, str]) -> float:
        """Seconds since the endpoint's current 429 streak began (0 for the first 429 of a streak)."""
        now = time.monotonic()
        with self._lock:
            return now - self._limited_since.setdefault(key, now)

    def _cool_down(self, key: tuple[str | None, str], seconds: float) -> None:
        with self._lock:
            self._cooldowns[key] = max(self._cooldowns.get(key, 0.0), time.monotonic() + seconds)

    async def _call_with_retries(self, request: JudgeRequest) -> JudgeReply:
        semaphore = self._semaphore()
        key = (request.api_base, request.model)
        attempt = 0
        while True:
            await self._wait_cooldown(key)
            try:
                async with semaphore:
                    reply = await call_model(request)
                with self._lock:
                    self._limited_since.pop(key, None)  # the endpoint answers again: its 429 streak is over
                reply.attempts = attempt + 1
                return reply
            except (asyncio.TimeoutError, TimeoutError):
                raise JudgeCallError(
                    f"judge {request.model} did not answer within {request.timeout_seconds:g} s "
                    "(the criterion's timeout_seconds)",
                    attempt + 1,
                    408,
                ) from None
            except Exception as exc:
                status = getattr(exc, "status_code", None)
                streak = self._rate_limited_for(key) if status == 429 else 0.0
                delay = retry_delay(exc, attempt, self.retry, streak)
                if delay is None:
                    if status == 429:
                        with self._lock:  # past patience: later calls fail at their first 429 until one is answered
                            self._limited_since[key] = float("-inf")
                    if status is None and not hasattr(exc, "llm_provider"):
                        raise
                    message = failure_message(exc, request, attempt + 1, self.retry)
                    # from None: litellm's exception text may quote the key the provider echoed
                    raise JudgeCallError(message, attempt + 1, status) from None
                if status == 429:
                    self._cool_down(key, delay)
                log.info("judge call failed (%s); retry %d in %.2f s", type(exc).__name__, attempt + 1, delay)
            await asyncio.sleep(delay)
            attempt += 1

    async def complete(
        self, request: JudgeRequest, sample_index: int, parse: Callable[[str], T]
    ) -> tuple[T, JudgeReply]:
        """Sample ``sample_index`` of ``request``: from the cache or one (retried) call, parsed by ``parse``.

        Only replies that ``parse`` accepts are cached, so an unreadable reply is asked again next time.
        """
        key = cache_key(request.model, request.cache_text, sample_index, request.cache_params(), GRADING_TENANT.get())
        cache = self.cache
        cached = cache.get(key) if cache is not None else None
        if cached is not None:
            self.cache_hits += 1
            return parse(cached[0]), JudgeReply(text=cached[0], usage=TokenUsage(), cached=True, attempts=0)
        reply = await self._call_with_retries(request)
        self.usage = self.usage + reply.usage
        try:
            value = parse(reply.text)
        except UnreadableReply as exc:
            if reply.stop_note:  # "empty reply" alone hides a refusal, a content filter or a cut-off reply
                exc = UnreadableReply(f"{exc}: {reply.stop_note}", exc.raw)
            exc.usage = reply.usage  # the call was paid for even though its reply is unusable
            exc.notes = reply.notes
            raise exc from None
        if cache is not None:
            cache.put(key, request.model, sample_index, reply.text, reply.usage)
        return value, reply


_current: ContextVar[JudgeRuntime | None] = ContextVar("tracegrade_judge_runtime", default=None)
_default: JudgeRuntime | None = None
_default_lock = threading.Lock()


@contextlib.contextmanager
def judge_runtime(runtime: JudgeRuntime) -> Iterator[JudgeRuntime]:
    """Make ``runtime`` the one judge calls use inside this block (and tasks started in it)."""
    token = _current.set(runtime)
    try:
        yield runtime
    finally:
        _current.reset(token)


def current_judge_runtime() -> JudgeRuntime:
    """The runtime of the enclosing ``judge_runtime`` block, else a process default (default settings)."""
    runtime = _current.get()
    if runtime is not None:
        return runtime
    global _default
    with _default_lock:
        if _default is None:
            _default = JudgeRuntime.from_config(EvalConfig())
        return _default
