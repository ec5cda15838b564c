"""Text criteria on the final response: exact match, keyword presence and ROUGE-1 overlap (no LLM).

A response the instrumentation did not capture (``ExecutionResult.response_captured`` false: content
capture off) is unknown, not empty: these criteria then return an error result that says so, rather
than scoring an empty string.
"""

from __future__ import annotations

import re
import unicodedata
from abc import abstractmethod

from tracegrade.criteria.base import SyncCriterion
from tracegrade.criteria.registry import register_criterion
from tracegrade.models.config import CriterionConfig
from tracegrade.models.dataset import EvalCase
from tracegrade.models.execution import ExecutionResult
from tracegrade.models.results import NO_RESPONSE_ERROR, CriterionResult

__all__ = ["RESPONSE_NOT_CAPTURED", "ContainsKeywordsCriterion", "ExactMatchCriterion", "RougeMatchCriterion", "rouge1"]

_EXCERPT_CHARS = 500
# A token is a maximal run of Unicode word characters: the same as turning every character that is
# neither a word character nor whitespace into a space and splitting on whitespace.
_TOKEN = re.compile(r"\w+")
# The same for ASCII text, several times faster: as bytes, every byte that is not an ASCII word character
# becomes a space (one table lookup per byte), then split on whitespace.
_ASCII_NON_WORD_TO_SPACE = bytes(c if (c < 128 and chr(c).isalnum()) or c == ord("_") else ord(" ") for c in range(256))
RESPONSE_NOT_CAPTURED = (
    f"{NO_RESPONSE_ERROR}: the trace recorded no final response text (content capture is off), so it "
    "cannot be compared; enable message content capture in the instrumentation"
)


class _ResponseCriterion(SyncCriterion):
    """Scores the final response text; an uncaptured response is an error result."""

    reads = frozenset({"actual_response", "response_captured"})

    def evaluate_sync(self, actual: ExecutionResult, expected: EvalCase) -> CriterionResult:
        if not actual.response_captured:
            return self._failure(RESPONSE_NOT_CAPTURED)
        return self._score(actual.actual_response, expected)

    @abstractmethod
    def _score(self, response: str, expected: EvalCase) -> CriterionResult:
        """Score the captured response."""


@register_criterion()
class ExactMatchCriterion(_ResponseCriterion):
    """The stripped response equals the last non-empty expected response, case-sensitively (1.0 or 0.0).

    With no expected response the case passes only if the agent's response is blank too.
    """

    name = "exact_match"
    description = "Response equals the expected response exactly (after stripping whitespace)"

    def _score(self, response: str, expected: EvalCase) -> CriterionResult:
        response = response.strip()
        wanted = expected.last_expected_response().strip()
        match = response == wanted
        return self._result(
            1.0 if match else 0.0,
            {"match": match, "actual_length": len(response), "expected_length": len(wanted)},
        )


@register_criterion()
class ContainsKeywordsCriterion(_ResponseCriterion):
    """Case-insensitive substring search for keywords; score = found / len(keywords).

    Keywords come from ``config.keywords`` when it is non-empty, else from the ``keywords`` argument.
    With no keywords at all the score is 1.0 with the note ``"No keywords specified"``.
    """

    name = "contains_keywords"
    description = "Response contains the given keywords (case-insensitive)"
    requires_reference = False

    def __init__(self, keywords: list[str] | None = None, config: CriterionConfig | None = None) -> None:
        super().__init__(config)
        self.keywords = list(self.config.keywords or keywords or [])
        self._lowered = [(keyword, keyword.lower()) for keyword in self.keywords]

    def evaluate_sync(self, actual: ExecutionResult, expected: EvalCase) -> CriterionResult:
        if not self.keywords:  # documented: no keywords scores 1.0, whatever the response
            return self._result(1.0, {"note": "No keywords specified"})
        return super().evaluate_sync(actual, expected)

    def _score(self, response: str, expected: EvalCase) -> CriterionResult:
        response = response.lower()
        found: list[str] = []
        missing: list[str] = []
        for keyword, lowered in self._lowered:
            (found if lowered in response else missing).append(keyword)
        return self._result(
            len(found) / len(self.keywords), {"found": found, "missing": missing, "keywords": self.keywords}
        )


def _tokens(text: str) -> set[str]:
    # NFKC first: a decomposed accent, a ligature or a full-width digit is the same word as its plain
    # form, and a combining mark is not a word character, so without it "cafe\u0301" would tokenise as "cafe".
    return set(_TOKEN.findall(unicodedata.normalize("NFKC", text).lower()))


def _ascii_tokens(text: str) -> set[bytes]:
    """``_tokens`` of ASCII text (already NFKC), as bytes: only the sets' sizes and overlap are used."""
    return set(text.encode("ascii").lower().translate(_ASCII_NON_WORD_TO_SPACE).split())


def rouge1(actual: str, expected: str) -> tuple[float, float, float]:
    """ROUGE-1 ``(precision, recall, f1)`` over NFKC-normalised, lowercased, punctuation-stripped unigram sets."""
    if actual == expected:  # the same tokens, or none on either side: (1, 1, 1) without tokenising
        return 1.0, 1.0, 1.0
    actual_tokens: set[str] | set[bytes]
    expected_tokens: set[str] | set[bytes]
    if actual.isascii() and expected.isascii():
        actual_tokens, expected_tokens = _ascii_tokens(actual), _ascii_tokens(expected)
    else:
        actual_tokens, expected_tokens = _tokens(actual), _tokens(expected)
    if not expected_tokens:
        return (1.0, 1.0, 1.0) if not actual_tokens else (0.0, 0.0, 0.0)
    overlap = len(actual_tokens & expected_tokens)
    if not actual_tokens or not overlap:
        return 0.0, 0.0, 0.0
    precision, recall = overlap / len(actual_tokens), overlap / len(expected_tokens)
    return precision, recall, 2 * precision * recall / (precision + recall)


@register_criterion()
class RougeMatchCriterion(_ResponseCriterion):
    """ROUGE-1 F1 between the response and the last expected response.

    With no expected response the score is 1.0 if the agent produced nothing, otherwise 0.5.
    """

    name = "rouge_match"
    description = "Word overlap (ROUGE-1 F1) with the expected response"

    def _score(self, response: str, expected: EvalCase) -> CriterionResult:
        wanted = expected.last_expected_response()
        if not wanted.strip():
            return self._result(0.5 if response.strip() else 1.0, {"note": "No expected response defined"})
        precision, recall, f1 = rouge1(response, wanted)
        return self._result(
            f1,
            {
                "precision": precision,
                "recall": recall,
                "f1": f1,
                "actual_response": response[:_EXCERPT_CHARS],
                "expected_response": wanted[:_EXCERPT_CHARS],
            },
        )
