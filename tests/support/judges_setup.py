"""Helpers for judge tests: criterion configs and runtimes pointed at the scripted local LLM server."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import pytest

from tests.support.llm_server import LLMServer
from tracegrade.judges import JudgeCache, JudgeRuntime, RetryPolicy
from tracegrade.models.config import CriterionConfig

JUDGE_MODEL = "openai/test-judge"
PRICED_MODEL = "openai/priced-judge"
INPUT_PRICE, OUTPUT_PRICE = 1e-6, 2e-6  # USD per token of PRICED_MODEL


@pytest.fixture(scope="module", name="server")
def scripted_server() -> Iterator[LLMServer]:
    """Fixture ``server``: the scripted LLM server, one per test module. A module uses it with
    ``from tests.support.judges_setup import fresh_server, scripted_server  # noqa: F401``."""
    with LLMServer() as srv:
        yield srv


@pytest.fixture(autouse=True)
def fresh_server(server: LLMServer) -> None:
    """Every test starts with no queued replies, no responder and no added latency."""
    server.clear()
    server.responder = None
    server.latency = 0.0


def register_priced_model() -> None:
    """Give PRICED_MODEL a price in litellm's cost map."""
    from tracegrade.judges.llm import load_litellm

    load_litellm().register_model(
        {
            PRICED_MODEL: {
                "input_cost_per_token": INPUT_PRICE,
                "output_cost_per_token": OUTPUT_PRICE,
                "litellm_provider": "openai",
                "mode": "chat",
            }
        }
    )


def judge_config(server: LLMServer, **overrides: Any) -> CriterionConfig:
    """A criterion config whose judge is the scripted server (chat style, one sample unless overridden)."""
    settings: dict[str, Any] = {
        "judge_model": JUDGE_MODEL,
        "api_base": server.base_url,
        "api_key": "test-key",
        "api_style": "chat",
        "num_samples": 1,
        "timeout_seconds": 5.0,
    }
    settings.update(overrides)
    return CriterionConfig(**settings)


def fast_runtime(cache: JudgeCache | None = None, max_retries: int = 3, max_concurrency: int = 16) -> JudgeRuntime:
    """A runtime with millisecond backoff so fault tests stay fast."""
    return JudgeRuntime(
        max_concurrency=max_concurrency,
        cache=cache,
        retry=RetryPolicy(max_retries=max_retries, base_delay=0.01, max_delay=0.05),
    )
