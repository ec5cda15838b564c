"""Judge replies in odd shapes over real litellm and HTTP: a stream nobody asked for, a tool call instead of
text, rival verdicts, a reasoning model's scratch work, headers the HTTP client refuses, a body cut off."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.support.judges_setup import fast_runtime, judge_config
from tests.support.llm_server import Reply, _chat_payload, _responses_payload
from tests.support.provider_pages import Page, PageServer, chat_stream, responses_stream
from tracegrade.criteria.llm import ResponseMatchCriterion
from tracegrade.judges import judge_runtime
from tracegrade.models.dataset import EvalCase
from tracegrade.models.execution import ExecutionResult

CASE = EvalCase.single_turn("c1", "What is the capital of France?", expected_response="Paris")
ACTUAL = ExecutionResult(actual_response="The capital of France is Paris.")
VERDICT = json.dumps({"score": 0.9, "reasoning": "same meaning"})


@pytest.fixture(scope="module")
def provider() -> Iterator[PageServer]:
    with PageServer() as server:
        yield server


@pytest.fixture(autouse=True)
def fresh(provider: PageServer) -> None:
    provider.clear()
    for pages in provider.pages.values():
        pages.clear()


async def grade(server: PageServer, max_retries: int = 3, **cfg):
    criterion = ResponseMatchCriterion(judge_config(server, **cfg))
    with judge_runtime(fast_runtime(max_retries=max_retries)):
        return await criterion.evaluate(ACTUAL, CASE)


# ------------------------------------------------------------------------------- streamed, not asked for


@pytest.mark.parametrize("content_type", ["text/event-stream", "application/json"])
async def test_a_chat_completion_streamed_though_not_asked_for_is_joined_and_graded(provider, content_type):
    usage = {"prompt_tokens": 100, "completion_tokens": 12, "total_tokens": 112}
    provider.pages["chat"].append(
        Page(chat_stream(['{"score": 0.9,', ' "reasoning": "same"}'], usage=usage), content_type)
    )
    result = await grade(provider)
    assert result.error is None and result.score == pytest.approx(0.9)
    assert (result.token_usage.input_tokens, result.token_usage.output_tokens) == (100, 12)
    assert len(provider.requests) == 1 and "stream" not in provider.requests[0].body


async def test_a_responses_reply_streamed_though_not_asked_for_is_graded(provider):
    streamed = responses_stream(_responses_payload(1, "test-judge", Reply(VERDICT)))
    provider.pages["responses"].append(Page(streamed, "text/event-stream"))
    result = await grade(provider, api_style="responses")
    assert result.error is None and result.score == pytest.approx(0.9)
    assert [r.path for r in provider.requests] == ["/v1/responses"]


async def test_a_stream_that_stops_before_its_end_fails_saying_so(provider):
    provider.pages["chat"].append(Page(chat_stream(['{"score": 0.9,'], finished=False), "text/event-stream"))
    result = await grade(provider)
    error = result.details["errors"][0]
    assert "answered HTTP 200 once with a server-sent event stream (not asked for) that ended before" in error
    assert 'the body began: data: {"id": "chatcmpl-s"' in error


# ------------------------------------------------------------------------------- a tool call, not text


async def test_a_verdict_sent_as_a_chat_tool_call_is_read(provider):
    body = _chat_payload(1, "test-judge", Reply(""))
    call = {"id": "call_1", "type": "function", "function": {"name": "submit_verdict", "arguments": VERDICT}}
    body["choices"][0] |= {"message": {"role": "assistant", "content": None, "tool_calls": [call]}}
    body["choices"][0]["finish_reason"] = "tool_calls"
    provider.pages["chat"].append(Page(json.dumps(body)))
    result = await grade(provider)
    assert result.error is None and result.score == pytest.approx(0.9)
    assert result.details["reasonings"] == ["same meaning"]


async def test_a_verdict_sent_as_a_responses_function_call_is_read(provider):
    body = _responses_payload(1, "test-judge", Reply(""))
    body["output"] = [
        {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "grade", "arguments": VERDICT}
    ]
    provider.pages["responses"].append(Page(json.dumps(body)))
    result = await grade(provider, api_style="responses")
    assert result.error is None and result.score == pytest.approx(0.9)


async def test_a_tool_call_without_a_verdict_says_what_the_judge_did(provider):
    body = _chat_payload(1, "test-judge", Reply(""))
    call = {"id": "call_1", "type": "function", "function": {"name": "web_search", "arguments": '{"q": "Paris"}'}}
    body["choices"][0] |= {"message": {"role": "assistant", "content": None, "tool_calls": [call]}}
    body["choices"][0]["finish_reason"] = "tool_calls"
    provider.pages["chat"].append(Page(json.dumps(body)))
    result = await grade(provider)
    error = result.details["errors"][0]
    assert "the judge answered with a tool call (web_search) instead of text" in error


# ------------------------------------------------------------------------------- where the score is


async def test_rival_verdicts_in_one_reply_are_unreadable_not_the_first_one(provider):
    provider.script(Reply('{"score": 0.2, "reasoning": "draft"}\nOn reflection: {"score": 0.9, "reasoning": "final"}'))
    result = await grade(provider)
    assert result.error == "All LLM samples failed"
    assert "holds 2 verdicts with different scores (0.2, 0.9)" in result.details["errors"][0]


@pytest.mark.parametrize(
    "reply",
    [
        '```json\n{"score": 0.9, "reasoning": "same meaning"}\n```\nVerdict: {"score": 0.9}',
        '{"score": 0.9, "reasoning": "same meaning"} Let me know if you need anything else.',
    ],
    ids=["same-score-twice", "trailing-prose"],
)
async def test_one_verdict_among_scratch_work_or_repeats_is_read(provider, reply):
    provider.script(Reply(reply))
    result = await grade(provider)
    assert result.error is None and result.score == pytest.approx(0.9)


async def test_a_reasoning_models_think_block_is_not_read_as_its_verdict(provider):
    # litellm strips <think> from chat completions itself, but leaves it in a responses API reply's text
    provider.script(Reply('<think>First guess: {"score": 0.1}. No, it matches.</think>\n' + VERDICT))
    result = await grade(provider, api_style="responses")
    assert result.error is None and result.score == pytest.approx(0.9)
    provider.script(Reply("<think>It matches, so I will answer 0.9.</think>"))
    unreadable = await grade(provider, api_style="responses")
    assert "holds only its <think> block, no verdict after it" in unreadable.details["errors"][0]


# ------------------------------------------------------------------------------- HTTP the client refuses


@pytest.mark.parametrize(
    ("headers", "said"),
    [
        ({"X-Trace": "t" * 20_000}, "Got more than 8190 bytes"),
        ({f"X-Hop-{i}": "1" for i in range(300)}, "Too many headers received"),
    ],
    ids=["huge-header", "too-many-headers"],
)
@pytest.mark.parametrize("api_style", ["chat", "responses"])
async def test_headers_the_http_client_refuses_fail_at_once_saying_so(provider, headers, said, api_style):
    api = "chat" if api_style == "chat" else "responses"
    provider.pages[api].extend(
        Page(json.dumps(_chat_payload(1, "x", Reply(VERDICT))), headers=headers) for _ in range(4)
    )
    result = await grade(provider, api_style=api_style)
    error = result.details["errors"][0]
    assert "sent a reply whose status line or headers the HTTP client could not read once" in error
    assert said in error and len(provider.requests) == 1


async def test_a_body_cut_off_mid_way_is_a_connection_failure_and_retried(provider):
    whole = json.dumps(_chat_payload(1, "test-judge", Reply(VERDICT)))
    provider.pages["chat"].append(Page(whole, cut_after=40))
    provider.script(Reply(VERDICT))
    result = await grade(provider)
    assert result.error is None and result.score == pytest.approx(0.9) and len(provider.requests) == 2
    provider.pages["chat"].extend(Page(whole, cut_after=40) for _ in range(3))
    failed = await grade(provider, max_retries=2)
    assert "answered a connection failure on each of 3 attempts" in failed.details["errors"][0]
