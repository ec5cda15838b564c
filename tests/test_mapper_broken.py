"""Broken spans never crash the mapper: it keeps the best trajectory it can and says what it could not read."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.mapper_spans import SpanBuilder, js
from tracegrade.models.span import LogRecordData, SpanEvent, SpanRecord
from tracegrade.trajectory import map_spans

AGENT = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "agent"}


def _tool(name: str = "get_weather", **extra) -> dict:
    return {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
        "gen_ai.tool.call.id": f"id-{name}",
        "gen_ai.tool.call.arguments": js({"city": "Paris"}),
        **extra,
    }


def _issues_mentioning(result, text: str) -> list[str]:
    return [i for i in result.mapping_issues if text in i]


def test_missing_parent_becomes_a_root_and_is_noted():
    b = SpanBuilder()
    agent = b.add("invoke_agent agent", AGENT, parent=None, start=10, end=100)
    agent.parent_span_id = "00000000deadbeef"
    b.add("execute_tool get_weather", _tool(), parent=agent, start=20, end=30)
    result = map_spans(b.spans)
    assert result.node_visits == ["agent"]
    assert [t.name for t in result.tool_calls] == ["get_weather"]
    assert _issues_mentioning(result, "00000000deadbeef is not among the spans")


def test_orphan_children_keep_their_tool_calls():
    b = SpanBuilder()
    missing_agent = SpanRecord(
        trace_id=b.trace_id, span_id="aaaaaaaaaaaaaaaa", name="invoke_agent agent", start_ns=1, end_ns=2
    )
    b.add("execute_tool one", _tool("one"), parent=missing_agent, start=20, end=30)
    b.add("execute_tool two", _tool("two"), parent=missing_agent, start=40, end=50)
    result = map_spans(b.spans)
    assert [t.name for t in result.tool_calls] == ["one", "two"]
    assert [t.args for t in result.tool_calls] == [{"city": "Paris"}] * 2
    assert len(_issues_mentioning(result, "treated as a root")) == 2


def test_duplicate_span_ids_are_kept_once():
    b = SpanBuilder()
    agent = b.add("invoke_agent agent", AGENT, parent=None, start=10, end=100)
    tool = b.add("execute_tool get_weather", _tool(), parent=agent, start=20, end=30)
    b.spans.append(tool)
    b.spans.append(SpanRecord(trace_id=b.trace_id, span_id=tool.span_id, name="something else", start_ns=25, end_ns=26))
    result = map_spans(b.spans)
    assert len(result.tool_calls) == 1
    assert _issues_mentioning(result, "appears 3 times")


def test_cycles_in_parent_links_are_broken():
    b = SpanBuilder()
    first = b.add("invoke_agent agent", AGENT, parent=None, start=10, end=100)
    second = b.add("execute_tool get_weather", _tool(), parent=first, start=20, end=30)
    first.parent_span_id = second.span_id
    alone = b.add("invoke_agent solo", {**AGENT, "gen_ai.agent.name": "solo"}, parent=None, start=200, end=300)
    alone.parent_span_id = alone.span_id
    result = map_spans(b.spans)
    assert sorted(result.node_visits) == ["agent", "solo"]
    assert [t.name for t in result.tool_calls] == ["get_weather"]
    assert len(_issues_mentioning(result, "cycle")) == 2


def test_non_json_and_truncated_json_keep_the_raw_text():
    b = SpanBuilder()
    with b.span("invoke_agent agent", AGENT):
        b.leaf(
            "chat m",
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.input.messages": "hello there",
                "gen_ai.output.messages": '[{"role": "assistant", "parts": [{"type": "text", "content": "It is su',
            },
        )
        b.leaf(
            "execute_tool get_weather",
            _tool(**{"gen_ai.tool.call.arguments": '{"city": "Par', "gen_ai.tool.call.result": '{"weather": '}),
        )
    result = map_spans(b.spans)
    call = result.tool_calls[0]
    assert call.args == {"_raw": '{"city": "Par'} and call.args_captured is True
    assert call.result == '{"weather": '
    assert result.llm_calls[0].input_messages == [{"role": "user", "content": "hello there"}]
    assert result.llm_calls[0].output_text.startswith('[{"role": "assistant"')
    assert _issues_mentioning(result, "gen_ai.input.messages is not JSON")
    assert _issues_mentioning(result, "gen_ai.output.messages is not valid JSON (truncated?")
    assert _issues_mentioning(result, "gen_ai.tool.call.arguments is not valid JSON")


def test_dropped_attributes_and_events_are_flagged():
    b = SpanBuilder()
    with b.span("invoke_agent agent", AGENT):
        chat = b.leaf(
            "chat m",
            {
                "gen_ai.operation.name": "chat",
                "llm.input_messages.19.message.role": "user",
                "llm.input_messages.19.message.content": "late message",
            },
        )
    chat.dropped_attributes_count = 42
    chat.dropped_events_count = 3
    result = map_spans(b.spans)
    assert _issues_mentioning(result, "dropped 42 attributes")
    assert _issues_mentioning(result, "dropped 3 events")
    assert result.llm_calls[0].input_messages == [{"role": "user", "content": "late message"}]


def test_missing_times_keep_input_order():
    b = SpanBuilder()
    root = b.add("invoke_workflow w", {"gen_ai.operation.name": "invoke_workflow"}, parent=None, start=100, end=0)
    b.add("invoke_agent first", {**AGENT, "gen_ai.agent.name": "first"}, parent=root, start=0, end=0)
    b.add("invoke_agent second", {**AGENT, "gen_ai.agent.name": "second"}, parent=root, start=0, end=0)
    result = map_spans(b.spans)
    assert result.node_visits == ["first", "second"]
    assert result.duration_seconds == 0
    assert _issues_mentioning(result, "has no start time")
    assert _issues_mentioning(result, "has no end time")
    assert all(v.parallel_group is None for v in result.visits)


def test_wrong_types_everywhere_do_not_crash():
    b = SpanBuilder()
    with b.span("invoke_agent agent", {**AGENT, "gen_ai.agent.name": 5, "final_result": {"a": 1}}):
        b.leaf(
            "chat m",
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.input.messages": 42,
                "gen_ai.output.messages": [1, "x", None],
                "gen_ai.usage.input_tokens": "12",
                "gen_ai.usage.output_tokens": "many",
                "gen_ai.response.finish_reasons": 7,
            },
            events=[SpanEvent("gen_ai.choice", attributes={"message": 3})],
        )
        b.leaf(
            "execute_tool x",
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": None,
                "gen_ai.tool.call.arguments": ["a", "b"],
                "gen_ai.tool.call.id": 9,
            },
        )
        b.leaf(
            "x",
            {
                "openinference.span.kind": "LLM",
                "llm.input_messages.x.message.role": "user",
                "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": "{bad",
            },
        )
        b.leaf("y", {"metadata": "{not json", "openinference.span.kind": "CHAIN"})
    logs = [
        LogRecordData(
            time_ns=1, trace_id=b.trace_id, span_id=b.spans[1].span_id, event_name="gen_ai.user.message", body=[1, 2]
        )
    ]
    result = map_spans(b.spans, logs)
    assert result.node_visits == ["agent"]
    assert result.actual_response == '{"a":1}'
    assert result.llm_calls[0].token_usage.input_tokens == 12
    assert result.tool_calls[0].name == "x"
    assert result.tool_calls[0].args == {"input": ["a", "b"]}


def test_no_spans_at_all():
    result = map_spans([])
    assert result.mapping_issues == ["no spans to map"]
    assert result.content_captured is False and result.response_captured is False


_KEYS = [
    "gen_ai.operation.name",
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.tool.name",
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
    "gen_ai.tool.call.id",
    "gen_ai.agent.name",
    "openinference.span.kind",
    "input.value",
    "output.value",
    "metadata",
    "tool.name",
    "llm.input_messages.0.message.content",
    "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments",
    "traceloop.span.kind",
    "traceloop.entity.input",
    "traceloop.entity.output",
    "traceloop.association.properties.langgraph_node",
    "traceloop.association.properties.langgraph_step",
    "gcp.vertex.agent.llm_request",
    "gcp.vertex.agent.llm_response",
    "gcp.vertex.agent.tool_response",
    "mlflow.spanType",
    "mlflow.spanInputs",
    "mlflow.spanOutputs",
    "tracegrade.span.kind",
    "tracegrade.tool.arguments",
    "final_result",
    "events",
    "pydantic_ai.all_messages",
    "gen_ai.usage.input_tokens",
]
_WORDS = st.sampled_from(
    [
        "chat",
        "execute_tool",
        "invoke_agent",
        "LLM",
        "TOOL",
        "AGENT",
        "CHAIN",
        "task",
        "workflow",
        "tool",
        "node",
        "llm",
        '"TOOL"',
        "agent",
        "tools",
        "__end__",
        "1",
        "",
    ]
)
_JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | _WORDS | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(
                [
                    "role",
                    "content",
                    "parts",
                    "type",
                    "messages",
                    "tool_calls",
                    "id",
                    "name",
                    "arguments",
                    "langgraph_node",
                    "langgraph_step",
                    "langgraph_checkpoint_ns",
                    "inputs",
                    "outputs",
                    "output",
                    "data",
                    "kwargs",
                    "tool_call_id",
                    "text",
                    "message",
                    "event.name",
                ]
            ),
            inner,
            max_size=4,
        )
    ),
    max_leaves=10,
)
_VALUE = _JSONISH | _JSONISH.map(js) | _JSONISH.map(lambda v: js(v)[:-2])


@st.composite
def _span_sets(draw):
    count = draw(st.integers(min_value=1, max_value=8))
    ids = [f"{i + 1:016x}" for i in range(count)]
    spans = []
    for i, span_id in enumerate(ids):
        attrs = draw(st.dictionaries(st.sampled_from(_KEYS), _VALUE, max_size=6))
        parent = draw(st.none() | st.sampled_from([*ids, "ffffffffffffffff"]))
        spans.append(
            SpanRecord(
                trace_id="1" * 32,
                span_id=draw(st.sampled_from(ids)) if draw(st.booleans()) and i else span_id,
                name=draw(
                    _WORDS | st.sampled_from(["agent run", "running tool", "call_llm", "invocation", "tools_condition"])
                ),
                start_ns=draw(st.integers(min_value=-5, max_value=50)),
                end_ns=draw(st.integers(min_value=-5, max_value=60)),
                parent_span_id=parent,
                attributes=attrs,
                status_code=draw(st.sampled_from(["UNSET", "OK", "ERROR"])),
                events=[
                    SpanEvent(
                        draw(st.sampled_from(["gen_ai.choice", "gen_ai.user.message", "exception"])),
                        attributes=draw(
                            st.dictionaries(
                                st.sampled_from(["message", "content", "tool_calls", "id"]), _VALUE, max_size=2
                            )
                        ),
                    )
                ]
                if draw(st.booleans())
                else [],
            )
        )
    return spans


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_span_sets())
def test_random_broken_span_sets_never_crash(spans):
    result = map_spans(spans)
    assert len(result.node_visits) == len(result.visits)
    assert result.model_dump_json()
