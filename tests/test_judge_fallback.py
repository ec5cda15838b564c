"""``api_style="responses"`` on endpoints without the responses API: one probe, then chat completions.

Real litellm over HTTP to local OpenAI-compatible servers: one that serves chat completions only (as
llama.cpp's server, TGI and many vLLM deployments do) and one that serves both APIs.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator

import pytest

from tests.support.judges_setup import fast_runtime, judge_config
from tests.support.llm_server import LLMServer, Reply
from tracegrade.criteria.llm import ResponseMatchCriterion
from tracegrade.judges import judge_runtime
from tracegrade.models.dataset import EvalCase
from tracegrade.models.execution import ExecutionResult

CASE = EvalCase.single_turn("c1", "What is the capital of France?", expected_response="Paris")
ACTUAL = ExecutionResult(actual_response="The capital of France is Paris.")
NO_RESPONSES_API = "has no responses API"


@pytest.fixture
def chat_only() -> Iterator[LLMServer]:
    with LLMServer(apis={"chat"}) as server:
        yield server


@pytest.fixture
def both_apis() -> Iterator[LLMServer]:
    with LLMServer() as server:
        yield server


async def grade(server: LLMServer, num_samples: int = 1, max_retries: int = 3, **cfg):
    criterion = ResponseMatchCriterion(judge_config(server, api_style="responses", num_samples=num_samples, **cfg))
    with judge_runtime(fast_runtime(max_retries=max_retries)):
        return await criterion.evaluate(ACTUAL, CASE)


def fallback_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if NO_RESPONSES_API in r.getMessage()]


async def test_a_chat_only_server_is_probed_once_then_served_by_chat_completions(chat_only, caplog):
    caplog.set_level(logging.WARNING, "tracegrade.judges")
    chat_only.responder = lambda request: Reply.score(0.9, "via chat")
    first = await grade(chat_only, num_samples=3)  # three samples in flight at once: still a single probe
    second = await grade(chat_only, num_samples=2)
    for result in (first, second):
        assert result.error is None and result.score == pytest.approx(0.9)
    assert len(chat_only.requests_to("responses")) == 1  # the 404 was neither retried nor asked again
    assert len(chat_only.requests_to("chat")) == 5
    chat_request = chat_only.requests_to("chat")[0]
    assert chat_request.body["response_format"] == {"type": "json_object"}
    assert chat_request.prompt == chat_only.requests_to("responses")[0].prompt  # the same judge prompt
    warnings = fallback_warnings(caplog)
    assert len(warnings) == 1 and chat_only.base_url in warnings[0] and "HTTP 404" in warnings[0]


async def test_the_verdict_is_per_endpoint(chat_only, both_apis, caplog):
    caplog.set_level(logging.WARNING, "tracegrade.judges")
    assert (await grade(chat_only)).error is None
    assert (await grade(both_apis)).error is None
    assert (await grade(both_apis)).error is None
    assert [r.path for r in both_apis.requests] == ["/v1/responses", "/v1/responses"]
    assert len(chat_only.requests_to("responses")) == 1 and len(fallback_warnings(caplog)) == 1
    with LLMServer(apis={"chat"}) as other:
        assert (await grade(other)).error is None
        assert len(other.requests_to("responses")) == 1
    assert len(fallback_warnings(caplog)) == 2


async def test_a_server_with_both_apis_is_asked_for_responses_only(both_apis, caplog):
    caplog.set_level(logging.WARNING, "tracegrade.judges")
    both_apis.responder = lambda request: Reply.score(0.7)
    results = await asyncio.gather(*(grade(both_apis, num_samples=2) for _ in range(3)))
    assert all(r.error is None and r.score == pytest.approx(0.7) for r in results)
    assert len(both_apis.requests_to("responses")) == 6 and both_apis.requests_to("chat") == []
    assert fallback_warnings(caplog) == []


@pytest.mark.parametrize(
    ("probe_reply", "reason"),
    [
        (Reply.server_error(405), "HTTP 405"),
        (Reply.server_error(501), "HTTP 501"),
    ],
    ids=["405", "501"],
)
async def test_other_signs_of_no_responses_api_fall_back_at_once(both_apis, caplog, probe_reply, reason):
    caplog.set_level(logging.WARNING, "tracegrade.judges")
    both_apis.script(probe_reply, Reply.score(0.8), Reply.score(0.6))
    first, second = await grade(both_apis), await grade(both_apis)
    assert (first.score, second.score) == pytest.approx((0.8, 0.6))
    assert [r.path for r in both_apis.requests] == ["/v1/responses", "/v1/chat/completions", "/v1/chat/completions"]
    warnings = fallback_warnings(caplog)
    assert len(warnings) == 1 and reason in warnings[0]


async def test_a_passing_fault_decides_nothing_and_is_retried_on_the_responses_api(both_apis, caplog):
    caplog.set_level(logging.WARNING, "tracegrade.judges")
    both_apis.script(Reply.server_error(503), Reply.rate_limited(0), Reply.score(0.5))
    result = await grade(both_apis)
    assert result.error is None and result.score == pytest.approx(0.5)
    assert [r.path for r in both_apis.requests] == ["/v1/responses"] * 3
    assert fallback_warnings(caplog) == []


async def test_an_endpoint_with_neither_api_fails_without_retrying_the_404s():
    with LLMServer(apis=()) as nothing:
        result = await grade(nothing, max_retries=3)
    assert result.error == "All LLM samples failed"
    assert [r.path for r in nothing.requests] == ["/v1/responses", "/v1/chat/completions"]
    assert "NotFoundError" in result.details["errors"][0]
