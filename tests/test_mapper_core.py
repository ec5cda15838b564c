"""Mapper rules that hold across conventions: grouping, nested LLM spans, id recovery, parallel visits."""

from __future__ import annotations

from tests.support.mapper_spans import SpanBuilder, js
from tracegrade.models.span import SpanEvent, SpanRecord
from tracegrade.trajectory import group_traces, map_spans


def _agent(name: str) -> dict:
    return {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": name}


def _chat_requesting(*calls: tuple[str, str, dict], model: str = "m") -> dict:
    parts = [{"type": "tool_call", "id": cid, "name": name, "arguments": args} for cid, name, args in calls]
    return {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": model,
        "gen_ai.output.messages": js([{"role": "assistant", "parts": parts}]),
    }


def _tool(name: str, args: dict | None = None) -> dict:
    attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name}
    if args is not None:
        attrs["gen_ai.tool.call.arguments"] = js(args)
    return attrs


def test_group_traces_keeps_arrival_order():
    spans = [
        SpanRecord(trace_id=t, span_id=f"{i:016x}", name="s", start_ns=i, end_ns=i + 1)
        for i, t in enumerate(["b" * 32, "a" * 32, "b" * 32])
    ]
    grouped = group_traces(spans)
    assert list(grouped) == ["b" * 32, "a" * 32]
    assert [s.span_id for s in grouped["b" * 32]] == [spans[0].span_id, spans[2].span_id]


def test_a_case_spanning_two_traces_is_mapped_as_one():
    first, second = SpanBuilder(trace_id="1" * 32), SpanBuilder(trace_id="2" * 32)
    second._clock = first._clock + 10**9
    first.leaf("invoke_agent a", _agent("a"))
    second.leaf("invoke_agent b", _agent("b"))
    result = map_spans(second.spans + first.spans)
    assert result.node_visits == ["a", "b"]
    assert result.trace_ids == ["1" * 32, "2" * 32]


def test_nested_llm_spans_of_one_call_count_once_with_leaf_usage():
    b = SpanBuilder(scope="openinference.instrumentation.langchain")
    with b.span(
        "ChatOpenAI",
        {
            "openinference.span.kind": "LLM",
            "llm.model_name": "gpt-4o",
            "llm.token_count.prompt": 999,
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.content": "hi",
        },
    ):
        b.leaf(
            "chat gpt-4o-2024-08-06",
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": "gpt-4o",
                "gen_ai.response.model": "gpt-4o-2024-08-06",
                "gen_ai.usage.input_tokens": 7,
            },
        )
    result = map_spans(b.spans)
    assert len(result.llm_calls) == 1
    call = result.llm_calls[0]
    assert (call.token_usage.input_tokens, call.output_text, call.model) == (7, "hi", "gpt-4o-2024-08-06")
    assert call.span_id == b.spans[1].span_id


def test_nested_llm_spans_of_different_models_are_two_calls():
    b = SpanBuilder()
    with b.span("chat router", {"gen_ai.operation.name": "chat", "gen_ai.request.model": "router-model"}):
        b.leaf("chat big", {"gen_ai.operation.name": "chat", "gen_ai.request.model": "big-model"})
    assert [c.model for c in map_spans(b.spans).llm_calls] == ["router-model", "big-model"]


def test_tool_ids_recovered_by_name_and_arguments_then_by_order():
    b = SpanBuilder()
    with b.span("invoke_agent a", _agent("a")):
        b.leaf(
            "chat m",
            _chat_requesting(
                ("c-paris", "weather", {"city": "Paris"}),
                ("c-rome", "weather", {"city": "Rome"}),
                ("c-t1", "time", {}),
                ("c-t2", "time", {"tz": "utc"}),
            ),
        )
        b.leaf("execute_tool weather", _tool("weather", {"city": "Rome"}))  # ran first, matched by its arguments
        b.leaf("execute_tool weather", _tool("weather", {"city": "Paris"}))
        b.leaf("execute_tool time", _tool("time"))  # no arguments captured: by order, and arguments recovered
        b.leaf("execute_tool time", _tool("time"))
    result = map_spans(b.spans)
    assert [(t.call_id, t.args) for t in result.tool_calls] == [
        ("c-rome", {"city": "Rome"}),
        ("c-paris", {"city": "Paris"}),
        ("c-t1", {}),
        ("c-t2", {"tz": "utc"}),
    ]
    assert all(t.args_captured for t in result.tool_calls)


def test_a_tool_span_with_an_id_of_its_own_gets_the_arguments_of_the_request_by_name():
    """ADK gives its tool spans ids of its own (``adk-…``) while the model's request carries the model's id."""
    b = SpanBuilder()
    with b.span("invoke_agent a", _agent("a")):
        b.leaf("chat m", _chat_requesting(("model-call-7", "weather", {"city": "Bergen"})))
        b.leaf("execute_tool weather", {**_tool("weather"), "gen_ai.tool.call.id": "adk-1f3e"})
    (tool,) = map_spans(b.spans).tool_calls
    assert (tool.call_id, tool.args, tool.args_captured) == ("adk-1f3e", {"city": "Bergen"}, True)


def test_tool_span_is_never_matched_to_a_later_request():
    b = SpanBuilder()
    with b.span("invoke_agent a", _agent("a")):
        b.leaf("execute_tool weather", _tool("weather", {"city": "Paris"}))
        b.leaf("chat m", _chat_requesting(("late", "weather", {"city": "Paris"})))
    result = map_spans(b.spans)
    assert result.tool_calls[0].call_id is None


def test_identical_repeated_messages_are_kept_in_the_conversation():
    b = SpanBuilder()
    user = {"role": "user", "parts": [{"type": "text", "content": "again"}]}
    ask = {"role": "assistant", "parts": [{"type": "tool_call", "id": "x", "name": "f", "arguments": {}}]}
    answer = {"role": "tool", "parts": [{"type": "tool_call_response", "id": "x", "response": "ok"}]}
    with b.span("invoke_agent a", _agent("a")):
        b.leaf(
            "chat m",
            {"gen_ai.operation.name": "chat", "gen_ai.input.messages": js([user]), "gen_ai.output.messages": js([ask])},
        )
        b.leaf(
            "chat m",
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.input.messages": js([user, ask, answer]),
                "gen_ai.output.messages": js([ask]),
            },
        )
        b.leaf(
            "chat m", {"gen_ai.operation.name": "chat", "gen_ai.input.messages": js([user, ask, answer, ask, answer])}
        )
    result = map_spans(b.spans)
    assert [m["role"] for m in result.messages] == ["user", "assistant", "tool", "assistant", "tool"]


def test_a_history_repeating_the_previous_output_reads_it_as_its_own_message():
    """The next call's history repeats the last output; reused, it must read as if decoded afresh. A message
    without a role takes each side's default (assistant as output, user in a history)."""
    b = SpanBuilder()
    user = {"role": "user", "parts": [{"type": "text", "content": "go"}]}
    ask = {"role": "assistant", "parts": [{"type": "tool_call", "id": "x", "name": "f", "arguments": {"a": 1}}]}
    roleless = {"parts": [{"type": "text", "content": "no role"}]}
    with b.span("invoke_agent a", _agent("a")):
        for history, output in (([user], ask), ([user, ask], roleless), ([user, ask, roleless], user)):
            b.leaf(
                "chat m",
                {
                    "gen_ai.operation.name": "chat",
                    "gen_ai.input.messages": js(history),
                    "gen_ai.output.messages": js([output]),
                },
            )
    calls = map_spans(b.spans).llm_calls
    asked = {"role": "assistant", "content": "", "tool_calls": [{"id": "x", "name": "f", "arguments": {"a": 1}}]}
    assert calls[0].output_messages == [asked] and calls[1].input_messages[1] == asked
    assert calls[1].output_messages == [{"role": "assistant", "content": "no role"}]
    assert calls[2].input_messages[2] == {"role": "user", "content": "no role"}


def test_overlapping_sibling_agents_form_a_parallel_group():
    b = SpanBuilder()
    root = b.add("invoke_workflow w", {"gen_ai.operation.name": "invoke_workflow"}, parent=None, start=0, end=100)
    b.add("invoke_agent one", _agent("one"), parent=root, start=10, end=50)
    b.add("invoke_agent two", _agent("two"), parent=root, start=20, end=40)
    b.add("invoke_agent three", _agent("three"), parent=root, start=60, end=70)
    result = map_spans(b.spans)
    groups = [v.parallel_group for v in result.visits]
    assert groups[0] is not None and groups[0] == groups[1] and groups[2] is None


def test_root_error_and_tool_error():
    b = SpanBuilder()
    with b.span("invoke_agent a", _agent("a"), status="ERROR", status_message="agent failed: boom"):
        b.leaf(
            "execute_tool t",
            _tool("t", {}),
            status="ERROR",
            events=[SpanEvent("exception", attributes={"exception.type": "ValueError", "exception.message": "bad"})],
        )
    result = map_spans(b.spans)
    assert (result.status, result.error) == ("ERROR", "agent failed: boom")
    assert result.tool_calls[0].error == "ValueError: bad"
    step = result.trajectory[1]
    assert (step.step_type.value, step.name, step.metadata["call_id"]) == ("tool", "t", None)


def test_nothing_captured_is_reported_as_such():
    b = SpanBuilder()
    with b.span("invoke_agent a", _agent("a")):
        b.leaf("chat m", {"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 4})
    result = map_spans(b.spans)
    assert (result.content_captured, result.response_captured, result.user_query) == (False, False, None)
    assert result.llm_calls[0].content_captured is False
    assert result.token_usage.input_tokens == 4


def test_pydantic_ai_with_the_openinference_processor_reads_genai_first():
    b = SpanBuilder(scope="pydantic-ai")
    with b.span("invoke_agent a", {**_agent("a"), "openinference.span.kind": "AGENT"}):
        b.leaf(
            "execute_tool get_weather",
            {
                **_tool("get_weather", {"city": "Paris"}),
                "gen_ai.tool.call.id": "pyd-1",
                "gen_ai.tool.call.result": "sunny",
                "openinference.span.kind": "TOOL",
                "tool_call.id": "pyd-1",
                "tool.parameters": js({"city": "Paris"}),
                "input.value": js({"wrong": True}),
                "output.value": "also wrong",
            },
        )
    result = map_spans(b.spans)
    assert result.convention == "genai"
    assert [(t.args, t.call_id, t.result) for t in result.tool_calls] == [({"city": "Paris"}, "pyd-1", "sunny")]
