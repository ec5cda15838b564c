"""Every OTLP/JSON fixture (real agent runs) maps to exactly the trajectory its .expected.json names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tracegrade.ingest.decode import decode_traces_json
from tracegrade.models.execution import ExecutionResult
from tracegrade.trajectory import map_spans

DATA = Path(__file__).parent / "data" / "otlp"
FIXTURES = sorted(p.name.removesuffix(".otlp.json") for p in DATA.glob("*.otlp.json"))


def _map(name: str) -> tuple[ExecutionResult, dict]:
    decoded = decode_traces_json((DATA / f"{name}.otlp.json").read_bytes())
    assert decoded.rejected == []
    expected = json.loads((DATA / f"{name}.expected.json").read_text())
    return map_spans(decoded.spans), expected


def test_all_five_fixtures_are_present():
    assert len(FIXTURES) == 5


@pytest.mark.parametrize("name", FIXTURES)
def test_fixture_maps_to_expected(name: str):
    result, expected = _map(name)
    assert result.user_query == expected["user_query"]
    if expected["final_response"] is None:
        assert result.response_captured is False
        assert result.actual_response == ""
    else:
        assert result.response_captured is True
        assert result.actual_response == expected["final_response"]
    assert result.node_visits == expected["node_order"]
    assert len(result.llm_calls) == expected["llm_calls"]
    assert result.content_captured is expected["content_captured"]
    assert len(result.tool_calls) == len(expected["tool_calls"])
    for actual, want in zip(result.tool_calls, expected["tool_calls"]):
        assert actual.name == want["name"]
        assert actual.call_id == want.get("call_id")
        if want["args"] is None:
            assert actual.args_captured is False
        else:
            assert actual.args_captured is True
            assert actual.args == want["args"]
        if want["result"] is None:
            assert actual.result_captured is False
        else:
            assert actual.result_captured is True
            assert actual.result == want["result"]
    assert result.mapping_issues == []


@pytest.mark.parametrize(
    ("name", "convention"),
    [
        ("pydantic_ai_2.68.0_v5", "genai"),
        ("langgraph_openinference_langchain", "openinference"),
        ("langgraph_traceloop_langchain", "traceloop"),
        ("google_adk_2.13.0_v2_span_only", "adk"),
        ("google_adk_2.13.0_default", "adk"),
    ],
)
def test_fixture_convention_and_usage_from_llm_spans_only(name: str, convention: str):
    result, _ = _map(name)
    assert result.convention == convention
    # the pydantic agent span carries aggregated usage (113/16); only the two chat spans count
    per_call = [c.token_usage.input_tokens for c in result.llm_calls]
    assert result.token_usage.input_tokens == sum(per_call)
    assert result.token_usage.calls == 2


def test_langgraph_routing_steps_record_the_chosen_branch():
    for name in ("langgraph_openinference_langchain", "langgraph_traceloop_langchain"):
        result, _ = _map(name)
        routes = [
            (s.name, s.metadata["chosen"], s.metadata["source"])
            for s in result.trajectory
            if s.step_type == "conditional"
        ]
        assert routes == [("tools_condition", "tools", "agent"), ("tools_condition", "__end__", "agent")]
        kinds = [s.step_type.value for s in result.trajectory]
        assert kinds == ["node", "conditional", "node", "tool", "node", "conditional", "node"]
        assert result.conversation_id == "thread-42"


def test_adk_history_ids_are_not_used_and_messages_are_deduplicated():
    result, _ = _map("google_adk_2.13.0_v2_span_only")
    roles = [m["role"] for m in result.messages]
    assert roles == ["system", "user", "assistant", "tool", "assistant"]
    assert result.messages[2]["tool_calls"][0]["id"] == "adk-call-1"
    assert result.llm_calls[0].tool_call_requests[0].call_id == "adk-call-1"


def test_content_not_captured_is_not_empty():
    result, _ = _map("google_adk_2.13.0_default")
    assert all(not c.content_captured for c in result.llm_calls)
    call = result.tool_calls[0]
    assert (call.args_captured, call.result_captured) == (False, False)
    assert result.user_query is None


def test_result_survives_a_validating_round_trip():
    for name in FIXTURES:
        result, _ = _map(name)
        again = ExecutionResult.model_validate_json(result.model_dump_json())
        assert again.node_visits == result.node_visits
        assert [t.args for t in again.tool_calls] == [t.args for t in result.tool_calls]


async def test_argument_check_on_uncaptured_content_says_so_instead_of_a_mismatch():
    from tracegrade.criteria import TrajectoryMatchCriterion
    from tracegrade.models import CriterionConfig, EvalCase, MatchType, ToolCall

    result, _ = _map("google_adk_2.13.0_default")
    expected = [ToolCall(name="get_weather", args={"city": "Paris"})]
    case = EvalCase.single_turn("adk", "weather?", expected_tools=expected)
    checked = TrajectoryMatchCriterion(CriterionConfig.trajectory(match_type=MatchType.IN_ORDER, check_args=True))
    verdict = await checked.evaluate(result, case)
    assert verdict.is_error and verdict.error.startswith("arguments not captured")
    assert "get_weather" in verdict.error
    names_only = TrajectoryMatchCriterion(CriterionConfig.trajectory(match_type=MatchType.IN_ORDER))
    assert (await names_only.evaluate(result, case)).score == 1.0  # names were captured; only arguments were not
