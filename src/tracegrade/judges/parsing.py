"""Robust reading of judge replies: JSON in code fences or prose, scores just outside [0, 1] clamped and flagged.

``extract_json_object`` finds the JSON object in a reply (whole reply, a fenced block, or the first
decodable object inside prose), after dropping a reasoning model's ``<think>`` block; a reply holding
several verdicts with different scores is unreadable rather than read as whichever came first.
``ScoreReader`` reads score fields, clamping out-of-range values and remembering each clamp so the
criterion can report it (a clamp is never silent).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

from tracegrade.errors import TracegradeError
from tracegrade.models.results import TokenUsage

__all__ = ["ClampedScore", "ScoreReader", "UnreadableReply", "extract_json_object"]

# a fenced block's body, after its whole info string and all the whitespace that follows it: the lookaheads keep
# the engine from trying shorter ones, each of which rescanned the rest of a reply without a closing fence
# (quadratic: "```" and 10k spaces took a second)
_FENCE = re.compile(r"```[a-zA-Z0-9_-]*(?![a-zA-Z0-9_-])\s*(?!\s)(.*?)```", re.DOTALL)
# A reasoning model's scratch work, which some servers leave in the reply text: drafts, not the verdict.
_THINKING = re.compile(r"<(think|thinking|reasoning)>.*?</\1>", re.DOTALL | re.IGNORECASE)
_THINKING_OPENER = re.compile(r"<(think|thinking|reasoning)>", re.IGNORECASE)


class UnreadableReply(TracegradeError, ValueError):
    """The judge reply held no usable verdict; ``raw`` is the reply text, ``usage`` what the call cost and
    ``notes`` what that usage lacks (see ``JudgeReply.notes``)."""

    def __init__(self, message: str, raw: str) -> None:
        super().__init__(message)
        self.raw = raw
        self.usage: TokenUsage | None = None
        self.notes: list[str] = []


def _without_thinking(text: str) -> str:
    """``text`` without its ``<think>…</think>`` blocks (``_THINKING``, removed as ``re.sub`` would). A name once
    found without its closer is not tried again (no closer follows a later opener either): tried from every
    opener, as ``re.sub`` does, a reply of unclosed openers was read to its end from each (quadratic)."""
    kept: list[str] = []
    pos = 0
    unclosed: set[str] = set()  # the closer matches the name in any case (IGNORECASE), so the lower-cased name
    while (opener := _THINKING_OPENER.search(text, pos)) is not None:
        name = opener.group(1).lower()
        block = None if name in unclosed else _THINKING.match(text, opener.start())
        if block is None:
            unclosed.add(name)
            kept.append(text[pos : opener.start() + 1])
            pos = opener.start() + 1
        else:
            kept.append(text[pos : opener.start()])
            pos = block.end()
    kept.append(text[pos:])
    return "".join(kept)


def _top_level_objects(text: str) -> list[dict[str, Any]]:
    """Every JSON object in ``text`` that is not inside another, in order."""
    decoder = json.JSONDecoder()
    found: list[dict[str, Any]] = []
    end = 0
    for match in re.finditer(r"\{", text):
        if match.start() < end:  # inside an object already found
            continue
        try:
            value, end_at = decoder.raw_decode(text, match.start())
        except (json.JSONDecodeError, RecursionError):  # not JSON, or nested past what Python's parser can
            continue
        if isinstance(value, dict):
            found.append(value)
            end = end_at
    return found


def _refuse_rival_scores(objects: list[dict[str, Any]], text: str) -> None:
    """Raise when the objects give different ``score`` values: which one is the verdict is anyone's guess."""
    scores = list(dict.fromkeys(json.dumps(o["score"], sort_keys=True) for o in objects if "score" in o))
    if len(scores) > 1:
        raise UnreadableReply(
            f"the judge reply holds {len(scores)} verdicts with different scores ({', '.join(scores)}); "
            "it was asked for one JSON object",
            text,
        )


def extract_json_object(text: str) -> dict[str, Any]:
    """The JSON object a judge replied with; raises :class:`UnreadableReply` when there is none."""
    stripped = _without_thinking(text).strip()
    if not stripped:
        if text.strip():
            raise UnreadableReply("the judge reply holds only its <think> block, no verdict after it", text)
        raise UnreadableReply("the judge returned an empty reply", text)
    candidates = [stripped, *(m.group(1) for m in _FENCE.finditer(stripped))]
    for candidate in candidates:
        try:
            value = json.loads(candidate)
        except (json.JSONDecodeError, RecursionError):
            continue
        if isinstance(value, dict):
            if candidate is not stripped:  # a fenced block: another block or the prose may hold a rival verdict
                _refuse_rival_scores(_top_level_objects(stripped), text)
            return value
    found = _top_level_objects(stripped)
    if not found:
        raise UnreadableReply("the judge reply contains no JSON object", text)
    _refuse_rival_scores(found, text)
    return found[0]


#: how far outside [0, 1] a score may stray (rounding, 1.01) and still be clamped; farther is unreadable
CLAMP_SLACK = 0.05


@dataclass(frozen=True)
class ClampedScore:
    """One out-of-range score the judge returned and the value it was clamped to."""

    field: str
    value: float
    clamped_to: float


@dataclass
class ScoreReader:
    """Reads score fields of one reply; every clamp is recorded in ``clamped``."""

    raw: str
    clamped: list[ClampedScore] = field(default_factory=list)

    def score(self, value: Any, where: str) -> float:
        """``value`` as a score in [0, 1]; raises :class:`UnreadableReply` when it is not a number."""
        if isinstance(value, bool) or value is None:
            raise UnreadableReply(f"{where} is {json.dumps(value)}, not a number", self.raw)
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise UnreadableReply(f"{where} is {json.dumps(value)}, not a number", self.raw) from None
        if math.isnan(number):
            raise UnreadableReply(f"{where} is NaN", self.raw)
        if not -CLAMP_SLACK <= number <= 1 + CLAMP_SLACK:
            # a 7 is a judge scoring on another scale (1-10, say), not a 1.0: read as one, it would pass any case
            raise UnreadableReply(f"{where} is {number:g}, outside the 0-1 scale the judge was asked for", self.raw)
        clamped = min(1.0, max(0.0, number))
        if clamped != number:
            self.clamped.append(ClampedScore(where, number, clamped))
        return clamped

    def required(self, data: dict[str, Any], key: str, where: str | None = None) -> float:
        if key not in data:
            raise UnreadableReply(f"the judge reply has no {key!r} field", self.raw)
        return self.score(data[key], where or key)
