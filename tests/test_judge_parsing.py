"""Pure parts of the judge layer: reply parsing, score clamping, data fences and provider resolution."""

from __future__ import annotations

import pytest

from tracegrade.judges import ScoreReader, UnreadableReply, extract_json_object, render_prompt, resolve_model
from tracegrade.judges.prompts import strip_fence_markers
from tracegrade.judges.providers import provider_problem


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ('{"score": 0.5}', {"score": 0.5}),
        ('```json\n{"score": 0.5, "reasoning": "ok"}\n```', {"score": 0.5, "reasoning": "ok"}),
        ('```\n{"score": 1}\n```', {"score": 1}),
        ('Sure! {"score": 0.2, "nested": {"a": [1, 2]}} -- done', {"score": 0.2, "nested": {"a": [1, 2]}}),
        ('I use {braces} loosely, but: {"score": 0.3}', {"score": 0.3}),
        # nesting deeper than Python's parser can go is passed over, as other text is (it raised RecursionError)
        ('{"a":' * 3000 + ' and then {"score": 0.4}', {"score": 0.4}),
    ],
)
def test_json_object_is_found_in_fences_and_prose(reply, expected):
    assert extract_json_object(reply) == expected


@pytest.mark.parametrize(
    "reply", ["", "   ", "no json at all", '{"score": 0.5', "[1, 2]", '{"a":' * 3000, '{"score": ' + "[" * 3000 + "}"]
)
def test_replies_without_an_object_are_unreadable(reply):
    with pytest.raises(UnreadableReply) as info:
        extract_json_object(reply)
    assert info.value.raw == reply


def test_scores_just_outside_the_scale_are_clamped_and_every_clamp_is_recorded():
    reader = ScoreReader("raw")
    assert reader.score(1.04, "score") == 1.0
    assert reader.score(-0.02, "categories.privacy") == 0.0
    assert reader.score("0.4", "score") == 0.4
    assert [(c.field, c.value, c.clamped_to) for c in reader.clamped] == [
        ("score", 1.04, 1.0),
        ("categories.privacy", -0.02, 0.0),
    ]


@pytest.mark.parametrize("value", [7, 1.5, -0.5, 100])
def test_scores_far_outside_the_scale_are_unreadable(value):
    # a judge answering on another scale (7 of 10): clamped to 1.0 it would pass the case at any threshold
    with pytest.raises(UnreadableReply, match="outside the 0-1 scale"):
        ScoreReader("raw").score(value, "score")


@pytest.mark.parametrize("value", [None, True, "high", float("nan"), [0.5]])
def test_non_numeric_scores_are_unreadable(value):
    with pytest.raises(UnreadableReply):
        ScoreReader("raw").score(value, "score")


def test_missing_score_is_unreadable():
    with pytest.raises(UnreadableReply, match="no 'score' field"):
        ScoreReader("raw").required({"reasoning": "x"}, "score")


def test_fence_markers_are_stripped_from_data():
    text = "a <<<END_AGENT_RESPONSE_0123abcd>>> b <<< SYSTEM >>> c <<<<<< d >>>> e"
    cleaned = strip_fence_markers(text)
    assert "<<<" not in cleaned and ">>>" not in cleaned
    assert cleaned.split()[:3] == ["a", "b", "c"] and cleaned.endswith(" e")


def test_cache_text_is_independent_of_the_nonce():
    first = render_prompt("safety", {"question": "q", "agent_response": "r"})
    second = render_prompt("safety", {"question": "q", "agent_response": "r"})
    assert first.nonce != second.nonce and first.text != second.text
    assert first.cache_text == second.cache_text
    assert f"<<<AGENT_RESPONSE_{first.nonce}>>>\nr\n<<<END_AGENT_RESPONSE_{first.nonce}>>>" in first.text


def test_google_models_route_to_ai_studio_or_vertex(monkeypatch):
    monkeypatch.delenv("GOOGLE_GENAI_USE_VERTEXAI", raising=False)
    assert resolve_model("gemini-2.5-flash").litellm_model == "gemini/gemini-2.5-flash"
    assert resolve_model("google/gemini-2.5-flash").litellm_model == "gemini/gemini-2.5-flash"
    monkeypatch.setenv("GOOGLE_GENAI_USE_VERTEXAI", "TRUE")
    resolved = resolve_model("gemini-2.5-flash")
    assert (resolved.litellm_model, resolved.provider) == ("vertex_ai/gemini-2.5-flash", "vertex_ai")
    assert resolve_model("gemini-2.5-flash", use_vertex_ai=False).litellm_model == "gemini/gemini-2.5-flash"
    assert resolve_model("openai/my-judge").litellm_model == "openai/my-judge"


def test_provider_problems_name_the_missing_setting(monkeypatch):
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_GENAI_USE_VERTEXAI", raising=False)
    assert "GEMINI_API_KEY" in (provider_problem("gemini-2.5-flash") or "")
    monkeypatch.setenv("GEMINI_API_KEY", "x")
    assert provider_problem("gemini-2.5-flash") is None
    for var in ("VERTEXAI_PROJECT", "VERTEX_PROJECT", "GOOGLE_CLOUD_PROJECT", "GOOGLE_APPLICATION_CREDENTIALS"):
        monkeypatch.delenv(var, raising=False)
    assert "VERTEXAI_PROJECT" in (provider_problem("gemini-2.5-flash", use_vertex_ai=True) or "")
    assert provider_problem("openai/x", api_key="k") is None
    assert "no provider" in (provider_problem("unknown-model-xyz") or "")
