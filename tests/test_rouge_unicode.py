"""ROUGE-1 treats Unicode spellings of the same text as the same words (NFKC before tokenising)."""

from __future__ import annotations

import unicodedata

import pytest

from tracegrade.criteria.text import RougeMatchCriterion, rouge1
from tracegrade.models.config import CriterionConfig
from tracegrade.models.dataset import EvalCase
from tracegrade.models.execution import ExecutionResult

COMPOSED = "Le café est fermé à Zürich"


@pytest.mark.parametrize(
    ("actual", "expected"),
    [
        (COMPOSED, unicodedata.normalize("NFD", COMPOSED)),  # composed vs decomposed accents
        ("The ﬁnal ofﬁce ﬂoor", "The final office floor"),  # ligatures
        ("Room １２３ opens at ９", "Room 123 opens at 9"),  # full-width digits
        ("ＡＢＣ ｔｅｓｔ", "abc test"),  # full-width letters, case folded after normalising
    ],
)
def test_equal_texts_in_other_unicode_forms_score_one(actual, expected):
    assert rouge1(actual, expected) == pytest.approx((1.0, 1.0, 1.0))
    assert rouge1(expected, actual) == pytest.approx((1.0, 1.0, 1.0))


def test_the_unigram_set_rule_is_unchanged_after_normalising():
    # repeated words count once; half the expected words present -> recall 0.5, precision 1.0
    precision, recall, _ = rouge1("café café", unicodedata.normalize("NFD", "café fermé"))
    assert (precision, recall) == pytest.approx((1.0, 0.5))
    assert rouge1("ﬁ", "fo") == (0.0, 0.0, 0.0)


def test_rouge_criterion_passes_a_decomposed_reference():
    case = EvalCase.single_turn("c1", "where?", expected_response=unicodedata.normalize("NFD", COMPOSED))
    result = RougeMatchCriterion(CriterionConfig.rouge_match(threshold=0.99)).evaluate_sync(
        ExecutionResult(actual_response=COMPOSED), case
    )
    assert result.score == pytest.approx(1.0) and result.passed
