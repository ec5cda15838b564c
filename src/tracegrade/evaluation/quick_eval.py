"""``QuickEval``: one-call checks of an agent that build the eval set and config, run, and print one summary.

Each call prints the console report once (``print_results``). The reference printed it twice (the
evaluator's default reporters printed too) and also wrote report files into ``./eval_reports`` on every
call; here the evaluator's own console report is off, and report files are written only when the caller
passes a config whose reporter writes them. Its ``check(expected_response_contains=...)`` was no
substring check at all (it became a ROUGE expectation); here it is one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from tracegrade.criteria.base import BaseCriterion
from tracegrade.evaluation.presets import EvalPresets
from tracegrade.models.builder import EvalSetBuilder
from tracegrade.models.config import DEFAULT_JUDGE_MODEL, CriteriaConfig, CriterionConfig, EvalConfig, MatchType
from tracegrade.models.dataset import EvalCase, EvalSet, ToolCall
from tracegrade.models.results import EvalReport

__all__ = ["QuickEval"]


def _silent(config: EvalConfig) -> EvalConfig:
    """``config`` without the evaluator's own console report (QuickEval prints its summary itself)."""
    return config.model_copy(update={"reporter": config.reporter.model_copy(update={"console": False})})


def _built(config: EvalConfig) -> EvalConfig:
    """A config QuickEval made itself: no reporters at all (nothing written to disk unasked)."""
    return config.model_copy(update={"reporter": config.reporter.model_copy(update={"enabled": False})})


class QuickEval:
    """One-call evaluations; every method is a classmethod returning the :class:`EvalReport`."""

    @classmethod
    async def _run(
        cls,
        agent: Any,
        collector: Any,
        eval_set: EvalSet,
        config: EvalConfig,
        print_results: bool,
        verbose: bool,
        extra_criteria: Sequence[BaseCriterion] = (),
    ) -> EvalReport:
        from tracegrade.evaluation.evaluator import AgentEvaluator
        from tracegrade.reporters import print_report

        evaluator = AgentEvaluator(agent, collector, config=_silent(config), extra_criteria=extra_criteria)
        report = await evaluator.evaluate(eval_set)
        if print_results:
            print_report(report, verbose=verbose)
        return report

    @classmethod
    async def check(
        cls,
        agent: Any,
        collector: Any,
        query: str,
        expected_response_contains: str | None = None,
        expected_response_equals: str | None = None,
        expected_tools: Sequence[str | ToolCall] | None = None,
        threshold: float = 1.0,
        print_results: bool = True,
        verbose: bool = True,
    ) -> EvalReport:
        """One query: the response contains a text (case-insensitive) and/or equals one (after stripping), and
        the expected tools were called in order (a tool given by name accepts any arguments; a ``ToolCall``'s
        arguments are compared). ``threshold`` is the share of expected tools the trajectory must match.
        At least one expectation is needed."""
        from tracegrade.criteria.text import ExactMatchCriterion

        tools = [t if isinstance(t, ToolCall) else ToolCall(name=t) for t in expected_tools or []]
        if not (expected_response_contains or expected_response_equals or tools):
            raise ValueError(
                "QuickEval.check needs an expectation: expected_response_contains, expected_response_equals "
                "or expected_tools"
            )
        slots: dict[str, CriterionConfig] = {}
        if expected_response_contains:
            slots["contains_keywords"] = CriterionConfig.contains_keywords([expected_response_contains])
        if tools:
            slots["tool_name_match"] = CriterionConfig.tool_name_match(threshold=threshold)
            slots["trajectory"] = CriterionConfig.trajectory(threshold, MatchType.IN_ORDER, check_args=True)
        extra = [ExactMatchCriterion()] if expected_response_equals is not None else []
        case = EvalCase.single_turn("quick_check", query, expected_response_equals, tools or None)
        eval_set = EvalSet(eval_set_id="quick_check", name="Quick Check", eval_cases=[case])
        # exact_match has no config slot; a config with no slot set is still valid when it is attached
        config = _built(EvalConfig(criteria=CriteriaConfig.model_validate(slots)))
        return await cls._run(agent, collector, eval_set, config, print_results, verbose, extra)

    @classmethod
    async def preset(
        cls,
        agent: Any,
        collector: Any,
        preset: EvalConfig | str,
        eval_set: EvalSet | str,
        print_results: bool = True,
        verbose: bool = True,
    ) -> EvalReport:
        """``eval_set`` (an EvalSet or a file) under a preset: an ``EvalConfig`` or an ``EvalPresets`` name."""
        if isinstance(preset, str):
            factory = getattr(EvalPresets, preset, None)
            if factory is None or preset.startswith("_") or preset in ("combine", "custom"):
                names = [n for n in vars(EvalPresets) if not n.startswith("_") and n not in ("combine", "custom")]
                raise ValueError(f"unknown preset {preset!r}; presets: {', '.join(names)}")
            preset = _built(factory())
        loaded = eval_set if isinstance(eval_set, EvalSet) else EvalSet.from_file(eval_set)
        return await cls._run(agent, collector, loaded, preset, print_results, verbose)

    @classmethod
    async def batch(
        cls,
        agent: Any,
        collector: Any,
        test_pairs: Sequence[tuple[str, str]],
        threshold: float = 0.5,
        print_results: bool = True,
        verbose: bool = True,
    ) -> EvalReport:
        """``(query, expected_response)`` pairs (ids ``test_1``…) graded by ROUGE-1 at ``threshold``."""
        config = _built(EvalConfig(criteria=CriteriaConfig(rouge_match=CriterionConfig.rouge_match(threshold))))
        return await cls._run(agent, collector, EvalSetBuilder.quick(*test_pairs), config, print_results, verbose)

    @classmethod
    async def tool_usage(
        cls,
        agent: Any,
        collector: Any,
        test_cases: Sequence[tuple[str, str | None, Sequence[str | ToolCall]]],
        strict: bool = True,
        print_results: bool = True,
        verbose: bool = True,
    ) -> EvalReport:
        """``(query, expected_response, tools)`` cases (ids ``tool_test_1``…) under ``EvalPresets.tool_usage``."""
        builder = EvalSetBuilder("tool_usage_tests")
        for i, (query, expected, tools) in enumerate(test_cases, start=1):
            builder.add_case(query, expected, case_id=f"tool_test_{i}", expected_tools=list(tools))
        config = _built(EvalPresets.tool_usage(strict=strict))
        return await cls._run(agent, collector, builder.build(), config, print_results, verbose)

    @classmethod
    async def conversation_flow(
        cls,
        agent: Any,
        collector: Any,
        conversation: Sequence[tuple[str, str]],
        threshold: float = 0.8,
        judge_model: str = DEFAULT_JUDGE_MODEL,
        print_results: bool = True,
        verbose: bool = True,
    ) -> EvalReport:
        """A multi-turn ``(user, expected_response)`` conversation under ``EvalPresets.conversation_flow``
        (the judged response match: it needs a judge model)."""
        case = EvalCase.multi_turn("conversation_flow", list(conversation))
        eval_set = EvalSet(eval_set_id="conversation_test", name="Conversation Flow Test", eval_cases=[case])
        config = _built(EvalPresets.conversation_flow(threshold, judge_model))
        return await cls._run(agent, collector, eval_set, config, print_results, verbose)

    @classmethod
    async def from_builder(
        cls,
        agent: Any,
        collector: Any,
        builder: EvalSetBuilder,
        config: EvalConfig | None = None,
        print_results: bool = True,
        verbose: bool = True,
    ) -> EvalReport:
        """The builder's cases under ``config`` (default ``EvalPresets.quick_check()``)."""
        config = config or _built(EvalPresets.quick_check())
        return await cls._run(agent, collector, builder.build(), config, print_results, verbose)

    @classmethod
    def run_sync(
        cls,
        agent: Any,
        collector: Any,
        eval_set: EvalSet,
        config: EvalConfig | None = None,
        print_results: bool = True,
        verbose: bool = True,
    ) -> EvalReport:
        """Blocking: ``eval_set`` under ``config`` (default ``EvalPresets.quick_check()``); not usable inside a
        running event loop."""
        config = config or _built(EvalPresets.quick_check())
        return asyncio.run(cls._run(agent, collector, eval_set, config, print_results, verbose))
