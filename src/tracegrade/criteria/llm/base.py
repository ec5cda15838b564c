"""The shared machinery of LLM-judged criteria: prompt, ``num_samples`` judge calls, honest aggregation.

A ``TemplatedLLMCriterion`` subclass names its template, builds the prompt's data sections, reads one
verdict from a parsed reply and adds its own details. The base class handles the rest: skip rules, an
empty or uncaptured response, provider resolution ("No LLM provider available" scores 0.5 with a
warning), samples run concurrently through the run's judge runtime, dropped samples (raw reply kept),
clamped scores (flagged), "All LLM samples failed", and token usage and cost (with a warning when the judge's
usage or price is unknown). What a judge sent back is kept to ``MAX_KEPT_REPLY`` characters, with the judge's
credentials redacted, since it lands in every report and stored run.
"""

from __future__ import annotations

import asyncio
import logging
import statistics
import threading
from abc import abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from tracegrade.criteria.base import BaseCriterion
from tracegrade.judges import (
    JudgeReply,
    JudgeRequest,
    ProviderUnavailable,
    ScoreReader,
    UnreadableReply,
    current_judge_runtime,
    extract_json_object,
    provider_problem,
    render_prompt,
)
from tracegrade.judges.pricing import configured_price, price_problems
from tracegrade.judges.redaction import judge_secrets, redact
from tracegrade.models.dataset import EvalCase
from tracegrade.models.execution import ExecutionResult
from tracegrade.models.results import NO_RESPONSE_ERROR, CriterionResult, TokenUsage

__all__ = [
    "MAX_KEPT_REPLY",
    "NO_PROVIDER_REASON",
    "NO_RESPONSE_NOTE",
    "NO_RESPONSE_REASON",
    "SampleVerdict",
    "TemplatedLLMCriterion",
    "clipped",
    "merged",
    "question_text",
    "sample_spread",
    "text_list",
]

log = logging.getLogger("tracegrade.evaluation")
judges_log = logging.getLogger("tracegrade.judges")
_SAID: set[str] = set()  # usage notes already logged by this process
_SAID_LOCK = threading.Lock()

NO_PROVIDER_REASON = "No LLM provider available"
NO_RESPONSE_REASON = "agent produced no response"
NO_RESPONSE_NOTE = "No response to evaluate"
#: the most characters of a judge's reply (or its reasoning, or a failed call's error) a result keeps
MAX_KEPT_REPLY = 20_000


def clipped(text: str, limit: int = MAX_KEPT_REPLY) -> str:
    """``text`` cut to ``limit`` characters, saying how much was left out (a judge may send megabytes)."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text) - limit} more characters not kept)"


@dataclass
class SampleVerdict:
    """One judge sample's verdict: its score, reasoning and criterion-specific extras."""

    score: float
    reasoning: str = ""
    extras: dict[str, Any] = field(default_factory=dict)


@dataclass
class _SampleOutcome:
    index: int
    verdict: SampleVerdict | None = None
    reply: JudgeReply | None = None
    clamped: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    raw_reply: str | None = None
    provider_missing: bool = False
    usage: TokenUsage = field(default_factory=TokenUsage)
    notes: list[str] = field(default_factory=list)


def merged(verdicts: list[SampleVerdict], key: str) -> list[str]:
    """Every verdict's ``extras[key]`` list joined, in first-seen order without repeats."""
    return list(dict.fromkeys(item for v in verdicts for item in v.extras[key]))


def sample_spread(scores: Sequence[float], threshold: float) -> dict[str, Any] | None:
    """How far one criterion's judge samples disagree: their range, standard deviation and whether they
    fall on both sides of the threshold (``split``); None for a single sample (nothing to compare)."""
    if len(scores) < 2:
        return None
    return {
        "samples": len(scores),
        "range": max(scores) - min(scores),
        "stdev": statistics.pstdev(scores),
        "split": min(scores) < threshold <= max(scores),
    }


def text_list(value: Any) -> list[str]:
    """A judge's list field as strings (a single string becomes a one-item list)."""
    if isinstance(value, str):
        return [clipped(value)] if value.strip() else []
    if isinstance(value, list):
        return [clipped(str(v)) for v in value if str(v).strip()]
    return []


def question_text(actual: ExecutionResult, expected: EvalCase) -> str:
    """The user's question: the case's first user message, else the one the trace recorded."""
    return expected.first_user_text() or actual.user_query or ""


class TemplatedLLMCriterion(BaseCriterion):
    """Base of the LLM-judged criteria. Subclasses set ``template`` and implement the hooks below."""

    template: ClassVar[str]
    grades_response: ClassVar[bool] = True  # an empty/uncaptured agent response cannot be graded
    # The seed's rule for some criteria: an empty response is "not applicable" (1.0, skipped) rather than 0.0.
    skips_empty_response: ClassVar[bool] = False

    def validate_config(self) -> list[str]:
        return super().validate_config() + price_problems(self.config)

    # -- hooks -----------------------------------------------------------------------------------
    def not_applicable(self, actual: ExecutionResult, expected: EvalCase) -> str | None:
        """A note when the case lacks what this criterion needs (the result is 1.0, marked skipped)."""
        return None

    @abstractmethod
    def prompt_data(self, actual: ExecutionResult, expected: EvalCase) -> dict[str, str]:
        """The untrusted text sections of the prompt (each is fenced as data)."""

    def prompt_params(self, actual: ExecutionResult, expected: EvalCase) -> dict[str, str]:
        """Trusted prompt values (configuration the eval author wrote)."""
        return {}

    def read_verdict(self, reply: dict[str, Any], scores: ScoreReader) -> SampleVerdict:
        """One verdict from a parsed reply; raise ``UnreadableReply`` when it lacks what is needed."""
        return SampleVerdict(
            scores.required(reply, "score"), str(reply.get("reasoning", "")), self.verdict_extras(reply, scores)
        )

    def verdict_extras(self, reply: dict[str, Any], scores: ScoreReader) -> dict[str, Any]:
        """Criterion-specific fields of one verdict (kept in that sample's details)."""
        return {}

    def extra_details(self, verdicts: list[SampleVerdict], score: float) -> dict[str, Any]:
        """Criterion-specific details computed from the kept verdicts and the final score."""
        return {}

    def response_text(self, actual: ExecutionResult) -> str:
        """The text this criterion grades (the final response by default)."""
        return actual.actual_response

    # -- evaluation ------------------------------------------------------------------------------
    def _not_applicable(self, note: str) -> CriterionResult:
        result = self._skipped(note)
        result.score = 1.0
        result.details["note"] = note
        return result

    def _request(self, actual: ExecutionResult, expected: EvalCase) -> JudgeRequest:
        prompt = render_prompt(self.template, self.prompt_data(actual, expected), self.prompt_params(actual, expected))
        cfg = self.config
        return JudgeRequest(
            model=cfg.judge_model,
            prompt=prompt.text,
            cache_text=prompt.cache_text,
            api_style=cfg.api_style,
            temperature=cfg.temperature,
            timeout_seconds=cfg.timeout_seconds,
            api_base=cfg.api_base,
            api_key=cfg.api_key,
            use_vertex_ai=cfg.use_vertex_ai,
            price=configured_price(cfg),
        )

    async def evaluate(self, actual: ExecutionResult, expected: EvalCase) -> CriterionResult:
        note = self.not_applicable(actual, expected)
        if note is not None:
            return self._not_applicable(note)
        if self.grades_response:
            if not actual.response_captured:
                return self._failure(
                    NO_RESPONSE_ERROR,
                    {"reason": "the trace did not record the agent's response (content capture off?)"},
                )
            if not self.response_text(actual).strip():
                if self.skips_empty_response:
                    return self._not_applicable(NO_RESPONSE_NOTE)
                return self._result(0.0, {"reason": NO_RESPONSE_REASON, "judge_model": self.config.judge_model})
        cfg = self.config
        problem = provider_problem(cfg.judge_model, cfg.api_key, cfg.api_base, cfg.use_vertex_ai)
        if problem is not None:
            return self._no_provider(problem)
        request = self._request(actual, expected)
        runtime = current_judge_runtime()
        samples = (self._sample(runtime, request, i, expected.eval_id) for i in range(cfg.num_samples))
        outcomes = await asyncio.gather(*samples)
        return self._aggregate(list(outcomes))

    async def _sample(self, runtime: Any, request: JudgeRequest, index: int, case_id: str) -> _SampleOutcome:
        outcome = _SampleOutcome(index)
        secrets = judge_secrets(request.api_key, request.api_base)

        def parse(text: str) -> tuple[SampleVerdict, list[dict[str, Any]]]:
            scores = ScoreReader(text)
            verdict = self.read_verdict(extract_json_object(text), scores)
            verdict.reasoning = clipped(redact(verdict.reasoning, secrets))
            return verdict, [
                {"sample": index, "field": c.field, "value": c.value, "clamped_to": c.clamped_to}
                for c in scores.clamped
            ]

        try:
            (outcome.verdict, outcome.clamped), outcome.reply = await runtime.complete(request, index, parse)
            outcome.usage, outcome.notes = outcome.reply.usage, outcome.reply.notes
            outcome.reply.text = clipped(redact(outcome.reply.text, secrets))
        except ProviderUnavailable as exc:
            outcome.provider_missing, outcome.error = True, str(exc)
        except UnreadableReply as exc:
            outcome.error, outcome.raw_reply = f"unreadable reply: {exc}", clipped(redact(exc.raw, secrets))
            outcome.usage, outcome.notes = exc.usage or TokenUsage(), exc.notes
        except Exception as exc:  # any failed sample is dropped, and says why
            outcome.error = f"{type(exc).__name__}: {exc}"
        if outcome.error:
            outcome.error = clipped(redact(outcome.error, secrets), 2_000)
            log.warning("%s, case %s: judge sample %d dropped: %s", self.name, case_id, index, outcome.error)
        return outcome

    def _no_provider(self, problem: str) -> CriterionResult:
        result = self._result(
            0.5, {"reason": NO_PROVIDER_REASON, "problem": problem, "judge_model": self.config.judge_model}
        )
        result.warnings.append(f"{NO_PROVIDER_REASON} for judge model {self.config.judge_model!r}: {problem}")
        return result

    @staticmethod
    def _noted(result: CriterionResult, outcomes: list[_SampleOutcome]) -> CriterionResult:
        """Say what the usage figures lack (no price, no token counts): a silent $0 reads as free.

        Each note is in the result's details and logged once per process as a warning on the
        ``tracegrade.judges`` logger (a result warning would mark every case of a free local judge as warned).
        """
        notes = list(dict.fromkeys(n for o in outcomes for n in o.notes))
        if notes:
            result.details["usage_notes"] = notes
            for note in notes:
                with _SAID_LOCK:
                    first = note not in _SAID
                    _SAID.add(note)
                if first:
                    judges_log.warning("%s", note)
        return result

    def _aggregate(self, outcomes: list[_SampleOutcome]) -> CriterionResult:
        usage = sum((o.usage for o in outcomes), TokenUsage())
        kept = [o for o in outcomes if o.verdict is not None]
        dropped = [{"sample": o.index, "error": o.error, "raw_reply": o.raw_reply} for o in outcomes if o.error]
        if not kept and all(o.provider_missing for o in outcomes):
            return self._no_provider(outcomes[0].error or "")
        if not kept:
            result = self._failure(
                "All LLM samples failed",
                {
                    "errors": [d["error"] for d in dropped],
                    "dropped_samples": dropped,
                    "judge_model": self.config.judge_model,
                },
            )
            result.token_usage = usage
            return self._noted(result, outcomes)
        verdicts = [o.verdict for o in kept if o.verdict is not None]
        score = sum(v.score for v in verdicts) / len(verdicts)
        clamped = [c for o in kept for c in o.clamped]
        details: dict[str, Any] = {
            "samples": [
                {
                    "index": o.index,
                    "score": o.verdict.score,
                    "reasoning": o.verdict.reasoning,
                    "raw_reply": o.reply.text if o.reply else None,
                    "cached": bool(o.reply and o.reply.cached),
                    **o.verdict.extras,
                }
                for o in kept
                if o.verdict is not None
            ],
            "individual_scores": [v.score for v in verdicts],
            "reasonings": [v.reasoning for v in verdicts],
            "judge_model": self.config.judge_model,
            "reason": verdicts[-1].reasoning,
            "cache_hits": sum(1 for o in kept if o.reply and o.reply.cached),
        }
        spread = sample_spread([v.score for v in verdicts], self.threshold)
        if spread is not None:
            details["sample_spread"] = spread
        if dropped:
            details["dropped_samples"] = dropped
        if clamped:
            details["clamped_scores"] = clamped
        details.update(self.extra_details(verdicts, score))
        result = self._result(score, details, usage)
        if clamped:
            values = ", ".join(f"{c['field']}={c['value']:g} (sample {c['sample']})" for c in clamped)
            result.warnings.append(f"judge returned scores outside [0, 1], clamped: {values}")
        if dropped:
            result.warnings.append(
                f"{len(dropped)} of {len(outcomes)} judge samples failed and were dropped: {dropped[0]['error']}"
            )
        return self._noted(result, outcomes)
