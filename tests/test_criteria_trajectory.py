"""Trajectory criteria: tool trajectory (EXACT / IN_ORDER / ANY_ORDER, check_args, tool_args rules),
node order and tool-name matching, with the seed page's edge cases and the partial-credit details."""

from __future__ import annotations

import random

import pytest

from tracegrade.criteria import NodeOrderMatchCriterion, ToolNameMatchCriterion, TrajectoryMatchCriterion
from tracegrade.criteria.call_compare import calls_satisfy_in_place
from tracegrade.models import (
    ArgMatchMode,
    CriterionConfig,
    EvalCase,
    ExecutionResult,
    Invocation,
    MatchType,
    ToolArgsRule,
    ToolCall,
)

EXACT, IN_ORDER, ANY_ORDER = MatchType.EXACT, MatchType.IN_ORDER, MatchType.ANY_ORDER


def calls(*names: str) -> list[ToolCall]:
    return [ToolCall(name=n) for n in names]


def case_with_tools(expected: list[ToolCall]) -> EvalCase:
    return EvalCase.single_turn("c", "q", expected_tools=expected)


def run_tools(
    expected: list[ToolCall], actual: list[ToolCall], match_type: MatchType = EXACT, check_args: bool = False, **kw
):
    criterion = TrajectoryMatchCriterion(
        CriterionConfig.trajectory(threshold=1.0, match_type=match_type, check_args=check_args, **kw)
    )
    return criterion.evaluate_sync(ExecutionResult(tool_calls=actual), case_with_tools(expected))


def run_nodes(expected: list[str], actual: list[str], match_type: MatchType = EXACT):
    criterion = NodeOrderMatchCriterion(CriterionConfig.node_order(match_type=match_type))
    case = EvalCase.single_turn("c", "q", expected_node_order=expected)
    return criterion.evaluate_sync(ExecutionResult(node_visits=actual), case)


# --- TrajectoryMatchCriterion: scoring rules ------------------------------------------------------------


@pytest.mark.parametrize(
    ("expected", "actual", "match_type", "score"),
    [
        (["a", "b"], ["a", "b"], EXACT, 1.0),
        (["a", "b"], ["a", "b", "c"], EXACT, 2 / 3),  # an extra call fails EXACT (DESIGN §5)
        (["a", "b"], ["b", "a"], EXACT, 0.0),
        (["a", "b"], ["a"], EXACT, 0.5),
        (["a", "b"], ["a", "x", "c"], EXACT, 1 / 3),
        (["a", "b"], ["a", "x", "b"], IN_ORDER, 1.0),
        (["a", "c"], ["c", "a"], IN_ORDER, 0.5),
        (["a", "b", "c"], ["x", "b", "c"], IN_ORDER, 2 / 3),  # first item absent: later ones still count
        (["a", "b", "c"], ["b", "c", "a"], IN_ORDER, 2 / 3),  # LCS, not a prefix-sensitive greedy scan
        (["a", "b"], ["b", "a"], ANY_ORDER, 1.0),
        (["a", "a"], ["a"], ANY_ORDER, 0.5),
        (["a", "b"], ["b", "x", "a", "y"], ANY_ORDER, 1.0),
        (["a"], [], ANY_ORDER, 0.0),
    ],
)
def test_match_type_scores(expected, actual, match_type, score):
    result = run_tools(calls(*expected), calls(*actual), match_type)
    assert result.score == pytest.approx(score)
    assert result.passed == (score >= 1.0)


@pytest.mark.parametrize(
    ("match_type", "with_calls", "score"),
    [
        (EXACT, False, 1.0),
        (EXACT, True, 0.0),
        (IN_ORDER, False, 1.0),
        (IN_ORDER, True, 1.0),
        (ANY_ORDER, False, 1.0),
        (ANY_ORDER, True, 1.0),
    ],
)
def test_empty_expectations(match_type, with_calls, score):
    result = run_tools([], calls("a") if with_calls else [], match_type)
    assert result.score == score


def test_expected_tools_concatenate_over_turns():
    case = EvalCase(
        eval_id="m",
        conversation=[
            Invocation.simple("one", expected_tools=calls("a")),
            Invocation.simple("two", expected_tools=calls("b")),
        ],
    )
    actual = ExecutionResult(tool_calls=calls("a", "b"))
    assert TrajectoryMatchCriterion(CriterionConfig.trajectory()).evaluate_sync(actual, case).score == 1.0
    swapped = ExecutionResult(tool_calls=calls("b", "a"))
    assert TrajectoryMatchCriterion(CriterionConfig.trajectory()).evaluate_sync(swapped, case).score == 0.0


def test_default_threshold_is_documented_and_trajectory_factory_threshold_is_one():
    assert TrajectoryMatchCriterion().threshold == 0.8
    assert TrajectoryMatchCriterion(CriterionConfig.trajectory()).threshold == 1.0


# --- check_args -----------------------------------------------------------------------------------------


def test_args_ignored_unless_check_args():
    expected = [ToolCall(name="get_weather", args={"city": "Paris"})]
    actual = [ToolCall(name="get_weather", args={"city": "Lyon"})]
    assert run_tools(expected, actual).score == 1.0
    assert run_tools(expected, actual, check_args=True).score == 0.0


def test_args_compare_structurally_not_as_text():
    expected = [ToolCall(name="t", args={"n": 1, "nested": {"xs": [1, 2], "flag": True}})]
    assert (
        run_tools(
            expected, [ToolCall(name="t", args={"nested": {"flag": True, "xs": [1.0, 2]}, "n": 1.0})], check_args=True
        ).score
        == 1.0
    )
    assert (
        run_tools(
            expected, [ToolCall(name="t", args={"n": "1", "nested": {"xs": [1, 2], "flag": True}})], check_args=True
        ).score
        == 0.0
    )
    assert (
        run_tools(
            expected, [ToolCall(name="t", args={"n": 1, "nested": {"xs": [1, 2], "flag": 1}})], check_args=True
        ).score
        == 0.0
    )


def test_expected_empty_args_accept_any_arguments():
    result = run_tools([ToolCall(name="search")], [ToolCall(name="search", args={"q": "x"})], check_args=True)
    assert result.score == 1.0


def test_any_order_uses_a_maximum_matching_so_wildcards_do_not_steal():
    expected = [ToolCall(name="get"), ToolCall(name="get", args={"id": 1})]
    actual = [ToolCall(name="get", args={"id": 1}), ToolCall(name="get", args={"id": 2})]
    result = run_tools(expected, actual, ANY_ORDER, check_args=True)
    assert result.score == 1.0
    assert {(m["expected_index"], m["actual_index"]) for m in result.details["matches"]} == {(0, 1), (1, 0)}


def test_uncaptured_arguments_are_an_error_not_a_silent_mismatch():
    expected = [ToolCall(name="get_weather", args={"city": "Paris"}), ToolCall(name="book", args={"n": 2})]
    actual = [
        ToolCall(name="get_weather", args={}, args_captured=False),
        ToolCall(name="book", args={}, args_captured=False),
    ]
    result = run_tools(expected, actual, check_args=True)
    assert result.is_error and not result.passed and result.score == 0.0
    assert result.error.startswith("arguments not captured")
    assert "'book'" in result.error and "'get_weather'" in result.error
    assert result.threshold == 1.0  # the configured threshold is recorded, not 0.0
    assert result.details["uncaptured_tools"] == ["book", "get_weather"]


def test_uncaptured_arguments_are_fine_when_no_comparison_needs_them():
    uncaptured = [ToolCall(name="search", args_captured=False)]
    assert run_tools([ToolCall(name="search")], uncaptured, check_args=True).score == 1.0
    assert run_tools([ToolCall(name="search", args={"q": 1})], uncaptured, check_args=False).score == 1.0
    ignore = {"search": ToolArgsRule(mode=ArgMatchMode.IGNORE)}
    assert (
        run_tools([ToolCall(name="search", args={"q": 1})], uncaptured, check_args=True, tool_args=ignore).score == 1.0
    )


# --- per-tool argument rules ----------------------------------------------------------------------------


def test_tool_args_subset_allows_extra_keys_but_not_different_values():
    rules = {"search": ToolArgsRule(mode=ArgMatchMode.SUBSET)}
    expected = [ToolCall(name="search", args={"q": "paris", "opts": {"lang": "fr"}})]
    extra_keys = [ToolCall(name="search", args={"q": "paris", "opts": {"lang": "fr", "n": 3}, "page": 2})]
    different = [ToolCall(name="search", args={"q": "lyon", "opts": {"lang": "fr"}})]
    assert run_tools(expected, extra_keys, check_args=True, tool_args=rules).score == 1.0
    assert run_tools(expected, extra_keys, check_args=True).score == 0.0  # the default is whole-object equality
    assert run_tools(expected, different, check_args=True, tool_args=rules).score == 0.0


def test_tool_args_keys_compares_only_listed_keys():
    rules = {"book": ToolArgsRule(mode=ArgMatchMode.KEYS, keys=["date"])}
    expected = [ToolCall(name="book", args={"date": "2025-01-01", "note": "window seat"})]
    assert (
        run_tools(
            expected,
            [ToolCall(name="book", args={"date": "2025-01-01", "note": "aisle"})],
            check_args=True,
            tool_args=rules,
        ).score
        == 1.0
    )
    result = run_tools(expected, [ToolCall(name="book", args={"date": "2025-02-02"})], check_args=True, tool_args=rules)
    assert result.score == 0.0
    assert result.details["missing"][0]["reason"] == (
        "called with different arguments: key 'date': expected '2025-01-01', got '2025-02-02'"
    )


def test_tool_args_rules_apply_per_tool_only():
    rules = {"search": ToolArgsRule(mode=ArgMatchMode.IGNORE)}
    expected = [ToolCall(name="search", args={"q": 1}), ToolCall(name="book", args={"n": 1})]
    actual = [ToolCall(name="search", args={"q": 2}), ToolCall(name="book", args={"n": 2})]
    assert run_tools(expected, actual, check_args=True, tool_args=rules).score == 0.5


def test_validate_config_flags_inconsistent_tool_args_rules():
    bad = CriterionConfig.trajectory(
        tool_args={"a": ToolArgsRule(mode=ArgMatchMode.KEYS), "b": ToolArgsRule(mode=ArgMatchMode.SUBSET, keys=["x"])}
    )
    problems = TrajectoryMatchCriterion(bad).validate_config()
    assert len(problems) == 2 and "'a'" in problems[0] and "'b'" in problems[1]
    assert TrajectoryMatchCriterion(CriterionConfig.trajectory()).validate_config() == []


# --- partial-credit details -----------------------------------------------------------------------------


def test_details_name_matches_missing_and_extra_with_reasons():
    expected = [
        ToolCall(name="get_weather", args={"city": "Paris"}),
        ToolCall(name="book"),
        ToolCall(name="notify"),
    ]
    actual = [ToolCall(name="book"), ToolCall(name="get_weather", args={"city": "Lyon"}), ToolCall(name="log")]
    result = run_tools(expected, actual, IN_ORDER, check_args=True)
    d = result.details
    assert result.score == pytest.approx(1 / 3)
    assert d["matches"] == [{"expected_index": 1, "actual_index": 0, "name": "book"}]
    reasons = {m["name"]: m["reason"] for m in d["missing"]}
    assert reasons == {
        "get_weather": "called with different arguments: key 'city': expected 'Paris', got 'Lyon'",
        "notify": "not called",
    }
    assert [e["name"] for e in d["extra"]] == ["get_weather", "log"]
    assert d["reason"] == (
        "Matched 33% of expected tools. Expected ['get_weather', 'book', 'notify'], "
        "got ['book', 'get_weather', 'log']. 1 of the expected calls had different arguments: get_weather "
        "(expected #0): key 'city': expected 'Paris', got 'Lyon'."
    )
    assert d["match_type"] == "IN_ORDER" and d["check_args"] is True
    assert [c.name for c in d["expected_trajectory"]] == ["get_weather", "book", "notify"]
    assert d["actual_trajectory"][1].args == {"city": "Lyon"}
    # as JSON (reports, stored results) each trajectory entry is the call's fields
    dumped = result.model_dump(mode="json")["details"]
    assert dumped["actual_trajectory"][1]["args"] == {"city": "Lyon"}
    assert dumped["expected_trajectory"][0] == {
        "name": "get_weather",
        "args": {"city": "Paris"},
        "call_id": None,
        "result": None,
    }


def test_out_of_order_and_fewer_times_reasons():
    swapped = run_tools(calls("a", "b"), calls("b", "a"), EXACT)
    assert [m["reason"] for m in swapped.details["missing"]] == ["out of order", "out of order"]
    twice = run_tools(calls("a", "a"), calls("a"), ANY_ORDER)
    assert twice.details["missing"] == [
        {
            "name": "a",
            "args": {},
            "call_id": None,
            "result": None,
            "expected_index": 1,
            "reason": "called fewer times than expected",
        }
    ]


def test_nested_argument_difference_names_the_path():
    expected = [ToolCall(name="t", args={"filters": {"max": 10, "tags": ["a"]}, "q": "x"})]
    actual = [ToolCall(name="t", args={"filters": {"max": 11, "tags": ["a"]}, "q": "x", "extra": 1})]
    reason = run_tools(expected, actual, check_args=True).details["missing"][0]["reason"]
    assert reason == "called with different arguments: key 'filters.max': expected 10, got 11; unexpected key 'extra'"


def test_result_serialises_to_json():
    result = run_tools([ToolCall(name="a", args={"x": [1, {"y": None}]})], calls("b"), check_args=True)
    text = result.model_dump_json()
    again = type(result).model_validate_json(text)
    assert again.model_dump_json() == text and again.score == result.score
    assert again.details["expected_trajectory"] == [
        {"name": "a", "args": {"x": [1, {"y": None}]}, "call_id": None, "result": None}
    ]


# --- NodeOrderMatchCriterion ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expected", "actual", "match_type", "score"),
    [
        (["MAIN", "TOOL", "MAIN"], ["MAIN", "TOOL", "MAIN"], EXACT, 1.0),
        (["MAIN", "MAIN"], ["MAIN", "TOOL", "MAIN"], EXACT, 1 / 3),
        (["MAIN", "MAIN"], ["MAIN", "TOOL", "MAIN"], IN_ORDER, 1.0),
        (["A", "B"], ["B", "A"], IN_ORDER, 0.5),
        (["A", "B"], ["B", "A"], ANY_ORDER, 1.0),
        (["A", "A", "B"], ["A", "B"], ANY_ORDER, 2 / 3),
    ],
)
def test_node_order_scores(expected, actual, match_type, score):
    assert run_nodes(expected, actual, match_type).score == pytest.approx(score)


@pytest.mark.parametrize("match_type", list(MatchType))
def test_node_order_empty_expectation_scores_one_for_every_match_type(match_type):
    assert run_nodes([], ["A", "B"], match_type).score == 1.0


def test_node_order_details():
    result = run_nodes(["A", "B", "C"], ["A", "C", "D"], IN_ORDER)
    d = result.details
    assert d["expected_node_order"] == ["A", "B", "C"] and d["actual_node_order"] == ["A", "C", "D"]
    assert d["match_type"] == "IN_ORDER"
    assert d["matches"] == [
        {"expected_index": 0, "actual_index": 0, "name": "A"},
        {"expected_index": 2, "actual_index": 1, "name": "C"},
    ]
    assert d["missing"] == [{"name": "B", "expected_index": 1, "reason": "not visited"}]
    assert d["extra"] == [{"name": "D", "actual_index": 2}]
    assert d["reason"].startswith("Matched 67% of expected nodes.")
    assert run_nodes(["A", "B"], ["B", "A"], EXACT).details["missing"][0]["reason"] == "out of order"


def test_node_order_ignores_check_args():
    config = CriterionConfig(match_type=EXACT, check_args=True)
    case = EvalCase.single_turn("c", "q", expected_node_order=["A"])
    assert NodeOrderMatchCriterion(config).evaluate_sync(ExecutionResult(node_visits=["A"]), case).score == 1.0


# --- ToolNameMatchCriterion -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expected", "actual", "score"),
    [
        (["a", "b"], ["b", "a"], 1.0),
        (["a", "b"], ["a", "b", "c", "c"], 1.0),  # extra calls are not penalised
        (["a", "a", "b"], ["a", "b"], 2 / 3),  # multiset: each expected name consumes one call
        (["a"], ["b"], 0.0),
        ([], [], 1.0),
        ([], ["a"], 0.5),
    ],
)
def test_tool_name_match(expected, actual, score):
    criterion = ToolNameMatchCriterion(CriterionConfig.tool_name_match())
    result = criterion.evaluate_sync(ExecutionResult(tool_calls=calls(*actual)), case_with_tools(calls(*expected)))
    assert result.score == pytest.approx(score)
    assert result.details["expected_names"] == expected and result.details["actual_names"] == actual


def test_tool_name_match_ignores_arguments_and_lists_missing_and_extra():
    expected = [ToolCall(name="a", args={"x": 1}), ToolCall(name="b")]
    actual = [ToolCall(name="a", args={"x": 2}), ToolCall(name="c")]
    result = ToolNameMatchCriterion().evaluate_sync(ExecutionResult(tool_calls=actual), case_with_tools(expected))
    assert result.score == 0.5
    assert result.details["missing_names"] == ["b"] and result.details["extra_names"] == ["c"]


def test_names_and_reference_flags():
    assert TrajectoryMatchCriterion.name == "tool_trajectory_avg_score"
    assert NodeOrderMatchCriterion.name == "node_order_score"
    assert ToolNameMatchCriterion.name == "tool_name_match_score"
    assert all(
        c.requires_reference for c in (TrajectoryMatchCriterion, NodeOrderMatchCriterion, ToolNameMatchCriterion)
    )


@pytest.mark.parametrize("match_type", [EXACT, IN_ORDER, ANY_ORDER])
def test_runs_decided_in_one_pass_grade_as_the_general_path_does(match_type: MatchType) -> None:
    # a rule for a tool no case calls sends every case down the general path (the per-tool predicate); the
    # results must be the same, details included, whether or not the one-pass check decided them
    rng = random.Random(5)
    unused_rule = {"never_called": ToolArgsRule(mode=ArgMatchMode.EXACT)}
    in_one_pass = 0
    for _ in range(400):
        expected = [
            ToolCall(name=rng.choice("ab"), args=rng.choice([{}, {"k": 1}, {"k": 1.0}, {"k": True}]))
            for _ in range(rng.randrange(4))
        ]
        if rng.random() < 0.5:
            actual = [call.model_copy(update={"call_id": f"c{n}"}) for n, call in enumerate(expected)]
        else:
            actual = [ToolCall(name=rng.choice("ab"), args=rng.choice([{}, {"k": 1}])) for _ in range(rng.randrange(4))]
        if actual and rng.random() < 0.1:
            actual[-1] = actual[-1].model_copy(update={"args_captured": False})
        fast = run_tools(expected, actual, match_type, check_args=True)
        general = run_tools(expected, actual, match_type, check_args=True, tool_args=unused_rule)
        assert fast.model_dump(mode="json") == general.model_dump(mode="json")
        in_one_pass += calls_satisfy_in_place(actual, expected)
    assert in_one_pass > 100
