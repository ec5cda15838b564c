"""Evaluation configuration: which criteria run, with what settings, and how reports are written."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Any, Literal, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from tracegrade.errors import did_you_mean
from tracegrade.store.lake_location import redacted  # the one URL/DSN redaction (light: no DuckDB behind it)

__all__ = [
    "CRITERIA_SLOTS",
    "DEFAULT_JUDGE_MODEL",
    "REDACTED",
    "SLOT_OPTIONS",
    "ArgMatchMode",
    "BudgetConfig",
    "CriteriaConfig",
    "CriterionConfig",
    "EvalConfig",
    "MatchType",
    "ReporterConfig",
    "Rubric",
    "SqlAssertion",
    "ToolArgsRule",
    "ToolSchemaConfig",
    "UserSimulatorConfig",
]

DEFAULT_JUDGE_MODEL = "gemini-2.5-flash"
#: the most trials of one case a live run may make (``EvalConfig.num_runs``)
MAX_RUNS = 1000


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _no_switch_for_a_number(cls, data: Any) -> Any:
        """pydantic reads true and false (YAML's yes and no too) as 1 and 0 where a number belongs, so ``threshold:
        yes`` would be a threshold of 1.0: refused, naming the key."""
        if not isinstance(data, dict):
            return data
        switches = [
            InitErrorDetails(
                type=PydanticCustomError("switch_for_number", "true or false where a number belongs: write a number"),
                loc=(key,),
                input=value,
            )
            for key, value in data.items()
            if isinstance(value, bool) and isinstance(key, str) and _takes_a_number(cls, key)
        ]
        if switches:
            raise ValidationError.from_exception_data(cls.__name__, switches)
        return data


_NUMBER_TYPES = (float, int, float | None, int | None)


def _takes_a_number(model: type[BaseModel], key: str) -> bool:
    field = model.model_fields.get(key)
    return field is not None and field.annotation in _NUMBER_TYPES


class MatchType(str, Enum):
    """How an expected sequence is compared with the actual one."""

    EXACT = "EXACT"
    IN_ORDER = "IN_ORDER"
    ANY_ORDER = "ANY_ORDER"

    def __str__(self) -> str:
        return self.value


class ArgMatchMode(str, Enum):
    """How one tool's arguments are compared when ``check_args`` is on."""

    EXACT = "exact"  # the whole argument object must be equal (the documented default)
    SUBSET = "subset"  # every expected key must be present with an equal value; extra keys are fine
    KEYS = "keys"  # only the keys listed in ToolArgsRule.keys are compared
    IGNORE = "ignore"  # arguments of this tool are never compared


class ToolArgsRule(_Strict):
    """Per-tool argument matching, keyed by tool name in ``CriterionConfig.tool_args``."""

    mode: ArgMatchMode = ArgMatchMode.EXACT
    keys: list[str] = Field(default_factory=list)


class Rubric(_Strict):
    """One grading rule for the rubric judge; ``weight`` sets its share of the weighted mean."""

    rubric_id: str
    content: str
    weight: float = Field(default=1.0, ge=0.0)

    @classmethod
    def create(cls, rubric_id: str, content: str, weight: float = 1.0) -> Rubric:
        return cls(rubric_id=rubric_id, content=content, weight=weight)


class CriterionConfig(_Strict):
    """Settings shared by every criterion; each criterion reads the fields relevant to it.

    Beyond the reference fields: ``tool_args`` (per-tool argument matching), ``api_base``/``api_key``
    /``timeout_seconds``/``temperature`` for the judge, and ``metadata`` for user criteria.
    """

    threshold: float = Field(default=0.8, ge=0.0, le=1.0)
    match_type: MatchType = MatchType.EXACT
    judge_model: str = DEFAULT_JUDGE_MODEL
    num_samples: int = Field(default=3, ge=1, le=50)
    rubrics: list[Rubric] = Field(default_factory=list)
    keywords: list[str] = Field(default_factory=list)
    check_args: bool = False
    enabled: bool = True
    api_style: Literal["responses", "chat"] = "responses"
    tool_args: dict[str, ToolArgsRule] = Field(default_factory=dict)
    api_base: str | None = None
    api_key: str | None = None
    timeout_seconds: float = Field(default=60.0, gt=0)
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    use_vertex_ai: bool | None = None
    # "adk": score as google-adk does (trajectory and rouge_match; see criteria.adk_scoring); set when an ADK
    # test_config.json is loaded. "tracegrade": the seed's rules.
    scoring: Literal["tracegrade", "adk"] = "tracegrade"
    # LLM judges: the least Cohen's kappa with human labels (``tracegrade calibrate``) a run accepts from this
    # judge; below it, or with no calibration found, the run fails (or warns: ``EvalConfig.calibration``)
    min_agreement: float | None = Field(default=None, ge=-1.0, le=1.0)
    # LLM judges: the judge model's price in USD per million input/output tokens, for a model litellm's cost
    # map does not price (a local or private model); set, it replaces the cost map's price for this criterion
    judge_input_cost_per_mtok: float | None = Field(default=None, ge=0)
    judge_output_cost_per_mtok: float | None = Field(default=None, ge=0)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def coerce(cls, config: CriterionConfig | None) -> Self:
        """``config`` as this settings class (a plain CriterionConfig keeps the fields it set)."""
        if isinstance(config, cls):
            return config
        return cls(**(config.model_dump(exclude_unset=True) if config is not None else {}))

    @classmethod
    def tool_name_match(cls, threshold: float = 1.0) -> CriterionConfig:
        return cls(threshold=threshold)

    @classmethod
    def trajectory(
        cls,
        threshold: float = 1.0,
        match_type: MatchType = MatchType.EXACT,
        check_args: bool = False,
        tool_args: dict[str, ToolArgsRule] | None = None,
    ) -> CriterionConfig:
        return cls(threshold=threshold, match_type=match_type, check_args=check_args, tool_args=tool_args or {})

    @classmethod
    def node_order(cls, threshold: float = 1.0, match_type: MatchType = MatchType.EXACT) -> CriterionConfig:
        return cls(threshold=threshold, match_type=match_type)

    @classmethod
    def response_match(
        cls, threshold: float = 0.8, judge_model: str = DEFAULT_JUDGE_MODEL, num_samples: int = 3
    ) -> CriterionConfig:
        return cls(threshold=threshold, judge_model=judge_model, num_samples=num_samples)

    @classmethod
    def rouge_match(cls, threshold: float = 0.5) -> CriterionConfig:
        return cls(threshold=threshold)

    @classmethod
    def contains_keywords(cls, keywords: list[str], threshold: float = 1.0) -> CriterionConfig:
        return cls(keywords=list(keywords), threshold=threshold)

    @classmethod
    def llm_judge(
        cls, threshold: float = 0.8, judge_model: str = DEFAULT_JUDGE_MODEL, num_samples: int = 3
    ) -> CriterionConfig:
        return cls(threshold=threshold, judge_model=judge_model, num_samples=num_samples)

    @classmethod
    def rubric_based(
        cls,
        rubrics: list[Rubric],
        threshold: float = 0.8,
        judge_model: str = DEFAULT_JUDGE_MODEL,
        num_samples: int = 3,
    ) -> CriterionConfig:
        return cls(rubrics=list(rubrics), threshold=threshold, judge_model=judge_model, num_samples=num_samples)

    @classmethod
    def factual_accuracy(
        cls, threshold: float = 0.8, judge_model: str = DEFAULT_JUDGE_MODEL, num_samples: int = 3
    ) -> CriterionConfig:
        return cls(threshold=threshold, judge_model=judge_model, num_samples=num_samples)

    @classmethod
    def hallucination(
        cls, threshold: float = 0.8, judge_model: str = DEFAULT_JUDGE_MODEL, num_samples: int = 3
    ) -> CriterionConfig:
        return cls(threshold=threshold, judge_model=judge_model, num_samples=num_samples)

    @classmethod
    def safety(
        cls, threshold: float = 0.8, judge_model: str = DEFAULT_JUDGE_MODEL, num_samples: int = 3
    ) -> CriterionConfig:
        return cls(threshold=threshold, judge_model=judge_model, num_samples=num_samples)

    @classmethod
    def simulation_goals(
        cls, threshold: float = 0.8, judge_model: str = DEFAULT_JUDGE_MODEL, num_samples: int = 1
    ) -> CriterionConfig:
        return cls(threshold=threshold, judge_model=judge_model, num_samples=num_samples)


class BudgetConfig(CriterionConfig):
    """Limits for the ``budget`` criterion; a limit left unset is not checked. Durations in seconds, cost
    in USD (agent cost from the LLM calls' tokens and litellm's cost map; judge cost from the judges'
    reported usage). The score is the fraction of set limits that are met."""

    threshold: float = Field(default=1.0, ge=0.0, le=1.0)
    max_duration_seconds: float | None = Field(default=None, ge=0)
    max_tool_latency_seconds: float | None = Field(default=None, ge=0)  # slowest call of each tool
    max_tool_p95_seconds: float | None = Field(default=None, ge=0)  # 95th percentile of each tool's calls
    max_input_tokens: int | None = Field(default=None, ge=0)
    max_output_tokens: int | None = Field(default=None, ge=0)
    max_total_tokens: int | None = Field(default=None, ge=0)
    max_agent_cost_usd: float | None = Field(default=None, ge=0)
    max_judge_cost_usd: float | None = Field(default=None, ge=0)
    max_llm_calls: int | None = Field(default=None, ge=0)
    max_tool_errors: int | None = Field(default=None, ge=0)
    max_error_spans: int | None = Field(default=None, ge=0)


class ToolSchemaConfig(CriterionConfig):
    """Settings of the ``tool_schema`` criterion: ``schemas`` (tool name -> JSON Schema of its arguments)
    take precedence over the definitions captured in the trace; ``undefined_tools`` says whether a call of
    a tool with no definition anywhere fails (``fail``) or is left out (``skip``)."""

    threshold: float = Field(default=1.0, ge=0.0, le=1.0)
    schemas: dict[str, dict[str, Any]] = Field(default_factory=dict)
    undefined_tools: Literal["fail", "skip"] = "fail"


class SqlAssertion(_Strict):
    """One SQL assertion: a query over the case's trajectory tables that selects the violations."""

    name: str = Field(min_length=1)
    query: str = Field(min_length=1)
    description: str = ""
    enabled: bool = True
    # one case's traces are small: a query still running after a minute is almost surely one that never ends;
    # it is stopped, and the assertion's result is an error saying so
    timeout_seconds: float = Field(default=60.0, gt=0)

    @field_validator("query")
    @classmethod
    def _query_binds(cls, query: str, info: ValidationInfo) -> str:
        """Bad SQL is refused when the config loads (parsed and bound against the trajectory tables).

        A custom error rather than a ValueError, so that the message is the SQL problem itself (pydantic
        prefixes a ValueError's message with "Value error, ")."""
        from tracegrade.criteria.trajectory_db import SqlAssertionError, check_assertion_sql

        try:
            check_assertion_sql(info.data.get("name", "?"), query)
        except SqlAssertionError as exc:
            # the message goes in as context: a template would read any braces of the SQL as placeholders
            raise PydanticCustomError("invalid_sql", "{problem}", {"problem": str(exc)}) from None
        return query


class CriteriaConfig(_Strict):
    """The criterion slots, in the order criteria run and appear in results, then the SQL assertions."""

    tool_name_match: CriterionConfig | None = None
    trajectory: CriterionConfig | None = None
    node_order: CriterionConfig | None = None
    response_match: CriterionConfig | None = None
    rouge_match: CriterionConfig | None = None
    contains_keywords: CriterionConfig | None = None
    llm_judge: CriterionConfig | None = None
    rubric_based: CriterionConfig | None = None
    factual_accuracy: CriterionConfig | None = None
    hallucination: CriterionConfig | None = None
    safety: CriterionConfig | None = None
    simulation_goals: CriterionConfig | None = None
    budget: BudgetConfig | None = None
    tool_schema: ToolSchemaConfig | None = None
    sql_assertions: list[SqlAssertion] = Field(default_factory=list)

    @field_validator("budget", "tool_schema", mode="before")
    @classmethod
    def _specialised(cls, value: Any, info: ValidationInfo) -> Any:
        """A plain CriterionConfig given for a slot with its own settings class becomes that class."""
        if isinstance(value, CriterionConfig):
            specialised = BudgetConfig if info.field_name == "budget" else ToolSchemaConfig
            return specialised.coerce(value)
        return value

    @field_validator("sql_assertions")
    @classmethod
    def _distinct_names(cls, assertions: list[SqlAssertion]) -> list[SqlAssertion]:
        names = [a.name for a in assertions]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"SQL assertion names must be distinct (their results are keyed by name): {repeated}")
        return assertions

    def enabled_slots(self) -> list[tuple[str, CriterionConfig]]:
        """``(slot, config)`` for every slot that is set and enabled, in declaration order."""
        return [(s, c) for s in CRITERIA_SLOTS if (c := getattr(self, s)) is not None and c.enabled]

    @model_validator(mode="wrap")
    @classmethod
    def _name_valid_slots(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> CriteriaConfig:
        """Unknown slot names are rejected with the list of valid ones (every other error kept as is)."""
        try:
            return handler(data)
        except ValidationError as exc:
            if not any(e["type"] == "extra_forbidden" and len(e["loc"]) == 1 for e in exc.errors()):
                raise
            valid = ", ".join(cls.model_fields)
            errors = [
                InitErrorDetails(
                    type=PydanticCustomError(
                        "unknown_criterion_slot",
                        f"unknown criterion slot {e['loc'][0]!r}{did_you_mean(e['loc'][0], cls.model_fields)}; "
                        f"valid slots: {valid} (a criterion without a slot, such as exact_match, is attached to "
                        "the evaluator directly)",
                    )
                    if e["type"] == "extra_forbidden" and len(e["loc"]) == 1
                    else PydanticCustomError(e["type"], e["msg"]),
                    loc=e["loc"],
                    input=e["input"],
                )
                for e in exc.errors(include_url=False)
            ]
            raise ValidationError.from_exception_data(exc.title, errors) from None


#: what ``EvalConfig.redacted_dump`` records in place of an API key
REDACTED = "<redacted>"
_SECRET_FIELDS = frozenset({"api_key"})
# endpoint URLs, kept (which endpoint judged matters) with the credentials a URL can carry hidden
_URL_FIELDS = frozenset({"api_base"})


def _redact_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _redact_field(key, item) for key, item in value.items()}
    if isinstance(value, list):
        return [_redact_keys(item) for item in value]
    return value


def _redact_field(key: str, item: Any) -> Any:
    if item is None:
        return None
    if key in _SECRET_FIELDS:
        return REDACTED
    if key in _URL_FIELDS and isinstance(item, str):
        return redacted(item)
    return _redact_keys(item)


CRITERIA_SLOTS: tuple[str, ...] = tuple(f for f in CriteriaConfig.model_fields if f != "sql_assertions")

_JUDGE_OPTIONS = frozenset(
    {
        "judge_model",
        "num_samples",
        "api_style",
        "api_base",
        "api_key",
        "timeout_seconds",
        "temperature",
        "use_vertex_ai",
        "min_agreement",
        "judge_input_cost_per_mtok",
        "judge_output_cost_per_mtok",
    }
)
# The CriterionConfig options each slot's criterion reads, beyond those every slot has (threshold, enabled,
# metadata); a slot's own settings class (BudgetConfig, ToolSchemaConfig) adds its fields. An option set on a
# slot that does not read it would be silently ignored, so it is refused (evaluation.checks). Keep this table in
# step with what the criterion classes read: it is the one place that says so.
SLOT_OPTIONS: dict[str, frozenset[str]] = {
    "tool_name_match": frozenset(),
    "trajectory": frozenset({"match_type", "check_args", "tool_args", "scoring"}),
    "node_order": frozenset({"match_type"}),
    "response_match": _JUDGE_OPTIONS,
    "rouge_match": frozenset({"scoring"}),
    "contains_keywords": frozenset({"keywords"}),
    "llm_judge": _JUDGE_OPTIONS,
    "rubric_based": _JUDGE_OPTIONS | {"rubrics"},
    "factual_accuracy": _JUDGE_OPTIONS,
    "hallucination": _JUDGE_OPTIONS,
    "safety": _JUDGE_OPTIONS,
    "simulation_goals": _JUDGE_OPTIONS,
    "budget": frozenset(),
    "tool_schema": frozenset(),
}


class UserSimulatorConfig(_Strict):
    """Settings of the goal-driven simulated user."""

    model: str = DEFAULT_JUDGE_MODEL
    max_invocations: int = Field(default=10, ge=1)
    temperature: float = Field(default=0.7, ge=0.0, le=2.0)
    thinking_enabled: bool = False
    thinking_budget: int = 10240
    api_style: Literal["responses", "chat"] = "responses"
    stop_signal: str = "</finished>"
    api_base: str | None = None
    api_key: str | None = None


class ReporterConfig(_Strict):
    """Which reports ``AgentEvaluator.evaluate`` writes automatically, and what they include."""

    enabled: bool = True
    output_dir: str = "eval_reports"
    console: bool = True
    json_report: bool = True
    html: bool = True
    junit_xml: bool = False
    verbose: bool = True
    include_details: bool = True
    include_trajectory: bool = True
    include_node_responses: bool = True
    include_actual_response: bool = True
    include_tool_call_details: bool = True
    timestamp_files: bool = True


class EvalConfig(_Strict):
    """Criteria plus run-level settings; ``parallel``, ``max_concurrency`` and ``timeout`` are honoured.

    ``mock_mode`` skips running the agent: each turn is graded as if the agent had done exactly what the
    invocation expects (see :mod:`tracegrade.evaluation.mock_mode`), a dry run of the eval set and config.
    """

    criteria: CriteriaConfig = Field(default_factory=CriteriaConfig)
    user_simulator_config: UserSimulatorConfig | None = None
    parallel: bool = False
    max_concurrency: int = Field(default=4, ge=1)
    timeout: float = Field(default=300.0, gt=0)
    verbose: bool = False
    mock_mode: bool = False
    # Trials per case: live, each case runs this many times (graded as one, see evaluation.trials);
    # offline, every recorded trace a case matches is a trial. Bounded: each trial's result is held until its case
    # is graded, and a typo of a few more digits would run until memory ran out.
    num_runs: int = Field(default=1, ge=1, le=MAX_RUNS)
    # Emit every criterion result as an OTel gen_ai.evaluation.result event on the evaluated trace
    # (see evaluation.evaluation_events); without a logger provider given, over OTLP/HTTP per OTEL_* settings.
    emit_evaluation_events: bool = False
    reporter: ReporterConfig = Field(default_factory=ReporterConfig)
    judge_max_concurrency: int = Field(default=16, ge=1)
    judge_cache: bool = True
    judge_cache_path: str | None = None  # None: ./.tracegrade/judge_cache.duckdb
    judge_max_retries: int = Field(default=3, ge=0)  # extra attempts after a 429 or 5xx
    judge_retry_base_seconds: float = Field(default=0.5, gt=0)  # first backoff delay (doubles each retry)
    # Where criteria with min_agreement find their judge's calibration (None: ./.tracegrade/calibration.json,
    # where `tracegrade calibrate` writes it), and whether one that falls short fails the run or warns.
    calibration_file: str | None = None
    calibration: Literal["fail", "warn"] = "fail"

    @classmethod
    def default(cls) -> EvalConfig:
        return cls(
            criteria=CriteriaConfig(
                trajectory=CriterionConfig.trajectory(threshold=1.0, match_type=MatchType.EXACT),
                response_match=CriterionConfig.response_match(threshold=0.8),
            )
        )

    @classmethod
    def strict(cls) -> EvalConfig:
        return cls(
            criteria=CriteriaConfig(
                trajectory=CriterionConfig.trajectory(threshold=1.0, match_type=MatchType.EXACT, check_args=True),
                response_match=CriterionConfig.response_match(threshold=0.9),
                llm_judge=CriterionConfig.llm_judge(threshold=0.9, num_samples=5),
            )
        )

    @classmethod
    def relaxed(cls) -> EvalConfig:
        return cls(
            criteria=CriteriaConfig(
                trajectory=CriterionConfig.trajectory(threshold=0.8, match_type=MatchType.IN_ORDER),
                response_match=CriterionConfig.response_match(threshold=0.6),
            )
        )

    @classmethod
    def from_file(cls, path: str | Path) -> EvalConfig:
        """Load JSON or YAML (or an ADK ``test_config.json``); raises :class:`~tracegrade.errors.ConfigError`
        naming every problem."""
        from tracegrade.models.adk_files import load_eval_config

        return load_eval_config(path)

    def redacted_dump(self) -> dict[str, Any]:
        """The config as JSON values with every API key replaced by :data:`REDACTED` and the credentials in
        ``api_base`` URLs (``user:password@``, ``?key=``) by ``***``: what reports, stored runs
        and JUnit properties record (``config_used``), which are shared far more widely than the config file."""
        return _redact_keys(self.model_dump(mode="json"))

    def to_file(self, path: str | Path) -> None:
        from tracegrade.models.files import save_model

        save_model(self, path)

    def get_criterion_config(self, name: str) -> CriterionConfig | None:
        return getattr(self.criteria, name, None) if name in CRITERIA_SLOTS else None

    def enable_criterion(self, name: str, config: CriterionConfig | None = None) -> None:
        """Set slot ``name`` to ``config`` (or a default ``CriterionConfig``)."""
        if name not in CRITERIA_SLOTS:
            raise ValueError(f"Unknown criterion field: {name!r}; valid fields: {', '.join(CRITERIA_SLOTS)}")
        setattr(self.criteria, name, config if config is not None else CriterionConfig())

    def disable_criterion(self, name: str) -> None:
        if name not in CRITERIA_SLOTS:
            raise ValueError(f"Unknown criterion field: {name!r}; valid fields: {', '.join(CRITERIA_SLOTS)}")
        current = getattr(self.criteria, name)
        if current is not None:
            current.enabled = False

    def with_rubrics(self, rubrics: list[Rubric]) -> EvalConfig:
        copy = self.model_copy(deep=True)
        copy.criteria.rubric_based = CriterionConfig.rubric_based(rubrics)
        return copy

    def has_enabled_criteria(self) -> bool:
        return bool(self.criteria.enabled_slots()) or any(a.enabled for a in self.criteria.sql_assertions)
