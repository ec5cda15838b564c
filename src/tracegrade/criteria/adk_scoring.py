"""ADK-compatible scoring (``CriterionConfig.scoring="adk"``): the numbers google-adk's evaluators give.

* **Trajectory** (``tool_trajectory_avg_score``, slot ``trajectory``): each invocation scores 1 when its tool
  calls match the expected ones under ``match_type`` and 0 otherwise; the case scores the mean over
  invocations. Calls are equal when their names are and, unless ``check_args`` is off (ADK's
  ``ignore_args``), their argument objects are equal as Python values: an expected ``{}`` means "no
  arguments", ``1 == 1.0``, and a call written without ``args`` (ADK's None) equals only another such call.
  EXACT needs the same calls in the same order; IN_ORDER finds the expected calls in order among others;
  ANY_ORDER finds each expected call among the others, each actual call used once. The actual calls are those
  ADK's trajectory holds: the calls of the agents in the run's session, not the calls made inside another tool
  call (an agent called as a tool, ADK's ``AgentTool``, runs in a session of its own).
* **Response match** (``response_match_score``, slot ``rouge_match``): ROUGE-1 F-measure of each invocation's
  response against its expected response, averaged over invocations. Counts are clipped unigram counts;
  tokens come from ADK's tokenizer: NFKC, lower case, CJK characters one token each, Thai/Lao/Khmer/Myanmar
  split by grapheme, other runs of word characters kept whole, and ASCII words through ``rouge-score``'s
  tokenizer with the Porter stemmer (:mod:`tracegrade.criteria.porter`) for words longer than three letters.
  An invocation without an expected response scores 0, as in ADK.

Both need the trace's turns to line up with the case's invocations (ADK refuses a different count too).
tracegrade's own rules (``scoring="tracegrade"``) are unchanged: partial credit over the concatenated
calls, ROUGE over unique tokens. ``bench/adk_side_by_side.py`` compares these functions with google-adk's.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Sequence
from typing import Any

from tracegrade.criteria.base import BaseCriterion, SyncCriterion
from tracegrade.criteria.porter import stem
from tracegrade.models.config import MatchType
from tracegrade.models.dataset import EvalCase, StepType, ToolCall
from tracegrade.models.execution import ExecutionResult
from tracegrade.models.results import CriterionResult

__all__ = [
    "ADK_CRITERIA",
    "AdkResponseMatchCriterion",
    "AdkTrajectoryCriterion",
    "adk_rouge1",
    "adk_tokens",
    "adk_tool_calls_match",
]

_EXCERPT_CHARS = 500
_ASCII_NON_ALNUM = re.compile(r"[^a-z0-9]+")


def _cjk(code: int) -> bool:
    return 0x4E00 <= code <= 0x9FFF or 0x3040 <= code <= 0x30FF or 0xAC00 <= code <= 0xD7AF


def _unspaced(code: int) -> bool:
    """Thai, Lao, Khmer, Myanmar: written without spaces, tokenised by grapheme (base plus marks)."""
    return 0x0E00 <= code <= 0x0EFF or 0x1780 <= code <= 0x17FF or 0x1000 <= code <= 0x109F


def _ascii_tokens(word: str) -> list[str]:
    """``rouge-score``'s tokenizer on one ASCII word: lower case, split at non-alphanumerics, stem if > 3 long."""
    return [stem(t) if len(t) > 3 else t for t in _ASCII_NON_ALNUM.sub(" ", word.lower()).split()]


def adk_tokens(text: str) -> list[str]:
    """The tokens ADK's ROUGE scorer compares."""
    out: list[str] = []
    for char in unicodedata.normalize("NFKC", text).lower():
        code = ord(char)
        if _cjk(code):
            out += (" ", char, " ")
        elif _unspaced(code):
            out += (char,) if unicodedata.category(char).startswith("M") else (" ", char)
        elif char.isalnum() or unicodedata.category(char).startswith("M"):
            out.append(char)
        else:
            out.append(" ")
    tokens: list[str] = []
    for word in "".join(out).split():
        if word.isascii():
            tokens += _ascii_tokens(word)
        else:
            tokens.append(word)
    return tokens


def adk_rouge1(response: str, reference: str) -> tuple[float, float, float]:
    """ROUGE-1 ``(precision, recall, f)`` over clipped token counts, as ADK's ``response_match_score``."""
    wanted, got = Counter(adk_tokens(reference)), Counter(adk_tokens(response))
    overlap = sum(min(count, got[token]) for token, count in wanted.items())
    precision = overlap / max(sum(got.values()), 1)
    recall = overlap / max(sum(wanted.values()), 1)
    f = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
    return precision, recall, f


def _adk_args(call: ToolCall) -> dict[str, Any] | None:
    """The call's arguments as ADK holds them: None for a call written without ``args``, which is not ``{}``."""
    return call.args if call.args_given else None


def _same(actual: ToolCall, expected: ToolCall, check_args: bool) -> bool:
    return actual.name == expected.name and (not check_args or _adk_args(actual) == _adk_args(expected))


def adk_tool_calls_match(
    actual: Sequence[ToolCall], expected: Sequence[ToolCall], match_type: MatchType, check_args: bool
) -> bool:
    """Whether one invocation's calls match the expected ones under ADK's rules for ``match_type``."""
    if match_type is MatchType.EXACT:
        return len(actual) == len(expected) and all(_same(a, e, check_args) for a, e in zip(actual, expected))
    if match_type is MatchType.IN_ORDER:
        position = 0
        for call in actual:
            if position < len(expected) and _same(call, expected[position], check_args):
                position += 1
        return position == len(expected)
    unused = list(actual)
    for wanted in expected:
        index = next((i for i, call in enumerate(unused) if _same(call, wanted, check_args)), None)
        if index is None:
            return False
        unused.pop(index)
    return True


def _session_calls(actual: ExecutionResult, calls: Sequence[ToolCall]) -> list[ToolCall]:
    """``calls`` without those made inside another tool call (the mapper marks their steps ``within_tool``)."""
    inner = {
        s.metadata.get("span_id")
        for s in actual.trajectory
        if s.step_type == StepType.TOOL and s.metadata.get("within_tool")
    }
    return [c for c in calls if c.span_id is None or c.span_id not in inner]


def _turns(actual: ExecutionResult, expected: EvalCase) -> list[tuple[list[ToolCall], str]] | None:
    """Each invocation's actual ``(tool calls, response)``, or None when the trace's turns do not line up."""
    if len(actual.turns) == len(expected.conversation):
        return [(_session_calls(actual, t.tool_calls), t.agent_response) for t in actual.turns]
    if len(expected.conversation) == 1 and len(actual.turns) <= 1:
        return [(_session_calls(actual, actual.tool_calls), actual.actual_response)]
    return None


class _AdkCriterion(SyncCriterion):
    """Scores each invocation, then the case as their mean (ADK's ``overall_score``)."""

    adk_metric = ""
    reads = frozenset({"turns", "tool_calls", "actual_response", "trajectory"})

    def evaluate_sync(self, actual: ExecutionResult, expected: EvalCase) -> CriterionResult:
        turns = _turns(actual, expected)
        if turns is None:
            return self._failure(
                f"ADK scoring compares invocation by invocation, but the case has {len(expected.conversation)} "
                f"invocations and the trace {len(actual.turns)} turns; grade the whole conversation as one run "
                "(AgentEvaluator runs each invocation as a turn) or use scoring='tracegrade'",
                {"scoring": "adk"},
            )
        if not turns:
            return self._skipped("the case has no invocations")
        per_turn = [
            self._invocation(calls, response, turn) for (calls, response), turn in zip(turns, expected.conversation)
        ]
        score = sum(p["score"] for p in per_turn) / len(per_turn)
        failed = [i for i, p in enumerate(per_turn) if p["score"] < 1.0]
        reason = f"ADK {self.adk_metric}: mean {score:.3f} over {len(per_turn)} invocation(s)"
        if failed and self.adk_metric == "tool_trajectory_avg_score":
            reason += "; invocations whose calls did not match: " + ", ".join(str(i) for i in failed)
        return self._result(
            score, {"reason": reason, "scoring": "adk", "adk_metric": self.adk_metric, "invocations": per_turn}
        )

    def _invocation(self, calls: list[ToolCall], response: str, turn: Any) -> dict[str, Any]:
        raise NotImplementedError


class AdkTrajectoryCriterion(_AdkCriterion):
    """``tool_trajectory_avg_score`` as ADK computes it (see the module docstring)."""

    name = "tool_trajectory_avg_score"
    description = "Tool calls match the expected ones, 1/0 per invocation averaged (ADK's rules)"
    adk_metric = "tool_trajectory_avg_score"

    def evaluate_sync(self, actual: ExecutionResult, expected: EvalCase) -> CriterionResult:
        uncaptured = sorted({c.name for c in _session_calls(actual, actual.tool_calls) if not c.args_captured})
        if self.config.check_args and uncaptured:
            return self._failure(
                f"arguments not captured for {', '.join(map(repr, uncaptured))}: the trace recorded these calls "
                "without their arguments, so they cannot be compared; enable content capture (tracegrade also "
                "reads content from OTel log records) or set ignore_args",
                {"uncaptured_tools": uncaptured, "scoring": "adk"},
            )
        return super().evaluate_sync(actual, expected)

    def _invocation(self, calls: list[ToolCall], response: str, turn: Any) -> dict[str, Any]:
        wanted = turn.expected_tool_trajectory
        matched = adk_tool_calls_match(calls, wanted, self.config.match_type, self.config.check_args)
        return {
            "score": 1.0 if matched else 0.0,
            "expected": [{"name": c.name, "args": _adk_args(c)} for c in wanted],
            "actual": [{"name": c.name, "args": _adk_args(c)} for c in calls],
        }


class AdkResponseMatchCriterion(_AdkCriterion):
    """``response_match_score`` (ROUGE-1 F) as ADK computes it (see the module docstring)."""

    name = "rouge_match"
    description = "ROUGE-1 F with the expected response per invocation, averaged (ADK's response_match_score)"
    adk_metric = "response_match_score"

    def _invocation(self, calls: list[ToolCall], response: str, turn: Any) -> dict[str, Any]:
        reference = turn.expected_final_response.get_text() if turn.expected_final_response else ""
        precision, recall, f = adk_rouge1(response, reference)
        return {
            "score": f,
            "precision": precision,
            "recall": recall,
            "actual_response": response[:_EXCERPT_CHARS],
            "expected_response": reference[:_EXCERPT_CHARS],
        }


#: slot -> the class that grades it when the slot's config has ``scoring="adk"``
ADK_CRITERIA: dict[str, type[BaseCriterion]] = {
    "trajectory": AdkTrajectoryCriterion,
    "rouge_match": AdkResponseMatchCriterion,
}
