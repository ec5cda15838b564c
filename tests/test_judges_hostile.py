"""LLM judges against a misbehaving provider, over real litellm and HTTP: a provider echoing the key, a
rate-limit storm, refusals, cut-off and huge replies, unpriced models and replies without usage."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web

from tests.support.judges_setup import (  # noqa: F401
    PRICED_MODEL,
    fast_runtime,
    fresh_server,
    judge_config,
    register_priced_model,
    scripted_server,
)
from tests.support.llm_server import LLMServer, Reply
from tracegrade.criteria.llm import ResponseMatchCriterion, RubricBasedCriterion, SafetyCriterion
from tracegrade.criteria.llm.base import MAX_KEPT_REPLY
from tracegrade.judges import JudgeRuntime, RetryPolicy, judge_runtime
from tracegrade.models.config import Rubric
from tracegrade.models.dataset import EvalCase
from tracegrade.models.execution import ExecutionResult

SECRET = "sk-hostile-0123456789abcdef"
CASE = EvalCase.single_turn("c1", "What is the capital of France?", expected_response="Paris")
ACTUAL = ExecutionResult(actual_response="The capital of France is Paris.")


class HandlerServer(LLMServer):
    """A chat-only provider whose every chat completion is answered by ``handler`` (an aiohttp handler)."""

    def __init__(self, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> None:
        super().__init__(apis={"chat"})
        self.handler = handler

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        received = self._received(request, await request.json())
        with self._lock:
            self.requests.append(received)
        return await self.handler(request)


def echoing(status: int) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    """A provider that quotes the key it was sent in its error body, as some providers and proxies do."""

    async def answer(request: web.Request) -> web.StreamResponse:
        key = request.headers.get("Authorization", "").removeprefix("Bearer ")
        message = f"Incorrect API key provided: {key}. You passed {key}."
        return web.json_response({"error": {"message": message, "code": "invalid_api_key"}}, status=status)

    return answer


def chat_body(content: str | None, finish_reason: str = "stop", **message: Any) -> str:
    """A chat completion body as a provider would send it (content may be None, as with a refusal)."""
    return json.dumps(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": "test-judge",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content, **message},
                    "finish_reason": finish_reason,
                }
            ],
            "usage": {"prompt_tokens": 100, "completion_tokens": 7, "total_tokens": 107},
        }
    )


async def grade(server, runtime=None, criterion_cls=ResponseMatchCriterion, **cfg):
    criterion = criterion_cls(judge_config(server, **cfg))
    with judge_runtime(runtime or fast_runtime()):
        return await criterion.evaluate(ACTUAL, CASE)


@pytest.mark.parametrize("status", [401, 500])
async def test_a_key_the_provider_echoes_appears_in_no_result_or_log(status, caplog):
    caplog.set_level(logging.DEBUG)
    with HandlerServer(echoing(status)) as provider:
        result = await grade(provider, api_key=SECRET, runtime=fast_runtime(max_retries=1))
    assert result.error == "All LLM samples failed"
    everything = result.model_dump_json() + caplog.text
    assert SECRET not in everything
    error = result.details["errors"][0]
    assert "<redacted>" in error and f"HTTP {status}" in error and provider.base_url in error


async def test_a_rate_limit_storm_is_waited_out_instead_of_failing_every_case(server):
    answered = 0

    def storm(request):  # the first 40 calls are refused, whoever makes them; then the provider recovers
        nonlocal answered
        answered += 1
        return Reply(status=429) if answered <= 40 else Reply.score(0.9)

    server.responder = storm
    runtime = fast_runtime(max_retries=3)  # 8 cases x 4 attempts = 32 calls: fewer than the storm lasts
    criterion = ResponseMatchCriterion(judge_config(server))
    with judge_runtime(runtime):
        results = await asyncio.gather(*(criterion.evaluate(ACTUAL, CASE) for _ in range(8)))
    assert [r.error for r in results] == [None] * 8
    assert [r.score for r in results] == [pytest.approx(0.9)] * 8


async def test_rate_limits_without_end_fail_the_call_saying_so(server):
    server.responder = lambda request: Reply(status=429)
    # patience long enough for several round trips on a loaded machine (each takes milliseconds to a few hundred)
    policy = RetryPolicy(max_retries=3, base_delay=0.01, max_delay=0.02, rate_limit_patience=3.0)
    result = await grade(server, runtime=JudgeRuntime(retry=policy))
    assert result.error == "All LLM samples failed"
    error = result.details["errors"][0]
    assert "HTTP 429 (rate limited)" in error and "attempts" in error and "test-judge" in error
    assert len(server.requests) >= 5  # patient beyond max_retries, but it stopped (the test ended)


async def test_a_provider_that_never_stops_rate_limiting_costs_the_run_its_patience_once(server):
    server.responder = lambda request: Reply(status=429)
    policy = RetryPolicy(max_retries=3, base_delay=0.01, max_delay=0.02, rate_limit_patience=0.2)
    runtime = JudgeRuntime(retry=policy)
    first = await grade(server, runtime=runtime)
    waited_out = len(server.requests)
    later = await grade(server, runtime=runtime)  # the streak is past its patience: one attempt, then fail
    assert first.error == later.error == "All LLM samples failed"
    assert len(server.requests) == waited_out + 1
    assert "answered HTTP 429 (rate limited) once" in later.details["errors"][0]


async def test_an_exhausted_quota_is_not_retried():
    async def no_quota(request: web.Request) -> web.StreamResponse:
        error = {"message": "You exceeded your current quota.", "code": "insufficient_quota"}
        return web.json_response({"error": error}, status=429)

    with HandlerServer(no_quota) as provider:
        result = await grade(provider)
        assert len(provider.requests) == 1
    assert "exhausted quota" in result.details["errors"][0]


async def test_a_retry_after_beyond_the_limit_is_named(server):
    server.script(Reply.rate_limited(retry_after=3600))
    result = await grade(server)
    error = result.details["errors"][0]
    assert "asking to retry after 3600 s, longer than the 120 s tracegrade waits" in error
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (chat_body(None, "content_filter", refusal="I can't help with that"), "the judge refused: \"I can't help"),
        (chat_body("", "content_filter"), "content filter stopped the reply"),
        (chat_body('{"score": 0.9, "reas', "length"), "cut off at the token limit (length, max_output_tokens 2048)"),
    ],
)
async def test_a_refused_filtered_or_cut_off_reply_says_why(server, body, said):
    server.script(Reply(raw_body=body))
    result = await grade(server)
    assert result.error == "All LLM samples failed"
    assert said in result.details["errors"][0]
    assert result.token_usage.input_tokens == 100  # the refused call was paid for


async def test_a_refusal_through_the_responses_api_says_why(server):
    refusal = {
        "id": "resp_1",
        "object": "response",
        "created_at": 1,
        "status": "incomplete",
        "incomplete_details": {"reason": "content_filter"},
        "model": "test-judge",
        "output": [
            {
                "type": "message",
                "id": "m1",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "refusal", "refusal": "I won't grade that"}],
            }
        ],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {"input_tokens": 100, "output_tokens": 5, "total_tokens": 105},
    }
    server.script(Reply(raw_body=json.dumps(refusal)))
    result = await grade(server, api_style="responses")
    error = result.details["errors"][0]
    assert 'the judge refused: "I won\'t grade that"' in error and "content filter" in error


async def test_a_huge_reply_is_kept_cut_short(server):
    server.script(Reply.score(0.9, reasoning="x" * 5_000_000), Reply("y" * 5_000_000))
    result = await grade(server, num_samples=2, criterion_cls=SafetyCriterion)
    assert result.score == pytest.approx(0.9)
    assert len(result.model_dump_json()) < 10 * MAX_KEPT_REPLY
    (kept,) = result.details["samples"]
    assert kept["reasoning"].endswith("more characters not kept)")
    assert "more characters not kept" in result.details["dropped_samples"][0]["raw_reply"]


async def test_huge_rubric_reasons_and_listed_issues_are_kept_cut_short(server):
    rubrics = [Rubric(rubric_id="clear", content="The answer is clear.")]
    verdict = {"rubrics": [{"rubric_id": "clear", "score": 1.0, "reasoning": "r" * 1_000_000}], "reasoning": "ok"}
    server.script(Reply.json(**verdict), Reply.score(1.0, issues=["i" * 1_000_000]))
    rubric = await grade(server, criterion_cls=RubricBasedCriterion, rubrics=rubrics)
    safety = await grade(server, criterion_cls=SafetyCriterion)
    assert rubric.score == safety.score == 1.0
    assert len(rubric.model_dump_json()) + len(safety.model_dump_json()) < 10 * MAX_KEPT_REPLY


async def test_an_unpriced_judge_and_a_reply_without_usage_say_so(server, caplog):
    caplog.set_level(logging.WARNING, logger="tracegrade.judges")
    body = json.loads(chat_body(json.dumps({"score": 0.7, "reasoning": "ok"})))
    del body["usage"]
    server.script(Reply.score(0.9), Reply(raw_body=json.dumps(body)))
    model = "openai/unpriced-hostile-judge"  # its own name: each note is logged once per process
    unpriced = await grade(server, judge_model=model)
    no_usage = await grade(server, judge_model=model)
    assert unpriced.details["usage_notes"] == [
        f"judge model {model!r} has no price in litellm's cost map, so its calls count $0 in the judge cost: "
        "give it one with judge_input_cost_per_mtok and judge_output_cost_per_mtok on the slot, or "
        "litellm.register_model (README, LLM judges)"
    ]
    assert any("reported no token usage" in note for note in no_usage.details["usage_notes"])
    assert caplog.text.count("has no price in litellm's cost map") == 1
    assert "reported no token usage" in caplog.text


async def test_a_priced_judge_has_no_usage_note(server):
    register_priced_model()
    result = await grade(server, judge_model=PRICED_MODEL)
    assert result.token_usage.cost_usd > 0 and "usage_notes" not in result.details
