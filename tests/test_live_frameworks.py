"""Live runs through real instrumentations, offline: LangGraph + openinference-instrumentation-langchain with
a scripted chat model, and pydantic-ai with FunctionModel; each graded by AgentEvaluator."""

from __future__ import annotations

from typing import Any

from tests.support.capture_agents import build_support_agent, build_weather_graph, single_case
from tracegrade import (
    AgentEvaluator,
    CriteriaConfig,
    CriterionConfig,
    EvalConfig,
    EvalSet,
    MatchType,
    ReporterConfig,
    ToolCall,
    create_eval_app,
)
from tracegrade.models import EvalCase, Invocation, SessionInput

NO_REPORTS = ReporterConfig(enabled=False)


def config(match_type: MatchType = MatchType.EXACT, with_nodes: bool = True) -> EvalConfig:
    return EvalConfig(
        criteria=CriteriaConfig(
            trajectory=CriterionConfig.trajectory(match_type=match_type, check_args=True),
            node_order=CriterionConfig.node_order() if with_nodes else None,
            rouge_match=CriterionConfig.rouge_match(threshold=0.9),
        ),
        reporter=NO_REPORTS,
    )


def scores(result) -> dict[str, float]:
    return {c.criterion: c.score for c in result.criterion_results}


def temp(city: str) -> ToolCall:
    return ToolCall(name="temperature", args={"city": city})


async def test_langgraph_agent_graded_through_openinference_spans():
    seen: list[dict[str, Any]] = []
    app, collector = create_eval_app(build_weather_graph(seen))
    with_state = single_case(
        "paris",
        "Temperature in Paris?",
        "Report: Paris is 22 degrees.",
        [temp("Paris")],
        ["agent", "tools", "agent", "summarize"],
    )
    with_state.session_input = SessionInput(
        user_id="bob", state={"unit": "C"}, config={"configurable": {"tenant": "acme"}, "recursion_limit": 10}
    )
    eval_set = EvalSet(
        eval_set_id="lg",
        eval_cases=[
            with_state,
            single_case(
                "two-in-one-step",
                "Compare Paris and Tokyo",
                "Report: Paris is 22 degrees; Tokyo is 18 degrees.",
                [temp("Paris"), temp("Tokyo")],
                ["agent", "tools", "agent", "summarize"],
            ),
            single_case("no-tools", "Hello", "I only know the weather..", [], ["agent", "summarize"]),
            single_case(
                "wrong-city",
                "Temperature in Rome?",
                "Report: Oslo is 4 degrees.",
                [temp("Oslo")],
                ["agent", "tools", "agent", "summarize"],
            ),
        ],
    )
    report = await AgentEvaluator(app, collector, config=config()).evaluate(eval_set)
    paris, both, hello, wrong = report.results

    assert [r.passed for r in report.results] == [True, True, True, False], [scores(r) for r in report.results]
    assert scores(paris) == {"tool_trajectory_avg_score": 1.0, "node_order_score": 1.0, "rouge_match": 1.0}
    assert paris.actual_tool_calls[0].call_id == "call_paris"
    assert paris.actual_tool_calls[0].result is not None and "22 degrees" in str(paris.actual_tool_calls[0].result)
    assert [tc.call_id for tc in both.actual_tool_calls] == ["call_paris", "call_tokyo"]
    assert both.node_visits == ["agent", "tools", "agent", "summarize"]
    assert len(both.node_details) == 2  # two model calls
    assert hello.actual_tool_calls == [] and hello.node_visits == ["agent", "summarize"]
    routing = [s for s in paris.actual_trajectory if s.step_type == "conditional"]
    assert routing and routing[0].metadata.get("chosen") == "tools"

    wrong_scores = scores(wrong)
    assert wrong_scores["tool_trajectory_avg_score"] == 0.0 and wrong_scores["node_order_score"] == 1.0
    missing = wrong.get_criterion_result("tool_trajectory_avg_score").details["missing"][0]
    assert missing["reason"].startswith("called with different arguments")

    first_call = seen[0]
    assert first_call["unit"] == "C"
    assert first_call["configurable"]["tenant"] == "acme" and first_call["configurable"]["user_id"] == "bob"
    assert first_call["configurable"]["thread_id"].endswith("_paris")


async def test_langgraph_multi_turn_keeps_the_thread_and_accumulates():
    app, collector = create_eval_app(build_weather_graph())
    case = EvalCase(
        eval_id="conv",
        conversation=[
            Invocation.simple(
                "Temperature in Paris?",
                "Report: Paris is 22 degrees.",
                [temp("Paris")],
                ["agent", "tools", "agent", "summarize"],
            ),
            Invocation.simple(
                "Now Rome?", "Report: Rome is 27 degrees.", [temp("Rome")], ["agent", "tools", "agent", "summarize"]
            ),
        ],
    )
    result = await AgentEvaluator(app, collector, config=config()).evaluate_case(case)
    assert result.passed, scores(result)
    assert [tc.args["city"] for tc in result.actual_tool_calls] == ["Paris", "Rome"]
    assert len(result.turn_results) == 2 and result.actual_response == "Report: Rome is 27 degrees."
    # the checkpointer holds the thread: the second turn's model input starts with the first turn's question
    second_turn_inputs = result.node_details[2].input_messages
    assert any("Paris" in str(m.get("content", "")) for m in second_turn_inputs)


async def test_langchain_is_never_instrumented_twice():
    case = single_case("p", "Temperature in Paris?", "Report: Paris is 22 degrees.", [temp("Paris")])
    first_app, first = create_eval_app(build_weather_graph())
    first_result = await AgentEvaluator(first_app, first, config=config(with_nodes=False)).evaluate_case(case)
    first.reset()  # the evaluator released the case; make sure nothing else is left either
    second_app, second = create_eval_app(build_weather_graph())  # re-points the one instrumentation
    result = await AgentEvaluator(second_app, second, config=config(with_nodes=False)).evaluate_case(case)
    assert first_result.passed and result.passed
    assert len(first_result.node_details) == len(result.node_details) == 2  # each model call recorded once
    assert first.spans_for() == []


async def test_pydantic_ai_agent_tools_retries_errors_and_deps():
    agent = build_support_agent()
    retried = single_case(
        "retried",
        "strict please",
        "Found: fallback in stock",
        [ToolCall(name="strict_lookup", args={"sku": "bad"}), ToolCall(name="lookup", args={"sku": "fallback"})],
    )
    whoami = single_case("deps", "whoami", "Found: you are Ada", [ToolCall(name="whoami")])
    whoami.session_input = SessionInput(state={"name": "Ada"})
    eval_set = EvalSet(
        eval_set_id="pa",
        eval_cases=[
            single_case(
                "two-skus",
                "check sku-1 and sku-2",
                "Found: sku-1 in stock, sku-2 in stock",
                [ToolCall(name="lookup", args={"sku": "sku-1"}), ToolCall(name="lookup", args={"sku": "sku-2"})],
            ),
            retried,
            single_case("raises", "explode now", "never", [ToolCall(name="explode")]),
            whoami,
            single_case(
                "wrong", "check sku-9", "Found: sku-9 in stock", [ToolCall(name="lookup", args={"sku": "sku-1"})]
            ),
        ],
    )
    report = await AgentEvaluator(agent, config=config(with_nodes=False)).evaluate(eval_set, parallel=True)
    two, retry, raises, deps, wrong = report.results

    assert two.passed and scores(two) == {"tool_trajectory_avg_score": 1.0, "rouge_match": 1.0}
    assert [tc.call_id for tc in two.actual_tool_calls] == ["call_sku-1", "call_sku-2"]
    assert [tc.result for tc in two.actual_tool_calls] == ["sku-1 in stock", "sku-2 in stock"]

    assert retry.passed, scores(retry)
    assert retry.actual_tool_calls[0].name == "strict_lookup" and retry.actual_tool_calls[0].error
    assert retry.actual_tool_calls[1].error is None

    assert raises.error is not None and raises.error.startswith("Agent error on turn 0: ")
    assert "the warehouse is on fire" in raises.error
    assert [tc.name for tc in raises.actual_tool_calls] == ["explode"] and raises.actual_tool_calls[0].error

    assert deps.passed and deps.actual_tool_calls[0].result == "you are Ada"
    assert not wrong.passed and scores(wrong)["tool_trajectory_avg_score"] == 0.0
    assert report.summary.error_cases == 1 and report.summary.passed_cases == 3


async def test_pydantic_ai_multi_turn_carries_message_history_and_parallel_cases_stay_apart():
    agent = build_support_agent()
    conv = EvalCase(
        eval_id="conv",
        conversation=[
            Invocation.simple("check sku-a", "Found: sku-a in stock", [ToolCall(name="lookup", args={"sku": "sku-a"})]),
            Invocation.simple("check sku-b", "Found: sku-b in stock", [ToolCall(name="lookup", args={"sku": "sku-b"})]),
        ],
    )
    others = [
        single_case(
            f"c{i}", f"check sku-{i}", f"Found: sku-{i} in stock", [ToolCall(name="lookup", args={"sku": f"sku-{i}"})]
        )
        for i in range(12)
    ]
    report = await AgentEvaluator(agent, config=config(with_nodes=False)).evaluate(
        EvalSet(eval_set_id="pm", eval_cases=[conv, *others]), parallel=True, max_concurrency=4
    )
    assert all(r.passed for r in report.results), [(r.eval_id, scores(r), r.error) for r in report.results]
    conv_result = report.results[0]
    assert [tc.args["sku"] for tc in conv_result.actual_tool_calls] == ["sku-a", "sku-b"]
    last_model_input = conv_result.node_details[-1].input_messages
    assert any("sku-a" in str(m) for m in last_model_input)  # the history went back to the model
    for i, result in enumerate(report.results[1:]):
        assert [tc.args for tc in result.actual_tool_calls] == [{"sku": f"sku-{i}"}]
