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
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from pathlib import Path
from typing import TypeVar

from tracegrade.errors import InvalidValueError
from tracegrade.judges.cache import JudgeCache, cache_key, open_judge_cache
from tracegrade.judges.client import JudgeCallError, JudgeReply, JudgeRequest, RetryPolicy, call_model, retry_delay
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
    waiting out a retry delay does not hold a slot). ``cache`` (or None) stores readable replies;
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

    async def _call_with_retries(self, request: JudgeRequest) -> JudgeReply:
        semaphore = self._semaphore()
        attempt = 0
        while True:
            try:
                async with semaphore:
                    reply = await call_model(request)
                reply.attempts = attempt + 1
                return reply
            except (asyncio.TimeoutError, TimeoutError) as exc:
                raise JudgeCallError(
                    f"the judge did not answer within {request.timeout_seconds:g} s", attempt + 1, 408
                ) from exc
            except Exception as exc:
                delay = retry_delay(exc, attempt, self.retry)
                if delay is None:
                    if getattr(exc, "status_code", None) is None and not hasattr(exc, "llm_provider"):
                        raise
                    raise JudgeCallError(
                        f"{type(exc).__name__}: {exc}", attempt + 1, getattr(exc, "status_code", None)
                    ) from exc
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
            exc.usage = reply.usage  # the call was paid for even though its reply is unusable
            raise
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
