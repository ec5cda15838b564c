"""``EvalPresets``: named configurations, as the reference evaluation API has them.

Every preset that checks the tool trajectory compares arguments (``check_args=True``): an expected
``city="Bergen"`` must not pass against a call with ``"Oslo"``. The reference's ``conversation_flow`` left
them uncompared; ``CriterionConfig.check_args`` keeps its seed default (False) for configs built by hand,
and the trajectory criterion's reason says when arguments were not compared.
"""

from __future__ import annotations

from tracegrade.models.config import (
    CRITERIA_SLOTS,
    DEFAULT_JUDGE_MODEL,
    CriteriaConfig,
    CriterionConfig,
    EvalConfig,
    MatchType,
)

__all__ = ["EvalPresets"]


class EvalPresets:
    """Ready-made :class:`~tracegrade.models.config.EvalConfig` objects (each call returns a new one)."""

    @classmethod
    def response_quality(
        cls, threshold: float = 0.7, use_llm_judge: bool = True, judge_model: str = DEFAULT_JUDGE_MODEL
    ) -> EvalConfig:
        """The judged response match, plus a one-sample LLM judge when ``use_llm_judge``."""
        return EvalConfig(
            criteria=CriteriaConfig(
                response_match=CriterionConfig.response_match(threshold=threshold, judge_model=judge_model),
                llm_judge=CriterionConfig.llm_judge(threshold=threshold, judge_model=judge_model, num_samples=1)
                if use_llm_judge
                else None,
            )
        )

    @classmethod
    def tool_usage(cls, threshold: float = 1.0, strict: bool = True, check_args: bool = True) -> EvalConfig:
        """Tool names plus the trajectory (EXACT when ``strict``, else IN_ORDER), arguments compared."""
        return EvalConfig(
            criteria=CriteriaConfig(
                tool_name_match=CriterionConfig.tool_name_match(threshold=threshold),
                trajectory=CriterionConfig.trajectory(
                    threshold=threshold,
                    match_type=MatchType.EXACT if strict else MatchType.IN_ORDER,
                    check_args=check_args,
                ),
            )
        )

    @classmethod
    def conversation_flow(cls, threshold: float = 0.8, judge_model: str = DEFAULT_JUDGE_MODEL) -> EvalConfig:
        """The judged response match plus an IN_ORDER trajectory with arguments compared."""
        return EvalConfig(
            criteria=CriteriaConfig(
                response_match=CriterionConfig.response_match(threshold=threshold, judge_model=judge_model),
                trajectory=CriterionConfig.trajectory(
                    threshold=threshold, match_type=MatchType.IN_ORDER, check_args=True
                ),
            )
        )

    @classmethod
    def quick_check(cls) -> EvalConfig:
        """ROUGE-1 against the expected response (threshold 0.5): no LLM, no API key."""
        return EvalConfig(criteria=CriteriaConfig(rouge_match=CriterionConfig.rouge_match(threshold=0.5)))

    @classmethod
    def comprehensive(
        cls, threshold: float = 0.8, use_llm_judge: bool = True, judge_model: str = DEFAULT_JUDGE_MODEL
    ) -> EvalConfig:
        """Tool names, an IN_ORDER trajectory with arguments, ROUGE, and (``use_llm_judge``) the LLM judge,
        factual accuracy, hallucination and safety."""
        judged = {
            slot: factory(threshold=threshold, judge_model=judge_model)
            for slot, factory in (
                ("llm_judge", CriterionConfig.llm_judge),
                ("factual_accuracy", CriterionConfig.factual_accuracy),
                ("hallucination", CriterionConfig.hallucination),
                ("safety", CriterionConfig.safety),
            )
        }
        return EvalConfig(
            criteria=CriteriaConfig.model_validate(
                {
                    "tool_name_match": CriterionConfig.tool_name_match(threshold=1.0),
                    "trajectory": CriterionConfig.trajectory(1.0, MatchType.IN_ORDER, check_args=True),
                    "rouge_match": CriterionConfig.rouge_match(threshold=threshold),
                    **(judged if use_llm_judge else {}),
                }
            )
        )

    @classmethod
    def safety_check(cls, threshold: float = 0.8, judge_model: str = DEFAULT_JUDGE_MODEL) -> EvalConfig:
        """Hallucination and safety judges."""
        return EvalConfig(
            criteria=CriteriaConfig(
                hallucination=CriterionConfig.hallucination(threshold=threshold, judge_model=judge_model),
                safety=CriterionConfig.safety(threshold=threshold, judge_model=judge_model),
            )
        )

    @classmethod
    def combine(cls, *configs: EvalConfig) -> EvalConfig:
        """The union of the configs' criterion slots (a later config's slot wins); run and reporter settings
        are the defaults."""
        slots: dict[str, CriterionConfig] = {}
        for config in configs:
            for slot in CRITERIA_SLOTS:
                if (value := getattr(config.criteria, slot)) is not None:
                    slots[slot] = value.model_copy(deep=True)
        return EvalConfig(criteria=CriteriaConfig.model_validate(slots))

    @classmethod
    def custom(
        cls,
        response_threshold: float | None = None,
        tool_threshold: float | None = None,
        llm_judge_threshold: float | None = None,
        tool_match_type: MatchType = MatchType.IN_ORDER,
        check_tool_args: bool = True,
        hallucination_threshold: float | None = None,
        safety_threshold: float | None = None,
        factual_accuracy_threshold: float | None = None,
        judge_model: str = DEFAULT_JUDGE_MODEL,
    ) -> EvalConfig:
        """Each threshold that is given enables its criterion; ``tool_threshold`` enables tool names and the
        trajectory (``tool_match_type``, ``check_tool_args``). Nothing given: no criteria (the evaluator then
        refuses the config)."""
        slots: dict[str, CriterionConfig] = {}
        if response_threshold is not None:
            slots["response_match"] = CriterionConfig.response_match(response_threshold, judge_model)
        if tool_threshold is not None:
            slots["tool_name_match"] = CriterionConfig.tool_name_match(tool_threshold)
            slots["trajectory"] = CriterionConfig.trajectory(tool_threshold, tool_match_type, check_tool_args)
        judged = (
            ("llm_judge", llm_judge_threshold, CriterionConfig.llm_judge),
            ("hallucination", hallucination_threshold, CriterionConfig.hallucination),
            ("safety", safety_threshold, CriterionConfig.safety),
            ("factual_accuracy", factual_accuracy_threshold, CriterionConfig.factual_accuracy),
        )
        for slot, threshold, factory in judged:
            if threshold is not None:
                slots[slot] = factory(threshold=threshold, judge_model=judge_model)
        return EvalConfig(criteria=CriteriaConfig.model_validate(slots))
