"""Conventions and versions no fixture shows, built span by span from span-conventions.md."""

from __future__ import annotations

from tests.support.mapper_spans import SpanBuilder, js
from tracegrade.models.span import LogRecordData, SpanEvent
from tracegrade.trajectory import map_spans

QUERY = "What's the weather in Paris?"
ANSWER = "It is sunny in Paris."


def _tool_summary(result):
    return [(t.name, t.args, t.call_id, t.result) for t in result.tool_calls]


def _assert_weather_run(result, convention, visits, call_id, tool_result):
    """A mapped weather run: its convention and node visits, one get_weather(city=Paris) call with ``call_id``
    and ``tool_result``, and QUERY answered with ANSWER."""
    assert result.convention == convention
    assert result.node_visits == visits
    assert _tool_summary(result) == [("get_weather", {"city": "Paris"}, call_id, tool_result)]
    assert (result.user_query, result.actual_response) == (QUERY, ANSWER)


# -- pydantic-ai ---------------------------------------------------------------------------------


def test_pydantic_ai_v1_events_attribute_and_running_tool():
    b = SpanBuilder(scope="pydantic-ai")
    call = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
    with b.span(
        "agent run",
        {
            "agent_name": "weather_agent",
            "model_name": "gpt-4o",
            "final_result": ANSWER,
            "gen_ai.usage.input_tokens": 999,  # run totals on the agent span: never counted
            "all_messages_events": js([{"event.name": "gen_ai.user.message", "content": QUERY, "role": "user"}]),
        },
    ):
        b.leaf(
            "chat gpt-4o",
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.system": "openai",
                "gen_ai.request.model": "gpt-4o",
                "gen_ai.usage.input_tokens": 10,
                "gen_ai.usage.output_tokens": 5,
                "events": js(
                    [
                        {"event.name": "gen_ai.system.message", "content": "Be brief.", "role": "system"},
                        {"event.name": "gen_ai.user.message", "content": QUERY, "role": "user"},
                        {
                            "event.name": "gen_ai.choice",
                            "index": 0,
                            "message": {"role": "assistant", "tool_calls": [call]},
                        },
                    ]
                ),
            },
        )
        b.leaf(
            "running tool",
            {
                "gen_ai.tool.name": "get_weather",
                "gen_ai.tool.call.id": "call_1",
                "tool_arguments": '{"city":"Paris"}',
                "tool_response": "sunny",
            },
        )
        b.leaf(
            "chat gpt-4o",
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": "gpt-4o",
                "gen_ai.usage.input_tokens": 20,
                "gen_ai.usage.output_tokens": 6,
                "events": js(
                    [
                        {"event.name": "gen_ai.user.message", "content": QUERY, "role": "user"},
                        {"event.name": "gen_ai.assistant.message", "role": "assistant", "tool_calls": [call]},
                        {"event.name": "gen_ai.tool.message", "content": "sunny", "role": "tool", "id": "call_1"},
                        {"event.name": "gen_ai.choice", "message": {"role": "assistant", "content": ANSWER}},
                    ]
                ),
            },
        )
    result = map_spans(b.spans)
    _assert_weather_run(result, "genai", ["weather_agent"], "call_1", "sunny")
    assert (result.token_usage.input_tokens, result.token_usage.output_tokens) == (30, 11)
    assert result.llm_calls[0].input_messages[0] == {"role": "system", "content": "Be brief."}
    assert result.llm_calls[0].tool_call_requests[0].args == {"city": "Paris"}
    assert [m["role"] for m in result.messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert result.node_responses[-1].is_final and result.node_responses[-1].response_text == ANSWER
    assert result.node_responses[0].tool_call_names == ["get_weather"]


def test_pydantic_ai_v2_all_messages_and_structured_final_result():
    b = SpanBuilder(scope="pydantic-ai")
    history = [
        {"role": "user", "parts": [{"type": "text", "content": "earlier question"}]},
        {"role": "assistant", "parts": [{"type": "text", "content": "earlier answer"}]},
        {"role": "user", "parts": [{"type": "text", "content": QUERY}]},
    ]
    with b.span(
        "agent run",
        {
            "gen_ai.agent.name": "weather_agent",
            "pydantic_ai.all_messages": js(history),
            "final_result": js({"city": "Paris", "forecast": "sunny"}),
        },
    ):
        b.leaf(
            "chat gpt-4o",
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": "gpt-4o",
                "gen_ai.input.messages": js(history),
                "gen_ai.output.messages": js(
                    [{"role": "assistant", "parts": [{"type": "text", "content": "{}"}], "finish_reason": "stop"}]
                ),
            },
        )
    result = map_spans(b.spans)
    assert result.user_query == QUERY  # the message this run answered, not the earlier turn's
    assert result.actual_response == '{"city": "Paris", "forecast": "sunny"}'
    assert result.llm_calls[0].finish_reason == "stop"


def test_pydantic_ai_v6_tool_role_and_result_key():
    b = SpanBuilder(scope="pydantic-ai")
    request = {"role": "assistant", "parts": [{"type": "tool_call", "id": "t1", "name": "f", "arguments": {}}]}
    response = {"role": "tool", "parts": [{"type": "tool_call_response", "id": "t1", "name": "f", "result": 3}]}
    user = {"role": "user", "parts": [{"type": "text", "content": QUERY}]}
    with b.span("invoke_agent a", {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "a"}):
        b.leaf(
            "chat m",
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.input.messages": js([user]),
                "gen_ai.output.messages": js([request]),
            },
        )
        b.leaf("chat m", {"gen_ai.operation.name": "chat", "gen_ai.input.messages": js([user, request, response])})
    result = map_spans(b.spans)
    tool_message = result.llm_calls[1].input_messages[2]
    assert tool_message == {"role": "tool", "content": "3", "tool_call_id": "t1", "name": "f"}
    # no tool spans: the call is known from the model's request, its result from the later tool message
    assert _tool_summary(result) == [("f", {}, "t1", "3")]
    assert result.tool_calls[0].span_id == result.llm_calls[0].span_id


# -- OTel GenAI, older event form ----------------------------------------------------------------


def _chat_with_tool_then_answer(b: SpanBuilder, first_events=(), second_events=()):
    with b.span("invoke_agent helper", {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "helper"}):
        first = b.leaf(
            "chat gpt-4o",
            {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o"},
            events=list(first_events),
        )
        b.leaf("execute_tool get_weather", {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_weather"})
        second = b.leaf(
            "chat gpt-4o",
            {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o"},
            events=list(second_events),
        )
    return first, second


def test_genai_old_event_form_on_span_events_recovers_tool_id_and_args():
    b = SpanBuilder()
    tool_calls = [
        {"id": "call_7", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}
    ]
    _chat_with_tool_then_answer(
        b,
        first_events=[
            SpanEvent("gen_ai.user.message", attributes={"content": QUERY}),
            SpanEvent(
                "gen_ai.choice",
                attributes={
                    "index": 0,
                    "finish_reason": "tool_calls",
                    "message": js({"tool_calls": tool_calls}),
                },
            ),
        ],
        second_events=[
            SpanEvent("gen_ai.choice", attributes={"message": js({"role": "assistant", "content": ANSWER})})
        ],
    )
    result = map_spans(b.spans)
    # the tool span has neither id nor arguments: both come from the preceding model output
    assert _tool_summary(result) == [("get_weather", {"city": "Paris"}, "call_7", None)]
    assert result.tool_calls[0].args_captured is True
    assert result.tool_calls[0].result_captured is False
    assert (result.user_query, result.actual_response) == (QUERY, ANSWER)


def test_genai_old_event_form_in_log_records_joined_by_span_id():
    b = SpanBuilder()
    first, second = _chat_with_tool_then_answer(b)
    logs = [
        LogRecordData(
            time_ns=first.start_ns + 1,
            trace_id=first.trace_id,
            span_id=first.span_id,
            event_name="gen_ai.user.message",
            body={"content": QUERY},
        ),
        LogRecordData(
            time_ns=first.start_ns + 2,
            trace_id=first.trace_id,
            span_id=first.span_id,
            attributes={"event.name": "gen_ai.choice"},
            body={
                "index": 0,
                "message": {
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": {"city": "Paris"}},
                        }
                    ]
                },
            },
        ),
        LogRecordData(
            time_ns=second.start_ns + 1,
            trace_id=second.trace_id,
            span_id=second.span_id,
            event_name="gen_ai.client.inference.operation.details",
            attributes={
                "gen_ai.output.messages": js([{"role": "assistant", "parts": [{"type": "text", "content": ANSWER}]}])
            },
        ),
    ]
    without_logs = map_spans(b.spans)
    assert without_logs.content_captured is False and without_logs.user_query is None
    result = map_spans(b.spans, logs)
    assert result.content_captured is True
    assert (result.user_query, result.actual_response) == (QUERY, ANSWER)
    assert _tool_summary(result) == [("get_weather", {"city": "Paris"}, "c1", None)]


def test_strands_events_on_chat_and_tool_spans_and_agent_usage_not_counted():
    b = SpanBuilder(scope="strands.telemetry.tracer")
    with b.span(
        "invoke_agent Strands Agents",
        {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "Strands Agents",
            "gen_ai.system": "strands-agents",
            "gen_ai.usage.input_tokens": 500,
        },
    ):
        with b.span("execute_event_loop_cycle"):
            b.leaf(
                "chat",
                {"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 12, "gen_ai.usage.output_tokens": 3},
                events=[
                    SpanEvent("gen_ai.user.message", attributes={"content": js([{"text": QUERY}])}),
                    SpanEvent(
                        "gen_ai.choice",
                        attributes={
                            "finish_reason": "tool_use",
                            "message": js(
                                [
                                    {
                                        "toolUse": {
                                            "toolUseId": "tooluse_1",
                                            "name": "get_weather",
                                            "input": {"city": "Paris"},
                                        }
                                    }
                                ]
                            ),
                        },
                    ),
                ],
            )
            b.leaf(
                "execute_tool get_weather",
                {
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": "get_weather",
                    "gen_ai.tool.call.id": "tooluse_1",
                },
                events=[
                    SpanEvent(
                        "gen_ai.tool.message",
                        attributes={"role": "tool", "content": js({"city": "Paris"}), "id": "tooluse_1"},
                    ),
                    SpanEvent("gen_ai.choice", attributes={"message": js([{"text": "sunny"}]), "id": "tooluse_1"}),
                ],
            )
        with b.span("execute_event_loop_cycle"):
            b.leaf(
                "chat",
                {"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 20, "gen_ai.usage.output_tokens": 5},
                events=[
                    SpanEvent(
                        "gen_ai.choice", attributes={"message": js([{"text": ANSWER}]), "finish_reason": "end_turn"}
                    ),
                ],
            )
    result = map_spans(b.spans)
    assert result.node_visits == ["Strands Agents"]
    assert _tool_summary(result) == [("get_weather", {"city": "Paris"}, "tooluse_1", "sunny")]
    assert (result.user_query, result.actual_response) == (QUERY, ANSWER)
    assert result.token_usage.input_tokens == 32


# -- Traceloop 0.47 legacy -----------------------------------------------------------------------


def _assoc(step: int, node: str, ns: str) -> dict:
    p = "traceloop.association.properties."
    return {
        p + "langgraph_step": step,
        p + "langgraph_node": node,
        p + "langgraph_checkpoint_ns": ns,
        p + "thread_id": "t-9",
    }


def _lc(cls: str, **kwargs):
    return {"lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages", cls], "kwargs": kwargs}


def test_traceloop_047_legacy_keys_python_repr_input_and_recovered_id():
    b = SpanBuilder(scope="opentelemetry.instrumentation.langchain")
    final_state = {
        "outputs": {
            "messages": [_lc("HumanMessage", content=QUERY, type="human"), _lc("AIMessage", content=ANSWER, type="ai")]
        }
    }
    with b.span(
        "weather_graph.workflow",
        {
            "traceloop.span.kind": "workflow",
            "traceloop.entity.name": "weather_graph",
            "traceloop.entity.input": js({"inputs": {"messages": [_lc("HumanMessage", content=QUERY, type="human")]}}),
            "traceloop.entity.output": js(final_state),
        },
    ):
        with b.span(
            "agent.task",
            {"traceloop.span.kind": "task", "traceloop.entity.name": "agent", **_assoc(1, "agent", "agent:1")},
        ):
            b.leaf(
                "ChatOpenAI.chat",
                {
                    "llm.request.type": "chat",
                    "gen_ai.system": "openai",
                    "gen_ai.request.model": "gpt-4o",
                    "gen_ai.prompt.0.role": "system",
                    "gen_ai.prompt.0.content": "Be a weather bot.",
                    "gen_ai.prompt.1.role": "user",
                    "gen_ai.prompt.1.content": QUERY,
                    "gen_ai.completion.0.role": "assistant",
                    "gen_ai.completion.0.finish_reason": "tool_calls",
                    "gen_ai.completion.0.tool_calls.0.id": "call_1",
                    "gen_ai.completion.0.tool_calls.0.name": "get_weather",
                    "gen_ai.completion.0.tool_calls.0.arguments": '{"city": "Paris"}',
                    "gen_ai.usage.prompt_tokens": 12,
                    "gen_ai.usage.completion_tokens": 4,
                    **_assoc(1, "agent", "agent:1"),
                },
            )
            b.leaf(
                "should_continue.task",
                {
                    "traceloop.span.kind": "task",
                    "traceloop.entity.name": "should_continue",
                    "traceloop.entity.output": js({"outputs": "tools"}),
                    **_assoc(1, "agent", "agent:1"),
                },
            )
        with b.span(
            "tools.task",
            {"traceloop.span.kind": "task", "traceloop.entity.name": "tools", **_assoc(2, "tools", "tools:1")},
        ):
            b.leaf(
                "get_weather.tool",
                {
                    "traceloop.span.kind": "tool",
                    "traceloop.entity.name": "get_weather",
                    "traceloop.entity.input": js(
                        {"input_str": "{'city': 'Paris'}", "tags": [], "metadata": {}, "kwargs": {}}
                    ),
                    "traceloop.entity.output": js({"output": "sunny in Paris", "kwargs": {"name": "get_weather"}}),
                    **_assoc(2, "tools", "tools:1"),
                },
            )
        with b.span(
            "agent.task",
            {"traceloop.span.kind": "task", "traceloop.entity.name": "agent", **_assoc(3, "agent", "agent:2")},
        ):
            b.leaf(
                "ChatOpenAI.chat",
                {
                    "llm.request.type": "chat",
                    "gen_ai.prompt.0.role": "user",
                    "gen_ai.prompt.0.content": QUERY,
                    "gen_ai.prompt.1.role": "assistant",
                    "gen_ai.prompt.1.tool_calls.0.id": "call_1",
                    "gen_ai.prompt.1.tool_calls.0.name": "get_weather",
                    "gen_ai.prompt.1.tool_calls.0.arguments": '{"city": "Paris"}',
                    "gen_ai.prompt.2.role": "tool",
                    "gen_ai.prompt.2.content": "sunny in Paris",
                    "gen_ai.prompt.2.tool_call_id": "call_1",
                    "gen_ai.completion.0.role": "unknown",
                    "gen_ai.completion.0.content": js(ANSWER),
                    **_assoc(3, "agent", "agent:2"),
                },
            )
    result = map_spans(b.spans)
    _assert_weather_run(result, "traceloop", ["agent", "tools", "agent"], "call_1", "sunny in Paris")
    assert [(s.name, s.metadata.get("chosen")) for s in result.trajectory if s.step_type == "conditional"] == [
        ("should_continue", "tools")
    ]
    assert result.llm_calls[1].output_text == ANSWER
    assert result.llm_calls[0].token_usage.input_tokens == 12
    assert result.conversation_id == "t-9"


# -- Google ADK schema 1 -------------------------------------------------------------------------


def test_adk_schema_1_call_llm_blobs_nested_generate_content_counted_once():
    b = SpanBuilder(scope="gcp.vertex.agent")
    common = {
        "gen_ai.system": "gcp.vertex.agent",
        "gen_ai.request.model": "gemini-2.0-flash",
        "gcp.vertex.agent.session_id": "sess-1",
        "gcp.vertex.agent.invocation_id": "e-1",
    }
    first_request = {
        "model": "gemini-2.0-flash",
        "config": {"system_instruction": "You are a weather bot."},
        "contents": [{"role": "user", "parts": [{"text": QUERY}]}],
    }
    second_request = {
        "model": "gemini-2.0-flash",
        "contents": [
            {"role": "user", "parts": [{"text": QUERY}]},
            {"role": "model", "parts": [{"function_call": {"name": "get_weather", "args": {"city": "Paris"}}}]},
            {
                "role": "user",
                "parts": [{"function_response": {"name": "get_weather", "response": {"result": "sunny"}}}],
            },
        ],
    }
    leaf = {"gen_ai.operation.name": "generate_content", "gen_ai.request.model": "gemini-2.0-flash"}
    with b.span("invocation"), b.span("agent_run [weather_agent]"):
        with b.span(
            "call_llm",
            {
                **common,
                "gcp.vertex.agent.llm_request": js(first_request),
                "gcp.vertex.agent.llm_response": js(
                    {
                        "content": {
                            "role": "model",
                            "parts": [
                                {"function_call": {"id": "adk-1", "name": "get_weather", "args": {"city": "Paris"}}}
                            ],
                        },
                        "finish_reason": "STOP",
                        "usage_metadata": {"prompt_token_count": 30, "candidates_token_count": 5},
                    }
                ),
                "gen_ai.usage.input_tokens": 30,
                "gen_ai.usage.output_tokens": 35,
            },
        ):
            b.leaf(
                "generate_content gemini-2.0-flash",
                {**leaf, "gen_ai.usage.input_tokens": 30, "gen_ai.usage.output_tokens": 5},
            )
        b.leaf(
            "execute_tool get_weather",
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "get_weather",
                "gen_ai.tool.call.id": "adk-1",
                "gcp.vertex.agent.tool_call_args": js({"city": "Paris"}),
                "gcp.vertex.agent.tool_response": js({"result": "sunny"}),
                "gcp.vertex.agent.llm_request": "{}",
                "gcp.vertex.agent.llm_response": "{}",
            },
        )
        with b.span(
            "call_llm",
            {
                **common,
                "gcp.vertex.agent.llm_request": js(second_request),
                "gcp.vertex.agent.llm_response": js(
                    {"content": {"role": "model", "parts": [{"text": ANSWER}]}, "finish_reason": "STOP"}
                ),
            },
        ):
            b.leaf(
                "generate_content gemini-2.0-flash",
                {**leaf, "gen_ai.usage.input_tokens": 40, "gen_ai.usage.output_tokens": 7},
            )
    result = map_spans(b.spans)
    _assert_weather_run(result, "adk", ["weather_agent"], "adk-1", "sunny")
    assert len(result.llm_calls) == 2
    assert (result.token_usage.input_tokens, result.token_usage.output_tokens) == (70, 12)
    assert result.llm_calls[0].input_messages[0] == {"role": "system", "content": "You are a weather bot."}
    assert result.llm_calls[0].finish_reason == "stop"
    history_call = result.llm_calls[1].input_messages[1]["tool_calls"][0]
    assert history_call["id"] is None  # ids in the request history are never trusted
    assert result.conversation_id == "sess-1"


# -- MLflow --------------------------------------------------------------------------------------


def test_mlflow_json_encoded_attributes():
    b = SpanBuilder(scope="mlflow.tracing")
    chat_in = {"messages": [{"role": "user", "content": QUERY}], "model": "gpt-4o"}
    with b.span(
        "weather_agent",
        {
            "mlflow.spanType": js("AGENT"),
            "mlflow.spanInputs": js(chat_in),
            "mlflow.spanOutputs": js(ANSWER),
            "mlflow.traceRequestId": js("tr-1"),
            "session.id": "s-1",
        },
    ):
        b.leaf(
            "ChatOpenAI",
            {
                "mlflow.spanType": js("CHAT_MODEL"),
                "mlflow.spanInputs": js(chat_in),
                "mlflow.spanOutputs": js(
                    {
                        "choices": [
                            {
                                "message": {
                                    "role": "assistant",
                                    "tool_calls": [
                                        {
                                            "id": "call_9",
                                            "type": "function",
                                            "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                                        }
                                    ],
                                }
                            }
                        ]
                    }
                ),
                "mlflow.chat.tokenUsage": js({"input_tokens": 10, "output_tokens": 3, "total_tokens": 13}),
                "mlflow.llm.model": js("gpt-4o"),
            },
        )
        b.leaf(
            "get_weather",
            {
                "mlflow.spanType": js("TOOL"),
                "mlflow.spanInputs": js({"city": "Paris"}),
                "mlflow.spanOutputs": js("sunny"),
            },
        )
        b.leaf(
            "ChatOpenAI",
            {
                "mlflow.spanType": js("CHAT_MODEL"),
                "mlflow.spanOutputs": js({"choices": [{"message": {"role": "assistant", "content": ANSWER}}]}),
            },
        )
    result = map_spans(b.spans)
    _assert_weather_run(result, "mlflow", ["weather_agent"], "call_9", "sunny")
    assert result.llm_calls[0].model == "gpt-4o"
    assert result.token_usage.input_tokens == 10
    assert result.conversation_id == "s-1"


# -- OpenAI Agents SDK (OpenInference) ------------------------------------------------------------


def test_openai_agents_sdk_tree():
    b = SpanBuilder(scope="openinference.instrumentation.openai_agents")
    gen_attrs = {
        "openinference.span.kind": "LLM",
        "llm.system": "openai",
        "llm.model_name": "gpt-4o",
        "llm.input_messages.0.message.role": "system",
        "llm.input_messages.0.message.content": "You help.",
        "llm.input_messages.1.message.role": "user",
        "llm.input_messages.1.message.content": QUERY,
    }
    first_call = "llm.output_messages.0.message.tool_calls.0.tool_call."
    agent = {"openinference.span.kind": "AGENT", "agent.name": "Weather agent", "graph.node.id": "Weather agent"}
    with (
        b.span("Agent workflow", {"openinference.span.kind": "AGENT"}),
        b.span("weather_workflow", {"openinference.span.kind": "CHAIN"}),
        b.span("Weather agent", agent),
    ):
        with b.span("turn", {"openinference.span.kind": "CHAIN"}):
            b.leaf(
                "generation",
                {
                    **gen_attrs,
                    "llm.output_messages.0.message.role": "assistant",
                    first_call + "id": "call_x",
                    first_call + "function.name": "get_weather",
                    first_call + "function.arguments": '{"city": "Paris"}',
                    "llm.token_count.prompt": 50,
                    "llm.token_count.completion": 9,
                },
            )
            b.leaf(
                "get_weather",
                {
                    "openinference.span.kind": "TOOL",
                    "tool.name": "get_weather",
                    "input.value": '{"city": "Paris"}',
                    "output.value": "sunny",
                    "tool.parameters": js({"type": "object"}),
                },
            )
        with b.span("turn", {"openinference.span.kind": "CHAIN"}):
            b.leaf(
                "generation",
                {
                    **gen_attrs,
                    "llm.output_messages.0.message.role": "assistant",
                    "llm.output_messages.0.message.content": ANSWER,
                    "llm.token_count.prompt": 70,
                    "llm.token_count.completion": 8,
                },
            )
    result = map_spans(b.spans)
    # the workflow root is a wrapper, not a visit
    _assert_weather_run(result, "openinference", ["Weather agent"], "call_x", "sunny")
    assert [c.node for c in result.llm_calls] == ["Weather agent", "Weather agent"]
    assert result.token_usage.input_tokens == 120


# -- LangGraph (OpenInference) -------------------------------------------------------------------


def _meta(step: int, node: str, ns: str, **extra) -> dict:
    meta = {"langgraph_step": step, "langgraph_node": node, "langgraph_checkpoint_ns": ns, "thread_id": "t-1", **extra}
    return {"metadata": js(meta)}


def _chain(**extra) -> dict:
    return {"openinference.span.kind": "CHAIN", **extra}


def test_langgraph_parallel_branches_share_a_group_and_step_beats_start_time():
    b = SpanBuilder(scope="openinference.instrumentation.langchain")
    root = b.add("graph", _chain(), parent=None, start=100, end=1000)
    b.add("a", _chain(**_meta(1, "a", "a:1")), parent=root, start=110, end=200)
    b.add("b", _chain(**_meta(2, "b", "b:1")), parent=root, start=210, end=400)
    b.add("c", _chain(**_meta(2, "c", "c:1")), parent=root, start=215, end=300)
    # clock skew: d (step 3) claims to start before c
    b.add("d", _chain(**_meta(3, "d", "d:1", langgraph_triggers=["join:b+c:d"])), parent=root, start=212, end=500)
    result = map_spans(b.spans)
    assert result.node_visits == ["a", "b", "c", "d"]
    groups = {v.name: v.parallel_group for v in result.visits}
    assert groups["b"] is not None and groups["b"] == groups["c"]
    assert groups["a"] is None and groups["d"] is None
    assert [v.step for v in result.visits] == [1, 2, 2, 3]


def _tool_message(content: str, call_id: str) -> str:
    return js(
        {"type": "tool", "data": {"content": content, "type": "tool", "name": "get_weather", "tool_call_id": call_id}}
    )


def test_langgraph_send_fan_out_one_tools_span_per_call():
    b = SpanBuilder(scope="openinference.instrumentation.langchain")
    calls = [("call_a", "Paris"), ("call_b", "Rome")]
    with b.span("LangGraph", _chain()):
        with b.span("agent", {"openinference.span.kind": "AGENT", **_meta(1, "agent", "agent:1")}):
            b.leaf(
                "ChatOpenAI",
                {
                    "openinference.span.kind": "LLM",
                    **_meta(1, "agent", "agent:1"),
                    **{
                        k: v
                        for i, (cid, city) in enumerate(calls)
                        for k, v in {
                            f"llm.output_messages.0.message.tool_calls.{i}.tool_call.id": cid,
                            f"llm.output_messages.0.message.tool_calls.{i}.tool_call.function.name": "get_weather",
                            f"llm.output_messages.0.message.tool_calls.{i}.tool_call.function.arguments": js(
                                {"city": city}
                            ),
                        }.items()
                    },
                },
            )
        for i, (cid, city) in enumerate(calls):
            send = {
                "__type": "tool_call_with_context",
                "tool_call": {"name": "get_weather", "args": {"city": city}, "id": cid},
            }
            meta = _meta(
                2,
                "tools",
                f"tools:{cid}",
                langgraph_triggers=["__pregel_push"],
                langgraph_path=["__pregel_push", i, False],
            )
            with b.span("tools", _chain(**meta, **{"input.value": js(send)})):
                b.leaf(
                    "get_weather",
                    {
                        "openinference.span.kind": "TOOL",
                        "tool.name": "get_weather",
                        "input.value": city,
                        "output.value": _tool_message(f"sunny in {city}", cid),
                        **meta,
                    },
                )
        with b.span("agent", {"openinference.span.kind": "AGENT", **_meta(3, "agent", "agent:2")}):
            pass
    result = map_spans(b.spans)
    assert result.node_visits == ["agent", "tools", "tools", "agent"]
    assert _tool_summary(result) == [
        ("get_weather", {"city": "Paris"}, "call_a", "sunny in Paris"),
        ("get_weather", {"city": "Rome"}, "call_b", "sunny in Rome"),
    ]
    tools_groups = {v.parallel_group for v in result.visits if v.name == "tools"}
    assert len(tools_groups) == 1 and None not in tools_groups


def test_langgraph_subgraph_double_span_counts_once_and_nests():
    b = SpanBuilder(scope="openinference.instrumentation.langchain")
    with b.span("graph", _chain()):
        b.leaf("first", _chain(**_meta(1, "first", "first:1")))
        inner = _chain(**_meta(2, "inner", "inner:9"))
        with b.span("inner", inner), b.span("inner", inner):  # a subgraph node: two spans, one checkpoint ns
            b.leaf("sub_inc", _chain(**_meta(1, "sub_inc", "inner:9|sub_inc:1")))
            b.leaf("sub_dbl", _chain(**_meta(2, "sub_dbl", "inner:9|sub_dbl:1")))
        b.leaf("last", _chain(**_meta(3, "last", "last:1")))
    result = map_spans(b.spans)
    assert result.node_visits == ["first", "inner", "sub_inc", "sub_dbl", "last"]
    parents = {v.name: v.parent_name for v in result.visits}
    assert parents["sub_inc"] == "inner" and parents["inner"] is None
    assert all(v.parallel_group is None for v in result.visits)


def test_langchain_agent_kind_is_ignored_outside_nodes():
    b = SpanBuilder(scope="openinference.instrumentation.langchain")
    with b.span(
        "my_agent_graph",
        {"openinference.span.kind": "AGENT", "metadata": js({"thread_id": "x", "ls_integration": "langgraph"})},
    ):
        b.leaf("agent", {"openinference.span.kind": "AGENT", **_meta(1, "agent", "agent:1")})
    assert map_spans(b.spans).node_visits == ["agent"]


# -- tracegrade's own helpers --------------------------------------------------------------------


def test_native_helpers_under_a_turn_root():
    b = SpanBuilder(scope="tracegrade")
    turn = {
        "tracegrade.eval_set.id": "set-1",
        "tracegrade.case.id": "case-7",
        "tracegrade.turn.index": 0,
        "tracegrade.run.id": "run-3",
        "tracegrade.turn.input": "What is 2+2?",
        "tracegrade.turn.output": "4",
        "tracegrade.thread_id": "thread-5",
    }
    with b.span("tracegrade.turn case-7", turn):
        with b.span("plan", {"tracegrade.span.kind": "node", "tracegrade.node.name": "plan"}):
            b.leaf(
                "calculator",
                {
                    "tracegrade.span.kind": "tool",
                    "tracegrade.tool.name": "calculator",
                    "tracegrade.tool.call_id": "c1",
                    "tracegrade.tool.arguments": js({"a": 2, "b": 2}),
                    "tracegrade.tool.result": "4",
                },
            )
        with b.span("answer", {"tracegrade.span.kind": "node", "tracegrade.node.name": "answer"}):
            b.leaf(
                "lookup",
                {
                    "tracegrade.span.kind": "tool",
                    "tracegrade.tool.name": "lookup",
                    "tracegrade.tool.arguments": js({"q": "x"}),
                },
                status="ERROR",
                events=[SpanEvent("exception", attributes={"exception.type": "KeyError", "exception.message": "'x'"})],
            )
    result = map_spans(b.spans)
    assert result.convention == "tracegrade"
    assert result.node_visits == ["plan", "answer"]
    assert result.metadata == {"eval_set_id": "set-1", "case_id": "case-7", "turn_index": 0, "run_id": "run-3"}
    assert (result.user_query, result.actual_response) == ("What is 2+2?", "4")
    assert _tool_summary(result) == [("calculator", {"a": 2, "b": 2}, "c1", "4"), ("lookup", {"q": "x"}, None, None)]
    assert result.tool_calls[1].error == "KeyError: 'x'"
    assert result.conversation_id == "thread-5"
    assert [s.step_type.value for s in result.trajectory] == ["node", "tool", "node", "tool"]


def test_turn_fallbacks_do_not_claim_content_was_captured():
    b = SpanBuilder(scope="gcp.vertex.agent")
    with (
        b.span(
            "tracegrade.turn c",
            {"tracegrade.case.id": "c", "tracegrade.turn.input": QUERY, "tracegrade.turn.output": ANSWER},
        ),
        b.span("invoke_agent a", {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "a"}),
    ):
        b.leaf("generate_content m", {"gen_ai.operation.name": "generate_content", "gen_ai.usage.input_tokens": 3})
        b.leaf(
            "execute_tool t",
            {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t", "gen_ai.tool.call.id": "x"},
        )
    result = map_spans(b.spans)
    assert (result.user_query, result.actual_response) == (QUERY, ANSWER)
    assert result.content_captured is False
    assert result.tool_calls[0].args_captured is False
    assert result.node_visits == ["a"]
