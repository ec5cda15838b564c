"""Matching eval cases to stored traces: each strategy, multi-turn order, unmatched and ambiguous cases."""

from __future__ import annotations

import pytest

from tests.support.grading_traces import AgentRun, fill_store
from tracegrade.errors import EvalSetError
from tracegrade.evaluation.matching import match_case, match_cases
from tracegrade.evaluation.offline import TraceGrader
from tracegrade.evaluation.selection import iter_executions
from tracegrade.models import EvalCase, EvalSet, Invocation, ToolCall
from tracegrade.models.config import CriteriaConfig, CriterionConfig, EvalConfig
from tracegrade.store import rows

CONFIG = EvalConfig(
    criteria=CriteriaConfig(
        trajectory=CriterionConfig.trajectory(check_args=True), node_order=CriterionConfig.node_order()
    )
)


def case(eval_id: str, *turns: tuple[str, list[ToolCall]], selector: dict | None = None) -> EvalCase:
    return EvalCase(
        eval_id=eval_id,
        conversation=[Invocation.simple(query, None, tools, None) for query, tools in turns],
        metadata={"selector": selector} if selector else {},
    )


def tool(name: str, **args: object) -> ToolCall:
    return ToolCall(name=name, args=dict(args))


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory):
    runs = [
        # case "refund" was run twice by AgentEvaluator; the newer run used a different tool
        AgentRun(1, "refund order 7", "done", [("refund", {"order": 7})], case_id="refund", run_id="r-old"),
        AgentRun(
            2,
            "refund order 7",
            "done",
            [("lookup", {"order": 7}), ("refund", {"order": 7})],
            case_id="refund",
            run_id="r-new",
            start_offset_s=10,
        ),
        # another eval set reused the case id later still
        AgentRun(
            3,
            "refund order 7",
            "done",
            [("escalate", {})],
            case_id="refund",
            run_id="r-other",
            eval_set_id="other-set",
            start_offset_s=20,
        ),
        # a two-turn live case, turns stored out of order
        AgentRun(
            5,
            "second question",
            "b",
            [("search", {"q": "b"})],
            case_id="chat",
            run_id="r-new",
            turn_index=1,
            thread_id="t-chat",
            start_offset_s=31,
        ),
        AgentRun(
            4,
            "first question",
            "a",
            [("search", {"q": "a"})],
            case_id="chat",
            run_id="r-new",
            turn_index=0,
            thread_id="t-chat",
            start_offset_s=30,
        ),
        # production traffic: no case stamps
        AgentRun(
            10, "where is my parcel", "on its way", [("track", {"id": "p1"})], service="shipping", start_offset_s=40
        ),
        AgentRun(
            12, "and when will it arrive", "tomorrow", [("eta", {"id": "p1"})], thread_id="conv-9", start_offset_s=52
        ),
        AgentRun(11, "hello there", "hi", [("greet", {})], thread_id="conv-9", start_offset_s=50),
        AgentRun(13, "duplicate question", "x", [("a", {})], start_offset_s=60),
        AgentRun(14, "duplicate question", "y", [("b", {})], start_offset_s=61),
    ]
    with fill_store(tmp_path_factory.mktemp("matching") / "store.duckdb", runs) as opened:
        yield opened


def tid(n: int) -> str:
    return f"{n:032x}"


def grade(store, *cases: EvalCase, run_id: str | None = None, set_id: str = "support"):
    return TraceGrader(store, CONFIG).grade_eval_set_sync(EvalSet(eval_set_id=set_id, eval_cases=list(cases)), run_id)


def test_case_id_picks_the_newest_run_of_the_graded_eval_set(store) -> None:
    expected = case("refund", ("refund order 7", [tool("lookup", order=7), tool("refund", order=7)]))
    report = grade(store, expected)
    result = report.results[0]
    assert result.error is None and result.passed, result
    assert result.trace_ids == [tid(2)]
    assert result.metadata["match_strategy"] == "case_id"
    # in the other eval set, the newest trace with that case id is its own
    assert match_case(store, expected, eval_set_id="other-set").trace_ids == [tid(3)]


def test_case_id_narrowed_by_run_id(store) -> None:
    expected = case("refund", ("refund order 7", [tool("refund", order=7)]))
    result = grade(store, expected, run_id="r-old").results[0]
    assert result.passed and result.trace_ids == [tid(1)]
    assert not grade(store, expected).results[0].passed  # the newest run called lookup first


def test_multi_turn_case_id_gathers_turns_in_order(store) -> None:
    expected = case("chat", ("first question", [tool("search", q="a")]), ("second question", [tool("search", q="b")]))
    result = grade(store, expected).results[0]
    assert result.trace_ids == [tid(4), tid(5)]
    assert [t.args for t in result.actual_tool_calls] == [{"q": "a"}, {"q": "b"}]
    assert result.passed


def test_selector_trace_id(store) -> None:
    expected = case("parcel", ("anything", [tool("track", id="p1")]), selector={"trace_id": tid(10)})
    result = grade(store, expected).results[0]
    assert result.passed and result.trace_ids == [tid(10)]
    assert result.metadata["match_strategy"] == "selector"


def test_selector_conversation_id_in_time_order(store) -> None:
    expected = case(
        "conv",
        ("hello there", [tool("greet")]),
        ("and when?", [tool("eta", id="p1")]),
        selector={"conversation_id": "conv-9"},
    )
    result = grade(store, expected).results[0]
    assert result.trace_ids == [tid(11), tid(12)]  # stored 12 first; graded in start-time order
    assert result.passed, result


def test_selector_where_predicate(store) -> None:
    expected = case("ship", ("?", [tool("track", id="p1")]), selector={"where": "service_name = 'shipping'"})
    result = grade(store, expected).results[0]
    assert result.passed and result.trace_ids == [tid(10)]


def test_first_user_message(store) -> None:
    expected = case("parcel-q", ("where is my parcel", [tool("track", id="p1")]))
    result = grade(store, expected).results[0]
    assert result.passed and result.metadata["match_strategy"] == "first_message"
    assert result.trace_ids == [tid(10)]


def test_first_user_message_of_a_multi_turn_case_finds_the_conversation(store) -> None:
    expected = case("conv2", ("hello there", [tool("greet")]), ("later", [tool("eta", id="p1")]))
    result = grade(store, expected).results[0]
    assert result.trace_ids == [tid(11), tid(12)] and result.passed


def test_unmatched_case_is_an_error_and_grading_goes_on(store) -> None:
    lost = case("lost", ("a question nobody asked", []))
    found = case("parcel-q", ("where is my parcel", [tool("track", id="p1")]))
    report = grade(store, lost, found)
    lost_result, found_result = report.results
    assert lost_result.is_error and not lost_result.passed
    assert "no trace matches case 'lost'" in lost_result.error
    assert "a question nobody asked" in lost_result.error
    assert found_result.passed
    assert (report.summary.error_cases, report.summary.passed_cases) == (1, 1)


@pytest.mark.parametrize(
    ("selector", "first_turn", "expected_error"),
    [
        (None, "duplicate question", "ambiguous: 2 traces have the user query 'duplicate question'"),
        ({"where": "user_query LIKE 'duplicate%'"}, "x", "ambiguous: 2 traces match case 'amb' by selector"),
    ],
)
def test_ambiguous_single_turn_case(store, selector, first_turn, expected_error) -> None:
    result = grade(store, case("amb", (first_turn, [tool("a")]), selector=selector)).results[0]
    assert result.is_error and expected_error in result.error
    assert sorted(result.trace_ids) == [tid(13), tid(14)]  # the candidates are reported


def test_selector_errors_are_per_case(store) -> None:
    bad_sql = case("bad", ("x", []), selector={"where": "no_such_column = 1"})
    missing = case("gone", ("x", []), selector={"trace_id": "f" * 32})
    malformed = case("odd", ("x", []), selector={"trace_id": tid(10), "where": "TRUE"})
    turns = case("turns", ("hello there", []), ("b", []), ("c", []), selector={"conversation_id": "conv-9"})
    ok = case("parcel", ("anything", [tool("track", id="p1")]), selector={"trace_id": tid(10)})
    matched = {m.case.eval_id: m for m in match_cases(store, [bad_sql, missing, malformed, turns, ok])}
    assert "no_such_column" in (matched["bad"].error or "")
    assert "exactly one of trace_id, conversation_id or where" in (matched["odd"].error or "")
    # grading refuses the selectors `validate` refuses, before anything is graded; the others fail per case
    with pytest.raises(EvalSetError, match="no_such_column") as refused:
        grade(store, bad_sql, malformed, ok)
    assert "exactly one of trace_id, conversation_id or where" in str(refused.value)
    results = {r.eval_id: r for r in grade(store, missing, turns, ok).results}
    assert "not in the store" in results["gone"].error and "f" * 32 in results["gone"].error
    assert "has 3 turns but 2 traces matched by selector" in results["turns"].error
    assert results["parcel"].passed


def test_match_cases_answers_in_case_order(store) -> None:
    cases = [case("parcel-q", ("where is my parcel", [])), case("refund", ("x", [])), case("nope", ("zzz", []))]
    matches = match_cases(store, cases, eval_set_id="support")
    assert [m.case.eval_id for m in matches] == ["parcel-q", "refund", "nope"]
    assert [m.strategy for m in matches] == ["first_message", "case_id", None]
    assert matches[2].error is not None


def test_a_simulated_case_takes_every_turn_of_its_conversation(store) -> None:
    """A simulated case has one scripted opening but as many traces as the simulated user had turns."""
    simulated = EvalCase.simulated(
        "chat",
        scenario={"starting_prompt": "first question", "goals": ["get answers"]},
        expected_tools=[tool("search", q="a"), tool("search", q="b")],
    )
    scripted = case("chat", ("first question", [tool("search", q="a"), tool("search", q="b")]))
    assert match_case(store, simulated).trace_ids == [tid(4), tid(5)]
    assert match_case(store, simulated).error is None
    assert match_case(store, scripted).error is not None  # one scripted turn cannot stand for two traces
    result = grade(store, simulated).results[0]
    assert result.passed and [t.args for t in result.actual_tool_calls] == [{"q": "a"}, {"q": "b"}]


def test_long_id_lists_bound_as_one_parameter_match_and_load_as_literal_lists_do(
    store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Matching and loading name many ids as one JSON parameter (``sql_string_in``); short lists stay literal (loading
    tests them with ``list_contains``, ``sql_string_among``)."""
    cases = [
        case("refund", ("x", [])),
        case("chat", ("first question", []), ("second question", [])),
        case("sel", ("s", []), selector={"trace_id": tid(10)}),
        case("gone", ("g", []), selector={"trace_id": "f" * 32}),
        case("parcel-q", ("where is my parcel", [])),
    ]
    ids = [tid(n) for n in (1, 2, 3, 4, 5, 10, 11, 12, 13, 14)] + ["0" * 32]

    def matched_and_loaded() -> tuple[list[tuple[object, ...]], list[tuple[str, object]]]:
        matches = match_cases(store, cases, eval_set_id="support")
        loaded = iter_executions(store, ids, fields={"tool_calls"})
        return [(m.trace_ids, m.strategy, m.error) for m in matches], [(s.trace_id, s.execution) for s in loaded]

    assert rows.sql_string_among("trace_id", ids)[0].startswith("list_contains(")
    literal = matched_and_loaded()
    monkeypatch.setattr(rows, "LONG_STRING_LIST", 0)
    monkeypatch.setattr(rows, "FEW_STRINGS", 0)
    assert rows.sql_string_among("trace_id", ids)[0].startswith("trace_id IN (SELECT unnest(")
    assert rows.sql_string_in(["a"])[1] == ['["a"]']  # the parameter form is what runs now
    assert matched_and_loaded() == literal
    assert sum(execution is not None for _, execution in literal[1]) == 10  # every stored trace, not the made-up one
