"""ADK-compatible scoring (scoring="adk"). Expected numbers are google-adk 2.13's, measured with
bench/adk_side_by_side.py (its ADK side runs ADK's own TrajectoryEvaluator and RougeEvaluator)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tracegrade.capture.helpers import trace_tool
from tracegrade.criteria.adk_scoring import (
    AdkResponseMatchCriterion,
    AdkTrajectoryCriterion,
    adk_rouge1,
    adk_tokens,
    adk_tool_calls_match,
)
from tracegrade.criteria.porter import stem
from tracegrade.criteria.registry import build_criteria
from tracegrade.criteria.text import RougeMatchCriterion
from tracegrade.criteria.trajectory_match import TrajectoryMatchCriterion
from tracegrade.evaluation.evaluator import AgentEvaluator, create_eval_app
from tracegrade.models.config import CriteriaConfig, CriterionConfig, EvalConfig, MatchType
from tracegrade.models.dataset import EvalCase, EvalSet, Invocation, ToolCall
from tracegrade.models.execution import ExecutionResult, TurnRecord

DATA = Path(__file__).parent / "data" / "adk"


def _call(name: str, **args: object) -> ToolCall:
    return ToolCall(name=name, args=args)


@pytest.mark.parametrize(
    ("word", "expected"),
    [  # NLTK PorterStemmer() (NLTK_EXTENSIONS), as rouge-score uses it
        ("running", "run"),
        ("dogs", "dog"),
        ("quickly", "quickli"),
        ("generously", "gener"),
        ("skies", "sky"),
        ("dying", "die"),
        ("agreed", "agre"),
        ("happily", "happili"),
        ("relational", "relat"),
        ("conditional", "condit"),
        ("hopping", "hop"),
        ("falling", "fall"),
        ("ties", "tie"),
        ("cried", "cri"),
        ("analogi", "analog"),
        ("syzygy", "syzygi"),
        ("yyyy", "yyyi"),
    ],
)
def test_porter_stem_matches_nltk(word: str, expected: str) -> None:
    assert stem(word) == expected


def test_tokens_follow_adks_tokenizer() -> None:
    assert adk_tokens("The dogs were running!") == ["the", "dog", "were", "run"]
    assert adk_tokens("ﬁle １２３") == ["file", "123"]  # NFKC
    assert adk_tokens("今天好") == ["今", "天", "好"]  # CJK one character each
    assert adk_tokens("naïveté runs") == ["naïveté", "run"]  # non-ASCII words whole and unstemmed
    assert adk_tokens("cats ran") == ["cat", "ran"]  # "cats" (4 letters) is stemmed, "ran" is too short
    assert adk_tokens("") == []


@pytest.mark.parametrize(
    ("response", "reference", "f"),
    [
        ("the dog runs quick", "The dogs were running quickly", 0.6667),
        ("the the the cat", "the cat sat", 0.5714),  # clipped counts
        ("今天天气不好", "今天天气很好", 0.8333),
        ("สวัสดีค่ะ", "สวัสดีครับ", 0.6154),
        ("sunny 25 c", "Sunny ☀️ 25°C", 0.8571),
        ("Anything at all", "", 0.0),  # no reference: ADK scores 0
        ("", "", 0.0),
    ],
)
def test_rouge1_f_as_adk_scores_it(response: str, reference: str, f: float) -> None:
    assert adk_rouge1(response, reference)[2] == pytest.approx(f, abs=5e-5)


W, F = _call("get_weather", city="Bergen"), _call("get_forecast", city="Bergen", days=3)


@pytest.mark.parametrize(
    ("actual", "expected", "match_type", "check_args", "matched"),
    [
        ([W, F], [W], MatchType.EXACT, True, False),  # extra call
        ([F, W], [W, F], MatchType.IN_ORDER, True, False),  # reordered
        ([F, W], [W, F], MatchType.ANY_ORDER, True, True),
        ([W, F], [W, W], MatchType.ANY_ORDER, True, False),  # each actual call used once
        ([_call("get_weather", city="Oslo")], [W], MatchType.EXACT, True, False),
        ([_call("get_weather", city="Oslo")], [W], MatchType.EXACT, False, True),  # ignore_args
        ([_call("now", tz="UTC")], [_call("now")], MatchType.EXACT, True, False),  # {} means no arguments
        ([_call("now")], [_call("now")], MatchType.EXACT, True, True),
        ([_call("roll", sides=6.0)], [_call("roll", sides=6)], MatchType.EXACT, True, True),  # Python equality
        ([_call("flag", on=1)], [_call("flag", on=True)], MatchType.EXACT, True, True),
        ([_call("roll", sides="6")], [_call("roll", sides=6)], MatchType.EXACT, True, False),
        ([W], [], MatchType.IN_ORDER, True, True),
        ([W], [], MatchType.EXACT, True, False),
    ],
)
def test_tool_calls_match_as_adk(
    actual: list[ToolCall], expected: list[ToolCall], match_type: MatchType, check_args: bool, matched: bool
) -> None:
    assert adk_tool_calls_match(actual, expected, match_type, check_args) is matched


def _two_turn_case() -> tuple[EvalCase, ExecutionResult]:
    case = EvalCase(
        eval_id="trip",
        conversation=[
            Invocation.simple("weather?", "It is raining in Bergen today.", [W]),
            Invocation.simple("book it", "Booked SK123.", [_call("book", flight="SK123")]),
        ],
    )
    turns = [
        TurnRecord(turn_index=0, agent_response="It is raining in Bergen today.", tool_calls=[W]),
        TurnRecord(turn_index=1, agent_response="I could not book.", tool_calls=[]),
    ]
    return case, ExecutionResult(turns=turns, tool_calls=[W], actual_response="I could not book.")


def test_scores_are_per_invocation_means() -> None:
    case, execution = _two_turn_case()
    trajectory = AdkTrajectoryCriterion(CriterionConfig(threshold=1.0, check_args=True)).evaluate_sync(execution, case)
    assert trajectory.score == 0.5 and not trajectory.passed
    assert [i["score"] for i in trajectory.details["invocations"]] == [1.0, 0.0]
    assert "invocations whose calls did not match: 1" in trajectory.details["reason"]
    response = AdkResponseMatchCriterion(CriterionConfig(threshold=0.5)).evaluate_sync(execution, case)
    assert response.score == pytest.approx(0.6667, abs=5e-5)  # (1 + 1/3) / 2, as google-adk gives
    assert response.details["adk_metric"] == "response_match_score"


def test_turns_that_do_not_line_up_are_reported() -> None:
    case, execution = _two_turn_case()
    execution.turns = execution.turns[:1]
    result = AdkTrajectoryCriterion(CriterionConfig()).evaluate_sync(execution, case)
    assert not result.passed and "2 invocations and the trace 1 turns" in (result.error or "")


def test_uncaptured_arguments_are_not_a_mismatch() -> None:
    case, _ = _two_turn_case()
    blind = ToolCall(name="get_weather", args={}, args_captured=False)
    execution = ExecutionResult(turns=[TurnRecord(turn_index=0, tool_calls=[blind])], tool_calls=[blind])
    result = AdkTrajectoryCriterion(CriterionConfig(check_args=True)).evaluate_sync(execution, case)
    assert "arguments not captured for 'get_weather'" in (result.error or "")


def test_scoring_selects_the_class_per_criterion() -> None:
    criteria = CriteriaConfig(
        trajectory=CriterionConfig(scoring="adk"), rouge_match=CriterionConfig(), tool_name_match=CriterionConfig()
    )
    built = [type(c) for c in build_criteria(criteria)]
    assert AdkTrajectoryCriterion in built and RougeMatchCriterion in built
    assert TrajectoryMatchCriterion not in built and AdkResponseMatchCriterion not in built


def test_adk_files_graded_live_with_adks_numbers() -> None:
    """AgentEvaluator with ADK's own eval set and test_config.json: a scripted agent, one turn per invocation."""
    scripted = {
        "Book a flight to Tromsø": (
            [("search_flights", {"to": "TOS"}), ("book", {"flight": "SK123", "seats": 1})],
            "Booked flight SK123 to Tromsø.",
        ),
        "And a hotel?": ([("book_hotel", {"city": "Tromso", "nights": 2})], "The hotel is booked."),
    }

    def agent(query: str) -> str:
        calls, answer = scripted[query]
        for name, args in calls:
            with trace_tool(name, arguments=args) as tool:
                tool.set_result("ok")
        return answer

    eval_set = EvalSet.from_file(DATA / "demo.evalset.json")
    eval_set.eval_cases = [c for c in eval_set.eval_cases if c.eval_id == "trip_two_turns"]
    config = EvalConfig.from_file(DATA / "test_config.json")
    app, collector = create_eval_app(agent)
    report = AgentEvaluator(app, collector=collector, config=config).evaluate_sync(eval_set)
    [result] = report.results
    scores = {r.criterion: r.score for r in result.criterion_results}
    assert scores["tool_trajectory_avg_score"] == 0.5  # second turn: Tromso is not Tromsø
    # ROUGE-1 F per turn: 1.0, then "the hotel is booked" vs "hotel booked" -> 2*(2/4*2/2)/(2/4+2/2) = 2/3
    assert scores["rouge_match"] == pytest.approx((1.0 + 2 / 3) / 2)
    assert not result.passed
    collector.tracer_provider.shutdown()
