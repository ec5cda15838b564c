"""Grading results: per criterion, per case, per run, plus token usage and summary statistics."""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    ValidatorFunctionWrapHandler,
    WithJsonSchema,
    computed_field,
    field_validator,
    model_validator,
)

from tracegrade.models.dataset import ToolCall, TrajectoryStep
from tracegrade.models.expectations import case_expectation

__all__ = [
    "NO_RESPONSE_ERROR",
    "CriterionResult",
    "CriterionStats",
    "EvalCaseResult",
    "EvalReport",
    "EvalSummary",
    "NodeDetail",
    "TokenUsage",
    "TrialStats",
    "no_tokens",
]


def _null_as_nan(value: Any) -> Any:
    return math.nan if value is None else value


#: A number of a saved report. JSON has none for NaN or infinity: the writers (the JSON reporter,
#: EvalReport.to_file, the store) put ``null`` there, read back as NaN; so do the strings "nan" and "inf" that
#: earlier versions wrote.
ReportNumber = Annotated[
    float,
    BeforeValidator(_null_as_nan),
    WithJsonSchema({"anyOf": [{"type": "number"}, {"type": "null"}]}),
]


class TokenUsage(BaseModel):
    """Token counts (and judge cost in USD, when known). ``a + b`` adds every field; ``sum()`` works.

    Immutable (``a + b`` makes a new one), so every result that used no tokens shares one zero usage
    (``no_tokens``) instead of building its own: deterministic criteria build one result per case each.
    """

    model_config = ConfigDict(extra="ignore", frozen=True)

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_creation_tokens: int = 0
    cost_usd: ReportNumber = 0.0
    calls: int = 0

    @computed_field  # type: ignore[prop-decorator]
    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def __add__(self, other: object) -> TokenUsage:
        if not isinstance(other, TokenUsage):
            return NotImplemented
        if not other.has_any():  # immutable, so the sum may be self itself
            return self
        if not self.has_any():
            return other
        return TokenUsage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_creation_tokens=self.cache_creation_tokens + other.cache_creation_tokens,
            cost_usd=self.cost_usd + other.cost_usd,
            calls=self.calls + other.calls,
        )

    def minus(self, other: TokenUsage) -> TokenUsage:
        """Every field of ``self`` less ``other``'s, floored at zero."""
        return TokenUsage(
            input_tokens=max(0, self.input_tokens - other.input_tokens),
            output_tokens=max(0, self.output_tokens - other.output_tokens),
            cache_read_tokens=max(0, self.cache_read_tokens - other.cache_read_tokens),
            cache_creation_tokens=max(0, self.cache_creation_tokens - other.cache_creation_tokens),
            cost_usd=max(0.0, self.cost_usd - other.cost_usd),
            calls=max(0, self.calls - other.calls),
        )

    @classmethod
    def total(cls, usages: Iterable[TokenUsage]) -> TokenUsage:
        """The sum of ``usages`` (what ``sum(usages, TokenUsage())`` gives, added in the same order), built once:
        adding two builds a model, and most usages are all zeros (deterministic criteria), whose sum is the shared
        ``no_tokens()``."""
        inputs = outputs = cache_reads = cache_creations = calls = 0
        cost = 0.0
        counted = False
        for usage in usages:
            if usage.has_any():
                counted = True
                inputs += usage.input_tokens
                outputs += usage.output_tokens
                cache_reads += usage.cache_read_tokens
                cache_creations += usage.cache_creation_tokens
                cost += usage.cost_usd
                calls += usage.calls
        if not counted:
            return _NO_TOKENS
        return cls(
            input_tokens=inputs,
            output_tokens=outputs,
            cache_read_tokens=cache_reads,
            cache_creation_tokens=cache_creations,
            cost_usd=cost,
            calls=calls,
        )

    def counts(self) -> tuple[int, int, int, int, float, int]:
        """Every field, in declaration order (two usages with equal counts are equal)."""
        return (
            self.input_tokens,
            self.output_tokens,
            self.cache_read_tokens,
            self.cache_creation_tokens,
            self.cost_usd,
            self.calls,
        )

    def has_any(self) -> bool:
        """Is any field non-zero (cache-creation tokens too: a prompt-cache write is usage)?"""
        return bool(
            self.input_tokens
            or self.output_tokens
            or self.cache_read_tokens
            or self.cache_creation_tokens
            or self.cost_usd
            or self.calls
        )

    def __radd__(self, other: object) -> TokenUsage:
        if other == 0:
            return self
        return NotImplemented  # type: ignore[return-value]

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump()

    def is_zero(self) -> bool:
        """Is every field zero (reporters leave such a usage out)?"""
        return not self.has_any()


_NO_TOKENS = TokenUsage()


def no_tokens() -> TokenUsage:
    """The zero ``TokenUsage`` every result that used no tokens shares (it is immutable)."""
    return _NO_TOKENS


class TrialStats(BaseModel):
    """Repeated trials of one case (``EvalConfig.num_runs``, or several recorded traces of it): the mean score
    (of a case: its pass fraction) with a 95% Wilson interval, pass@k (any of the k trials passed), pass^k
    (all of them passed) and ``flaky`` (the trials disagree on pass/fail)."""

    trials: int
    passed: int
    mean: ReportNumber
    ci_low: ReportNumber
    ci_high: ReportNumber
    pass_at_k: ReportNumber
    pass_hat_k: ReportNumber
    flaky: bool


#: how a criterion's error begins when the run recorded no response to grade (``criteria.text``, ``criteria.llm``)
NO_RESPONSE_ERROR = "response not captured"


class CriterionResult(BaseModel):
    """One criterion's verdict on one case. ``passed`` is ``score >= threshold``.

    ``skipped`` marks a criterion that could not apply (for example, it needs an expected response
    and the trace has none); ``warnings`` carries problems every reporter must show prominently.
    """

    criterion: str
    score: ReportNumber
    passed: bool
    threshold: ReportNumber = 0.0
    details: dict[str, Any] = Field(default_factory=dict)
    error: str | None = None
    token_usage: TokenUsage = Field(default_factory=no_tokens)
    skipped: bool = False
    warnings: list[str] = Field(default_factory=list)
    trial_stats: TrialStats | None = None  # set when the case ran several trials (score is then their mean)

    @field_validator("details", mode="wrap")
    @classmethod
    def _details_as_given(cls, value: Any, validate: ValidatorFunctionWrapHandler) -> dict[str, Any]:
        # Criteria build a fresh dict of details for every result (thousands a second): a plain dict is kept as
        # given rather than validated into a copy; anything else (a mapping, JSON) is validated as usual.
        return value if type(value) is dict else validate(value)  # type: ignore[no-any-return]

    @classmethod
    def success(
        cls,
        criterion: str,
        score: float,
        threshold: float,
        details: dict[str, Any] | None = None,
        token_usage: TokenUsage | None = None,
    ) -> CriterionResult:
        score = min(1.0, max(0.0, float(score)))
        return cls(
            criterion=criterion,
            score=score,
            passed=score >= threshold,
            threshold=threshold,
            details=details or {},
            token_usage=token_usage or _NO_TOKENS,
        )

    @classmethod
    def failure(cls, criterion: str, error: str, threshold: float = 0.0) -> CriterionResult:
        return cls(criterion=criterion, score=0.0, passed=False, threshold=threshold, error=error)

    @property
    def reason(self) -> str | None:
        return self.details.get("reason") if isinstance(self.details, dict) and self.details else None

    @property
    def is_error(self) -> bool:
        return self.error is not None

    @property
    def is_grading_error(self) -> bool:
        """An error of the grading itself (a judge that failed, a criterion that raised, a missing schema), which
        says nothing of the run; not the error of a run that recorded no response (its agent crashed or answered
        nothing, or its content capture was off), which is that run's failure."""
        return self.error is not None and not self.error.startswith(NO_RESPONSE_ERROR)


class NodeDetail(BaseModel):
    """Per-node LLM input/output and tokens, filled from LLM spans."""

    node_name: str = ""
    input_messages: list[dict[str, Any]] = Field(default_factory=list)
    response_text: str = ""
    token_usage: TokenUsage = Field(default_factory=no_tokens)
    timestamp: ReportNumber = 0.0
    model: str | None = None
    tool_calls: list[dict[str, Any]] = Field(default_factory=list)


class EvalCaseResult(BaseModel):
    """One case's outcome: every criterion result plus what the agent actually did."""

    eval_id: str
    name: str = ""
    passed: bool
    criterion_results: list[CriterionResult] = Field(default_factory=list)
    actual_trajectory: list[TrajectoryStep] = Field(default_factory=list)
    actual_tool_calls: list[ToolCall] = Field(default_factory=list)
    actual_response: str = ""
    messages: list[dict[str, Any]] = Field(default_factory=list)
    node_responses: list[dict[str, Any]] = Field(default_factory=list)
    node_visits: list[str] = Field(default_factory=list)
    duration_seconds: ReportNumber = 0.0
    error: str | None = None
    # the agent's traceback when it raised (tracegrade's frames left out; the error names the user's frame)
    error_traceback: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    turn_results: list[dict[str, Any]] = Field(default_factory=list)
    token_usage: TokenUsage = Field(default_factory=no_tokens)
    agent_token_usage: TokenUsage = Field(default_factory=no_tokens)
    node_details: list[NodeDetail] = Field(default_factory=list)
    trace_ids: list[str] = Field(default_factory=list)
    trial_stats: TrialStats | None = None  # set when the case ran several trials (see evaluation.trials)

    @classmethod
    def success(cls, eval_id: str, criterion_results: list[CriterionResult], **fields: Any) -> EvalCaseResult:
        judge = TokenUsage.total(c.token_usage for c in criterion_results)
        agent = fields.get("agent_token_usage") or _NO_TOKENS
        fields.setdefault("token_usage", agent + judge)
        return cls(
            eval_id=eval_id,
            passed=all(c.passed or c.skipped for c in criterion_results),
            criterion_results=criterion_results,
            **{k: v for k, v in fields.items() if v is not None},
        )

    @classmethod
    def failure(
        cls, eval_id: str, error: str, name: str = "", duration_seconds: float = 0.0, **fields: Any
    ) -> EvalCaseResult:
        return cls(eval_id=eval_id, name=name, passed=False, error=error, duration_seconds=duration_seconds, **fields)

    @property
    def is_error(self) -> bool:
        return self.error is not None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def expectation(self) -> str | None:
        """``"xfail"`` (failed as expected) or ``"xpass"`` (passed unexpectedly) for a case marked
        ``metadata.xfail``, None otherwise: written into JSON reports (see :mod:`tracegrade.models.expectations`)."""
        return case_expectation(self)

    def get_criterion_result(self, name: str) -> CriterionResult | None:
        return next((c for c in self.criterion_results if c.criterion == name), None)

    @property
    def failed_criteria(self) -> list[CriterionResult]:
        return [c for c in self.criterion_results if not c.passed and not c.skipped]

    @property
    def passed_criteria(self) -> list[CriterionResult]:
        return [c for c in self.criterion_results if c.passed]

    @property
    def mean_score(self) -> float:
        scored = [c.score for c in self.criterion_results if not c.skipped]
        return sum(scored) / len(scored) if scored else 0.0


class CriterionStats(BaseModel):
    """Aggregate of one criterion over a run: ``total == passed + failed + errors`` counts the cases it graded (an
    errored result is an error, not a failure), ``skipped`` those it skipped; ``pass_rate`` is ``passed / total``."""

    total: int = 0
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    errors: int = 0
    avg_score: ReportNumber = 0.0
    pass_rate: ReportNumber = 0.0
    token_usage: TokenUsage = Field(default_factory=no_tokens)


class EvalSummary(BaseModel):
    """Run-level statistics; ``total_cases == passed_cases + failed_cases + error_cases``."""

    total_cases: int = 0
    passed_cases: int = 0
    failed_cases: int = 0
    error_cases: int = 0
    pass_rate: ReportNumber = 0.0
    avg_duration_seconds: ReportNumber = 0.0
    total_duration_seconds: ReportNumber = 0.0
    criterion_stats: dict[str, CriterionStats] = Field(default_factory=dict)
    total_token_usage: TokenUsage = Field(default_factory=no_tokens)
    agent_token_usage: TokenUsage = Field(default_factory=no_tokens)
    judge_token_usage: TokenUsage = Field(default_factory=no_tokens)
    per_case_token_usage: dict[str, TokenUsage] = Field(default_factory=dict)
    avg_tokens_per_case: ReportNumber = 0.0
    warnings: list[str] = Field(default_factory=list)
    # Repeated trials (num_runs > 1) only: trials per case, the pass rate's 95% Wilson interval, flaky cases.
    num_runs: int = 1
    pass_rate_ci: tuple[ReportNumber, ReportNumber] | None = None
    flaky_cases: int = 0

    @classmethod
    def from_results(cls, results: list[EvalCaseResult]) -> EvalSummary:
        if not results:
            return cls()
        total = len(results)
        passed = sum(1 for r in results if r.passed)
        errors = sum(1 for r in results if r.is_error)
        total_duration = sum(r.duration_seconds for r in results)
        # Counted in plain lists, the models built once per criterion at the end: assigning to a model's field
        # validates it, and a run has a result per criterion per case.
        counts: dict[str, list[int]] = {}  # criterion -> [graded, passed, skipped, errors]
        scores: dict[str, list[float]] = {}
        usages: dict[str, list[TokenUsage]] = {}
        warnings: dict[str, int] = {}
        for r in results:
            for c in r.criterion_results:
                name = c.criterion
                count = counts.get(name)
                if count is None:
                    count = counts[name] = [0, 0, 0, 0]
                    scores[name], usages[name] = [], []
                usages[name].append(c.token_usage)
                for w in c.warnings:
                    warnings[f"{name}: {w}"] = warnings.get(f"{name}: {w}", 0) + 1
                if c.skipped:
                    count[2] += 1
                    continue
                count[0] += 1
                count[1] += c.passed
                count[3] += c.is_error
                scores[name].append(c.score)
        stats = {
            name: CriterionStats(
                total=graded,
                passed=passes,
                failed=graded - passes - errored,
                skipped=skipped,
                errors=errored,
                avg_score=sum(scores[name]) / len(scores[name]) if scores[name] else 0.0,
                pass_rate=passes / graded if graded else 0.0,
                token_usage=TokenUsage.total(usages[name]),
            )
            for name, (graded, passes, skipped, errored) in counts.items()
        }
        per_case = {r.eval_id: r.token_usage for r in results}
        total_usage = TokenUsage.total(r.token_usage for r in results)
        agent_usage = TokenUsage.total(r.agent_token_usage for r in results)
        # Judge usage is everything that is not the agent's: criteria, plus any simulated user.
        judge_usage = TokenUsage.total(_judge_usage(r) for r in results)
        return cls(
            total_cases=total,
            passed_cases=passed,
            failed_cases=total - passed - errors,
            error_cases=errors,
            pass_rate=passed / total,
            avg_duration_seconds=total_duration / total,
            total_duration_seconds=total_duration,
            criterion_stats=stats,
            total_token_usage=total_usage,
            agent_token_usage=agent_usage,
            judge_token_usage=judge_usage,
            per_case_token_usage=per_case,
            avg_tokens_per_case=total_usage.total_tokens / total,
            warnings=[f"{w} ({n} case{'s' if n != 1 else ''})" for w, n in warnings.items()],
            **_trial_summary(results),
        )


def _judge_usage(result: EvalCaseResult) -> TokenUsage:
    """What a case used besides its agent (floored at zero); without building a model when that is nothing, as
    when no criterion used tokens."""
    usage, agent = result.token_usage, result.agent_token_usage
    if usage is agent or usage.counts() == agent.counts():
        return no_tokens()
    return usage.minus(agent)


def _trial_summary(results: list[EvalCaseResult]) -> dict[str, Any]:
    """The summary's repeated-trial fields, left at their defaults when no case ran several trials."""
    trials = [r.trial_stats for r in results if r.trial_stats is not None]
    if not trials:
        return {}
    from tracegrade.evaluation.statistics import wilson_interval  # pure functions, no I/O

    passed = sum(1 for r in results if r.passed)
    return {
        "num_runs": max(t.trials for t in trials),
        "pass_rate_ci": wilson_interval(passed, len(results)),
        "flaky_cases": sum(1 for t in trials if t.flaky),
    }


class EvalReport(BaseModel):
    """A whole run: every case result, the summary and the config that produced them."""

    eval_set_id: str
    eval_set_name: str = ""
    results: list[EvalCaseResult] = Field(default_factory=list)
    summary: EvalSummary = Field(default_factory=EvalSummary)
    config_used: dict[str, Any] = Field(default_factory=dict)
    timestamp: ReportNumber = Field(default_factory=time.time)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="wrap")
    @classmethod
    def _summary_of_its_results(cls, data: Any, validate: ModelWrapValidatorHandler[EvalReport]) -> EvalReport:
        # A report given without a summary (a file written by hand or by another tool) would read as 0 cases, "ALL
        # FAILED": it gets its results' summary, however it is read (EvalReport.from_file, `tracegrade report`, a
        # run posted to the server). A summary it has is its record and is kept as it is.
        report = validate(data)
        if isinstance(data, dict) and "summary" not in data:
            report.summary = EvalSummary.from_results(report.results)
        return report

    @classmethod
    def create(
        cls,
        eval_set_id: str,
        results: list[EvalCaseResult],
        eval_set_name: str = "",
        config_used: dict[str, Any] | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> EvalReport:
        return cls(
            eval_set_id=eval_set_id,
            eval_set_name=eval_set_name,
            results=list(results),
            summary=EvalSummary.from_results(list(results)),
            config_used=config_used or {},
            metadata=metadata or {},
        )

    @property
    def display_name(self) -> str:
        return self.eval_set_name or self.eval_set_id

    @property
    def passed(self) -> bool:
        return bool(self.results) and self.summary.pass_rate == 1.0

    @property
    def failed_cases(self) -> list[EvalCaseResult]:
        return [r for r in self.results if not r.passed]

    @property
    def passed_cases(self) -> list[EvalCaseResult]:
        return [r for r in self.results if r.passed]

    def get_case_result(self, eval_id: str) -> EvalCaseResult | None:
        return next((r for r in self.results if r.eval_id == eval_id), None)

    def format_summary(self) -> str:
        # as in the reports: a score that is no number reads n/a, and ids, names and errors (text of the agent's, or of
        # a file's) keep to their line with control characters shown escaped
        from tracegrade.reporters.text import format_score, one_line

        s = self.summary
        lines = [
            f"Evaluation Report: {one_line(self.display_name)}",
            "=" * 60,
            f"Total Cases: {s.total_cases}",
            f"Passed:      {s.passed_cases} ({s.pass_rate * 100:.1f}%)",
            f"Failed:      {s.failed_cases}",
            f"Errors:      {s.error_cases}",
            f"Duration:    {s.total_duration_seconds:.2f}s",
        ]
        if s.warnings:
            lines += ["", "WARNINGS:", *(f"  ! {one_line(w)}" for w in s.warnings)]
        if s.criterion_stats:
            lines += ["", "Per-Criterion Results:", "-" * 40]
            for name, st in s.criterion_stats.items():
                extra = f", {st.skipped} skipped" if st.skipped else ""
                lines.append(
                    f"  {one_line(name)}: {st.passed}/{st.total} passed, avg score: {format_score(st.avg_score)}{extra}"
                )
        if self.failed_cases:
            lines += ["", "Failed Cases:", "-" * 40]
            for r in self.failed_cases:
                lines.append(f"  - {one_line(r.eval_id)}: {one_line(r.name)}")
                if r.error:
                    lines.append(f"      error: {one_line(r.error)}")
                for c in r.failed_criteria:
                    lines.append(f"      {one_line(c.criterion)}: {format_score(c.score)} < {c.threshold}")
        return "\n".join(lines)

    def to_file(self, path: str | Path) -> None:
        from tracegrade.models.files import save_model

        save_model(self, path)

    @classmethod
    def from_file(cls, path: str | Path) -> EvalReport:
        from tracegrade.models.files import load_model

        return load_model(cls, path)
