"""Text criteria: exact match, keywords and ROUGE-1, rule by rule as the criteria page states them."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracegrade.criteria import ContainsKeywordsCriterion, ExactMatchCriterion, RougeMatchCriterion
from tracegrade.criteria.text import _ascii_tokens, _tokens, rouge1
from tracegrade.models import CriterionConfig, EvalCase, ExecutionResult, Invocation, MessageContent


def answer(text: str) -> ExecutionResult:
    return ExecutionResult(actual_response=text)


def expecting(text: str | None) -> EvalCase:
    return EvalCase.single_turn("c", "q", expected_response=text)


# --- ExactMatchCriterion --------------------------------------------------------------------------------


def test_exact_match_strips_whitespace_and_is_case_sensitive():
    criterion = ExactMatchCriterion()
    result = criterion.evaluate_sync(answer("  It is sunny.\n"), expecting("It is sunny."))
    assert result.score == 1.0 and result.passed
    assert result.details == {"match": True, "actual_length": 12, "expected_length": 12}
    assert criterion.evaluate_sync(answer("it is sunny."), expecting("It is sunny.")).score == 0.0


def test_exact_match_has_no_partial_credit():
    result = ExactMatchCriterion().evaluate_sync(answer("It is sunny"), expecting("It is sunny."))
    assert result.score == 0.0 and not result.passed and result.details["match"] is False


def test_exact_match_uses_the_last_non_empty_expected_response():
    case = EvalCase(
        eval_id="m",
        conversation=[
            Invocation.simple("one", "first"),
            Invocation.simple("two", "second"),
            Invocation(user_content=MessageContent.user("three"), expected_final_response=MessageContent.assistant("")),
        ],
    )
    assert ExactMatchCriterion().evaluate_sync(answer("second"), case).score == 1.0


def test_exact_match_without_expected_response_passes_only_a_blank_answer():
    assert ExactMatchCriterion().evaluate_sync(answer("  "), expecting(None)).score == 1.0
    assert ExactMatchCriterion().evaluate_sync(answer("hi"), expecting(None)).score == 0.0


# --- ContainsKeywordsCriterion --------------------------------------------------------------------------


def test_keywords_case_insensitive_substring_fraction():
    criterion = ContainsKeywordsCriterion(keywords=["Refund", "7 days", "receipt"])
    result = criterion.evaluate_sync(answer("You get a REFUND within 7 days."), expecting(None))
    assert result.score == pytest.approx(2 / 3)
    assert result.details == {
        "found": ["Refund", "7 days"],
        "missing": ["receipt"],
        "keywords": ["Refund", "7 days", "receipt"],
    }


def test_config_keywords_take_precedence_over_the_argument():
    criterion = ContainsKeywordsCriterion(
        keywords=["absent"], config=CriterionConfig.contains_keywords(keywords=["refund"], threshold=1.0)
    )
    assert criterion.keywords == ["refund"]
    assert criterion.evaluate_sync(answer("refund issued"), expecting(None)).passed


def test_argument_keywords_used_when_config_has_none():
    criterion = ContainsKeywordsCriterion(keywords=["refund"], config=CriterionConfig(threshold=1.0))
    assert criterion.evaluate_sync(answer("no"), expecting(None)).score == 0.0


def test_no_keywords_scores_one_with_a_note():
    result = ContainsKeywordsCriterion().evaluate_sync(answer("anything"), expecting(None))
    assert result.score == 1.0 and result.details == {"note": "No keywords specified"}


def test_keywords_do_not_need_a_reference():
    assert ContainsKeywordsCriterion.requires_reference is False
    assert RougeMatchCriterion.requires_reference and ExactMatchCriterion.requires_reference


# --- RougeMatchCriterion --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("actual", "expected", "prf"),
    [
        ("the cat sat", "the cat sat", (1.0, 1.0, 1.0)),
        ("The CAT, sat!", "the cat sat", (1.0, 1.0, 1.0)),  # lowercased, punctuation stripped
        ("the the the cat", "the cat", (1.0, 1.0, 1.0)),  # unigram sets, not counts
        ("a b", "a c d e", (0.5, 0.25, 1 / 3)),
        ("x y", "a b", (0.0, 0.0, 0.0)),
        ("", "a b", (0.0, 0.0, 0.0)),
        ("!!!", "...", (1.0, 1.0, 1.0)),  # both token sets empty
        ("a", "...", (0.0, 0.0, 0.0)),  # expected has no tokens, actual has some
        ("snake_case 42", "snake_case and 42", (1.0, 2 / 3, 0.8)),  # underscores and digits are word characters
        ("café au lait", "Café—au lait", (1.0, 1.0, 1.0)),  # accents survive, Unicode dashes separate
        ("don't", "don t", (1.0, 1.0, 1.0)),
    ],
)
def test_rouge1(actual, expected, prf):
    assert rouge1(actual, expected) == pytest.approx(prf)


def test_rouge_ascii_fast_path_matches_the_unicode_tokeniser():
    text = "Tabs\tand\x00nulls\x7fand\x1cseparators, (brackets) [and] {braces} a-b a_b"
    expected = {"tabs", "and", "nulls", "separators", "brackets", "braces", "a", "b", "a_b"}
    assert _tokens(text) == expected  # the regular-expression path
    assert {token.decode() for token in _ascii_tokens(text)} == expected


@settings(max_examples=500, deadline=None)
@given(st.text(st.characters(max_codepoint=127), max_size=40))
def test_ascii_tokens_are_the_unicode_tokenisers(text):
    assert {token.decode() for token in _ascii_tokens(text)} == _tokens(text)


def test_rouge_criterion_details_and_threshold():
    criterion = RougeMatchCriterion(CriterionConfig.rouge_match())
    long_text = "word " * 200
    result = criterion.evaluate_sync(answer(long_text), expecting("word other"))
    assert result.threshold == 0.5
    assert result.details["precision"] == 1.0 and result.details["recall"] == 0.5
    assert result.score == pytest.approx(2 / 3) and result.details["f1"] == result.score
    assert result.details["actual_response"] == long_text[:500]
    assert result.details["expected_response"] == "word other"


@pytest.mark.parametrize(("response", "score"), [("", 1.0), ("something", 0.5)])
def test_rouge_without_expected_response(response, score):
    result = RougeMatchCriterion().evaluate_sync(answer(response), expecting(None))
    assert result.score == score and result.details == {"note": "No expected response defined"}


def test_criterion_names():
    assert ExactMatchCriterion.name == "exact_match"
    assert ContainsKeywordsCriterion.name == "contains_keywords"
    assert RougeMatchCriterion.name == "rouge_match"


# --- a response the instrumentation did not capture is unknown, not empty ---------------------------------


@pytest.mark.parametrize(
    "criterion", [ExactMatchCriterion(), RougeMatchCriterion(), ContainsKeywordsCriterion(keywords=["x"])]
)
def test_uncaptured_response_is_an_error_not_an_empty_answer(criterion):
    uncaptured = ExecutionResult(actual_response="", response_captured=False)
    result = criterion.evaluate_sync(uncaptured, expecting(None))
    assert result.is_error and not result.passed and result.score == 0.0
    assert result.error.startswith("response not captured")
    assert result.threshold == criterion.threshold


def test_no_keywords_still_scores_one_when_the_response_was_not_captured():
    uncaptured = ExecutionResult(response_captured=False)
    assert ContainsKeywordsCriterion().evaluate_sync(uncaptured, expecting(None)).score == 1.0


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=30))
def test_an_identical_response_scores_as_its_tokens_do(text):
    # rouge1 answers equal texts without tokenising; a trailing space (same tokens, other text) takes the plain path
    assert rouge1(text, text) == rouge1(text, text + " ") == (1.0, 1.0, 1.0)
