"""LLM judges against misbehaving providers, second pass, over real litellm and HTTP to local scripted servers:
a 200 that is no responses object, settings litellm reports as a 500, and a judge cost cap over an unpriced model.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import socket
from collections.abc import Iterator

import pytest

from tests.support.judges_setup import fast_runtime, judge_config
from tests.support.llm_server import LLMServer, Reply, _chat_payload
from tests.support.provider_pages import Page, PageServer
from tracegrade.criteria.llm import ResponseMatchCriterion
from tracegrade.errors import ConfigError, InvalidValueError
from tracegrade.evaluation.checks import checked_config, config_problems
from tracegrade.evaluation.engine import compile_criteria
from tracegrade.judges import judge_runtime
from tracegrade.judges.endpoints import no_responses_api_reason
from tracegrade.judges.llm import load_litellm
from tracegrade.models.config import BudgetConfig, CriteriaConfig, CriterionConfig, EvalConfig
from tracegrade.models.dataset import EvalCase
from tracegrade.models.execution import ExecutionResult

CASE = EvalCase.single_turn("c1", "What is the capital of France?", expected_response="Paris")
ACTUAL = ExecutionResult(actual_response="The capital of France is Paris.")
NO_RESPONSES_API = "has no responses API"
PROXY_PAGE = "<html><head><title>502 Bad Gateway</title></head><body><h1>502 Bad Gateway</h1> nginx</body></html>"


@pytest.fixture
def proxied() -> Iterator[PageServer]:
    with PageServer() as server:
        yield server


async def grade(server: LLMServer, max_retries: int = 3, **cfg):
    criterion = ResponseMatchCriterion(judge_config(server, **cfg))
    with judge_runtime(fast_runtime(max_retries=max_retries)):
        return await criterion.evaluate(ACTUAL, CASE)


def fallback_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if NO_RESPONSES_API in r.getMessage()]


# ------------------------------------------------------------------ a 200 that is not a responses object


@pytest.mark.parametrize(
    ("page", "quoted"),
    [
        (Page(PROXY_PAGE, "text/html"), "<h1>502 Bad Gateway</h1> nginx"),
        (Page(json.dumps({"status": "ok", "message": "gateway is up"})), '"gateway is up"'),
        (Page(json.dumps(_chat_payload(1, "test-judge", Reply.score(1.0)))), '"chat.completion"'),
    ],
    ids=["html-page", "other-json", "chat-completion-body"],
)
async def test_a_malformed_200_fails_that_call_and_keeps_the_endpoint_on_the_responses_api(
    proxied, caplog, page, quoted
):
    caplog.set_level(logging.WARNING, "tracegrade.judges")
    proxied.pages["responses"].append(page)
    proxied.script(Reply.score(0.8))
    failed = await grade(proxied, api_style="responses")
    later = await grade(proxied, api_style="responses")
    assert failed.error == "All LLM samples failed"
    error = failed.details["errors"][0]
    assert f"at {proxied.base_url} answered HTTP 200 once with a body that is not a responses object" in error
    assert quoted in error  # the start of the body says which proxy or server answered
    assert later.error is None and later.score == pytest.approx(0.8)
    assert [r.path for r in proxied.requests] == ["/v1/responses", "/v1/responses"]  # no chat completions
    assert fallback_warnings(caplog) == []


@pytest.mark.parametrize(
    ("page", "said"),
    [
        (Page(PROXY_PAGE, "text/html"), "the body began: <html><head><title>502 Bad Gateway"),
        (Page(PROXY_PAGE), "the body began: <html><head><title>502 Bad Gateway"),
        (Page(json.dumps({"status": "ok"})), "litellm said: LiteLLM: provider returned a response with no 'choices'"),
    ],
    ids=["html-page", "html-as-json", "other-json"],
)
async def test_a_malformed_200_from_chat_completions_is_named_as_such_and_not_retried(proxied, page, said):
    proxied.pages["chat"].extend([page] * 4)
    result = await grade(proxied, max_retries=3)
    error = result.details["errors"][0]
    assert "answered HTTP 200 once with a body that is not a chat completion" in error
    assert said in error and "HTTP 500" not in error
    assert len(proxied.requests) == 1  # the same page every time: asking again does not help


async def test_a_litellm_proxy_saying_the_model_lacks_the_responses_api_falls_back_to_chat(proxied, caplog):
    caplog.set_level(logging.WARNING, "tracegrade.judges")
    message = "/v1/responses is not supported by model=test-judge. Supported endpoints: /v1/chat/completions"
    error = json.dumps({"error": {"message": message, "type": "invalid_request_error", "code": "400"}})
    proxied.pages["responses"].append(Page(error, status=400))
    proxied.script(Reply.score(0.7))
    result = await grade(proxied, api_style="responses")
    assert result.error is None and result.score == pytest.approx(0.7)
    assert [r.path for r in proxied.requests] == ["/v1/responses", "/v1/chat/completions"]
    (warning,) = fallback_warnings(caplog)
    assert "not supported by the model" in warning


@pytest.mark.parametrize("name", ["UnsupportedEndpointError", "EndpointNotSupportedByModelError"])
def test_litellms_own_not_supported_errors_mark_an_endpoint_chat_only(name):
    error_class = getattr(load_litellm().exceptions, name)
    error = error_class(message="openai/x does not support the responses API", model="x", llm_provider="openai")
    reason = no_responses_api_reason(error)
    assert reason is not None and name in reason


# ------------------------------------------------------------- settings litellm reports as a 500


@pytest.mark.parametrize("credentials", ["", "judge:sekret-pw-0123@"], ids=["plain", "with-credentials"])
async def test_an_api_base_without_its_scheme_fails_at_once_saying_what_to_fix(proxied, credentials):
    no_scheme = credentials + proxied.base_url.removeprefix("http://")
    shown = no_scheme.replace("sekret-pw-0123", "***")
    result = await grade(proxied, api_base=no_scheme)
    error = result.details["errors"][0]
    assert result.error == "All LLM samples failed" and proxied.requests == []
    assert f"judge openai/test-judge at {shown} could not be called" in error
    assert f"api_base {shown!r} is not a URL" in error and "http://localhost:8000/v1" in error
    assert "attempts" not in error and "HTTP 500" not in error  # one try, and no status was ever answered
    assert "sekret" not in result.model_dump_json()


async def test_a_provider_missing_a_required_setting_fails_at_once(proxied, monkeypatch):
    for name in ("AZURE_API_BASE", "AZURE_OPENAI_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    # an Azure deployment with a key but no endpoint: litellm raises "Must provide one of the base_url ..." as a 500
    result = await grade(proxied, judge_model="azure/judge-deployment", api_base=None)
    error = result.details["errors"][0]
    assert "at the azure endpoint from the environment could not be called" in error
    assert "refused the judge's settings before sending anything" in error and "base_url" in error
    assert "attempts" not in error


@pytest.mark.skipif(importlib.util.find_spec("google.auth") is not None, reason="google-auth is installed here")
async def test_a_provider_package_that_is_not_installed_fails_at_once(proxied, monkeypatch):
    monkeypatch.setenv("VERTEXAI_PROJECT", "judges-test")
    result = await grade(proxied, judge_model="vertex_ai/gemini-2.5-flash", api_base=None, api_key=None)
    error = result.details["errors"][0]
    assert "could not be called" in error and "is not installed" in error and "'google" in error
    assert "attempts" not in error


async def test_a_refused_connection_and_a_server_error_are_still_retried(proxied):
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{probe.getsockname()[1]}/v1"
    refused = await grade(proxied, max_retries=2, api_base=dead)
    assert "a connection failure on each of 3 attempts" in refused.details["errors"][0]
    proxied.script(Reply.server_error(500), Reply.score(0.9))
    recovered = await grade(proxied)
    assert recovered.error is None and len(proxied.requests) == 2


# ------------------------------------------------------------------ a judge cost cap and an unpriced judge

UNPRICED = "openai/judges2-unpriced-model"


def capped(judge: CriterionConfig) -> EvalConfig:
    return EvalConfig(criteria=CriteriaConfig(response_match=judge, budget=BudgetConfig(max_judge_cost_usd=0.5)))


def test_a_judge_cost_cap_over_an_unpriced_judge_is_refused_at_config_load(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(capped(CriterionConfig(judge_model=UNPRICED)).model_dump(mode="json")))
    with pytest.raises(ConfigError) as info:
        checked_config(path)
    text = str(info.value)
    assert "$.criteria.response_match.judge_model" in text and UNPRICED in text
    assert "no price in litellm's cost map" in text and "could never trip" in text
    assert "judge_input_cost_per_mtok and judge_output_cost_per_mtok" in text and "drop max_judge_cost_usd" in text


def test_a_judge_cost_cap_over_an_unpriced_judge_is_refused_at_run_start():
    with pytest.raises(InvalidValueError, match=r"at \$\.criteria\.response_match\.judge_model: judge model"):
        compile_criteria(capped(CriterionConfig(judge_model=UNPRICED)))


def test_a_priced_judge_a_configured_price_or_no_cap_are_accepted():
    priced = CriterionConfig(judge_model=UNPRICED, judge_input_cost_per_mtok=0.5, judge_output_cost_per_mtok=1.5)
    assert config_problems(capped(priced)) == []
    assert config_problems(capped(CriterionConfig(judge_model="openai/gpt-4o-mini"))) == []
    uncapped = EvalConfig(
        criteria=CriteriaConfig(
            response_match=CriterionConfig(judge_model=UNPRICED), budget=BudgetConfig(max_llm_calls=9)
        )
    )
    assert config_problems(uncapped) == []


def test_half_a_price_is_refused():
    half = CriterionConfig(judge_model=UNPRICED, judge_input_cost_per_mtok=0.5)
    problems = config_problems(EvalConfig(criteria=CriteriaConfig(response_match=half)))
    assert problems == [
        (
            "$.criteria.response_match",
            "judge_input_cost_per_mtok is set without judge_output_cost_per_mtok; give both "
            "(USD per million tokens; 0 for free)",
        )
    ]


async def test_a_configured_price_is_what_the_judge_calls_cost(proxied):
    proxied.script(Reply(text=json.dumps({"score": 0.9, "reasoning": "ok"}), input_tokens=1000, output_tokens=200))
    result = await grade(proxied, judge_model=UNPRICED, judge_input_cost_per_mtok=3.0, judge_output_cost_per_mtok=15.0)
    assert result.score == pytest.approx(0.9)
    assert result.token_usage.cost_usd == pytest.approx(1000 * 3.0 / 1e6 + 200 * 15.0 / 1e6)
    assert "usage_notes" not in result.details  # priced: no "$0" note
