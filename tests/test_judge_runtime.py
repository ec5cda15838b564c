"""The judge layer over real litellm and HTTP: retries, timeouts, cache, concurrency, usage, span suppression."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.support.judges_setup import (  # noqa: F401
    INPUT_PRICE,
    OUTPUT_PRICE,
    PRICED_MODEL,
    fast_runtime,
    fresh_server,
    judge_config,
    register_priced_model,
    scripted_server,
)
from tests.support.llm_server import Reply
from tracegrade.criteria.llm import ResponseMatchCriterion
from tracegrade.judges import JudgeCache, judge_runtime
from tracegrade.models.config import EvalConfig
from tracegrade.models.dataset import EvalCase
from tracegrade.models.execution import ExecutionResult
from tracegrade.store.tenancy import GRADING_TENANT

CASE = EvalCase.single_turn("c1", "What is the capital of France?", expected_response="Paris")
ACTUAL = ExecutionResult(actual_response="The capital of France is Paris.")


async def grade(server, runtime=None, criterion_cls=ResponseMatchCriterion, actual=ACTUAL, case=CASE, **cfg):
    criterion = criterion_cls(judge_config(server, **cfg))
    with judge_runtime(runtime or fast_runtime()):
        return await criterion.evaluate(actual, case)


async def test_rate_limit_with_retry_after_is_retried_after_the_advertised_delay(server):
    server.script(Reply.rate_limited(retry_after=1), Reply.score(0.9))
    result = await grade(server)
    assert result.error is None and result.score == pytest.approx(0.9)
    assert len(server.requests) == 2
    # the backoff base is 10 ms: only an honoured Retry-After explains a gap of at least a second
    assert server.requests[1].received_at - server.requests[0].received_at >= 0.95


async def test_server_error_is_retried_then_succeeds(server):
    server.script(Reply.server_error(500), Reply.server_error(503), Reply.score(0.7))
    result = await grade(server)
    assert result.score == pytest.approx(0.7) and result.error is None
    assert len(server.requests) == 3
    assert result.token_usage.calls == 1


async def test_persistent_server_errors_exhaust_retries_and_fail_loudly(server):
    server.script([Reply.server_error(500)] * 3)
    result = await grade(server, runtime=fast_runtime(max_retries=2))
    assert result.error == "All LLM samples failed" and result.score == 0.0 and not result.passed
    assert len(server.requests) == 3
    assert "500" in result.details["errors"][0]


async def test_a_hang_past_the_timeout_drops_the_sample(server):
    server.script(Reply.hang(3.0), Reply.score(0.6))
    result = await grade(server, num_samples=2, timeout_seconds=0.5)
    assert result.score == pytest.approx(0.6)
    dropped = result.details["dropped_samples"]
    assert len(dropped) == 1 and "did not answer within 0.5 s" in dropped[0]["error"]
    assert any("1 of 2 judge samples failed" in w for w in result.warnings)


async def test_a_malformed_http_body_is_a_failed_sample_not_a_score(server):
    server.script([Reply.malformed_body()] * 2)
    result = await grade(server, runtime=fast_runtime(max_retries=1))
    assert result.error == "All LLM samples failed"
    assert result.score == 0.0


async def test_no_provider_scores_half_with_a_warning_and_makes_no_call(server, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    result = await grade(server, api_key=None)
    assert result.score == 0.5 and not result.passed
    assert result.details["reason"] == "No LLM provider available"
    assert "OPENAI_API_KEY" in result.details["problem"]
    assert result.warnings and "No LLM provider available" in result.warnings[0]
    assert server.requests == []


async def test_unknown_provider_is_no_provider(server):
    result = await grade(server, judge_model="nosuchprovider-model-xyz")
    assert result.score == 0.5 and result.details["reason"] == "No LLM provider available"
    assert server.requests == []


async def test_cache_makes_a_second_run_call_nothing(server, tmp_path):
    cache = JudgeCache(tmp_path / "judge_cache.duckdb")
    server.responder = lambda request: Reply.score(0.8, "cached verdict")
    first = await grade(server, runtime=fast_runtime(cache=cache), num_samples=3)
    assert len(server.requests) == 3 and first.token_usage.calls == 3
    second = await grade(server, runtime=fast_runtime(cache=cache), num_samples=3)
    assert len(server.requests) == 3  # no new request reached the server
    assert second.score == first.score and second.details["cache_hits"] == 3
    assert second.token_usage.calls == 0
    # a different judge setting is a different key
    await grade(server, runtime=fast_runtime(cache=cache), num_samples=3, temperature=0.5)
    assert len(server.requests) == 6


async def test_a_cached_reply_is_the_tenants_the_grading_ran_for(server, tmp_path):
    cache = JudgeCache(tmp_path / "judge_cache.duckdb")
    server.responder = lambda request: Reply.score(0.8, "acme's verdict")
    as_acme = GRADING_TENANT.set("acme")
    try:
        await grade(server, runtime=fast_runtime(cache=cache))
        again = await grade(server, runtime=fast_runtime(cache=cache))
    finally:
        GRADING_TENANT.reset(as_acme)
    assert again.details["cache_hits"] == 1
    as_globex = GRADING_TENANT.set("globex")
    try:  # the same question from another tenant is asked again, not read from acme's reply
        other = await grade(server, runtime=fast_runtime(cache=cache))
    finally:
        GRADING_TENANT.reset(as_globex)
    assert other.details["cache_hits"] == 0
    assert cache._conn.execute("SELECT tenant FROM judge_cache ORDER BY tenant").fetchall() == [("acme",), ("globex",)]


async def test_unreadable_replies_are_not_cached(server, tmp_path):
    cache = JudgeCache(tmp_path / "c.duckdb")
    server.script(Reply(text="no verdict here"), Reply.score(1.0))
    first = await grade(server, runtime=fast_runtime(cache=cache))
    assert first.error == "All LLM samples failed"
    second = await grade(server, runtime=fast_runtime(cache=cache))
    assert second.score == 1.0 and len(server.requests) == 2


def test_runtime_from_config_uses_the_configured_cache_file(tmp_path):
    from tracegrade.judges import JudgeRuntime

    path = tmp_path / "sub" / "cache.duckdb"
    runtime = JudgeRuntime.from_config(EvalConfig(judge_cache_path=str(path), judge_max_concurrency=3))
    assert runtime.cache is not None and runtime.cache.path == path.resolve() and path.exists()
    assert runtime.max_concurrency == 3
    assert JudgeRuntime.from_config(EvalConfig(judge_cache=False)).cache is None


async def test_one_concurrency_limit_spans_every_criterion_of_the_run(server):
    server.latency = 0.1
    runtime = fast_runtime(max_concurrency=2)
    criteria = [ResponseMatchCriterion(judge_config(server, num_samples=3)) for _ in range(3)]
    import asyncio

    with judge_runtime(runtime):
        results = await asyncio.gather(*(c.evaluate(ACTUAL, CASE) for c in criteria))
    assert all(r.error is None for r in results)
    assert len(server.requests) == 9
    assert server.max_in_flight <= 2


async def test_usage_and_cost_come_from_the_cost_map(server):
    register_priced_model()
    server.responder = lambda request: Reply(text='{"score": 1, "reasoning": "ok"}', input_tokens=150, output_tokens=30)
    runtime = fast_runtime()
    result = await grade(server, runtime=runtime, judge_model=PRICED_MODEL, num_samples=2)
    usage = result.token_usage
    assert (usage.input_tokens, usage.output_tokens, usage.calls) == (300, 60, 2)
    assert usage.cost_usd == pytest.approx(2 * (150 * INPUT_PRICE + 30 * OUTPUT_PRICE))
    assert runtime.usage.cost_usd == pytest.approx(usage.cost_usd)
    unpriced = await grade(server)
    assert unpriced.token_usage.cost_usd == 0.0 and unpriced.token_usage.calls == 1


async def test_responses_api_style_reaches_the_responses_endpoint(server):
    server.script(Reply.score(0.85))
    result = await grade(server, api_style="responses")
    assert result.score == pytest.approx(0.85)
    assert server.requests[0].path == "/v1/responses"
    assert result.token_usage.input_tokens == 100


async def test_judge_calls_emit_no_spans_into_the_graded_run(server):
    """A litellm callback that opens an OTel span per call (as litellm's OTel logger does) stays silent."""
    from litellm.integrations.custom_logger import CustomLogger
    from opentelemetry.instrumentation.utils import is_instrumentation_enabled

    from tracegrade.judges.llm import load_litellm

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")

    class SpanPerCall(CustomLogger):
        async def async_log_success_event(self, kwargs, response_obj, start_time, end_time):
            if is_instrumentation_enabled():
                tracer.start_span("litellm-call").end()

    litellm = load_litellm()
    logger = SpanPerCall()
    litellm.callbacks.append(logger)
    try:
        server.script(Reply.score(1.0))
        with tracer.start_as_current_span("graded-run"):
            result = await grade(server)
            # the control: a call made outside the judge layer does produce the span
            await litellm.acompletion(
                model="openai/x", api_base=server.base_url, api_key="k", messages=[{"role": "user", "content": "hi"}]
            )
        import asyncio

        await asyncio.sleep(0.2)  # litellm runs success callbacks as background tasks
    finally:
        litellm.callbacks.remove(logger)
    assert result.error is None
    names = [s.name for s in exporter.get_finished_spans()]
    assert names.count("litellm-call") == 1 and "graded-run" in names
    assert all("traceparent" not in {k.lower() for k in r.headers} for r in server.requests)
