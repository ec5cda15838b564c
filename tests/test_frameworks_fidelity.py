"""Trajectory fidelity against real frameworks run offline (scripted models): what tracegrade rebuilds must be
what the agent did. LangGraph + openinference-instrumentation-langchain with a scripted chat model, pydantic-ai
with FunctionModel, each exporting to a real TracerProvider with a TrajectoryCollector."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode
from opentelemetry.sdk.trace import TracerProvider
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.instrumented import InstrumentationSettings

from tests.support.capture_agents import ScriptedChatModel
from tests.support.mapper_spans import SpanBuilder, js
from tracegrade import TrajectoryCollector, map_spans
from tracegrade.capture.instrumentation import instrument_langchain


def _provider() -> tuple[TracerProvider, TrajectoryCollector]:
    provider = TracerProvider()
    collector = TrajectoryCollector()
    provider.add_span_processor(collector)
    return provider, collector


# ---------------- a batch of parallel tool calls keeps the model's order ----------------

BATCH = [("c1", "fetch", {"key": "b"}), ("c2", "fetch", {"key": "a"}), ("c3", "stamp", {"note": "東京 ✓"})]


def _batch_script(messages: list[BaseMessage]) -> AIMessage:
    if isinstance(messages[-1], ToolMessage):
        return AIMessage(content="done")
    return AIMessage(content="", tool_calls=[{"name": n, "args": a, "id": i} for i, n, a in BATCH])


@tool
async def fetch(key: str) -> str:
    """An async tool: ToolNode awaits it."""
    await asyncio.sleep(0.01)
    return f"{key}-value"


@tool
def stamp(note: str) -> str:
    """A sync tool: ToolNode runs it in a thread, and it tends to start before the async ones."""
    return f"stamped {note}"


def _batch_graph() -> Any:
    model = ScriptedChatModel(script=_batch_script)

    async def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    def route(state: MessagesState) -> str:
        return "tools" if getattr(state["messages"][-1], "tool_calls", None) else END

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode([fetch, stamp]))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", route, {"tools": "tools", END: END})
    graph.add_edge("tools", "agent")
    return graph.compile()


async def test_langgraph_parallel_tool_batch_is_listed_in_the_order_the_model_asked():
    provider, collector = _provider()
    instrument_langchain(provider)
    app = _batch_graph()
    for _ in range(3):  # scheduling varies from run to run; the order must not
        collector.reset()
        await app.ainvoke({"messages": [HumanMessage("go")]})
        execution = collector.execution_for()
        assert [(t.call_id, t.name, t.args) for t in execution.tool_calls] == BATCH
        assert [t.result for t in execution.tool_calls] == ["b-value", "a-value", "stamped 東京 ✓"]
        steps = [s for s in execution.trajectory if s.step_type == "tool"]
        assert [s.metadata["call_id"] for s in steps] == ["c1", "c2", "c3"]
        assert [s.name for s in execution.trajectory if s.step_type == "node"] == ["agent", "tools", "agent"]


# ---------------- agents run one after another: the turn's answer is the last one's ----------------


def _echo_model(prefix: str) -> FunctionModel:
    def reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart(f"{prefix} answer")])

    return FunctionModel(reply)


async def test_pydantic_ai_agents_in_sequence_answer_with_the_last_run():
    provider, collector = _provider()
    settings = InstrumentationSettings(tracer_provider=provider)
    planner = Agent(_echo_model("planner"), name="planner")
    writer = Agent(_echo_model("writer"), name="writer")
    planner.instrument = writer.instrument = settings
    with provider.get_tracer("test").start_as_current_span("pipeline"):
        plan = await planner.run("write about otters")
        await writer.run(f"follow this plan: {plan.output}")
    execution = collector.execution_for()
    assert execution.node_visits == ["planner", "writer"]
    assert execution.user_query == "write about otters"
    assert execution.actual_response == "writer answer"


async def test_pydantic_ai_sub_agent_inside_a_tool_does_not_answer_for_the_run():
    provider, collector = _provider()
    settings = InstrumentationSettings(tracer_provider=provider)
    helper = Agent(_echo_model("helper"), name="helper")

    def main_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        from pydantic_ai.messages import ToolCallPart, ToolReturnPart

        returned = [p for p in messages[-1].parts if isinstance(p, ToolReturnPart)]
        if returned:
            return ModelResponse(parts=[TextPart(f"main says {returned[0].content}")])
        return ModelResponse(parts=[ToolCallPart("ask_helper", {"q": "hi"}, tool_call_id="h1")])

    main = Agent(FunctionModel(main_model), name="main")

    @main.tool_plain
    async def ask_helper(q: str) -> str:
        return (await helper.run(q)).output

    main.instrument = helper.instrument = settings
    await main.run("start")
    execution = collector.execution_for()
    assert execution.node_visits == ["main", "helper"]
    assert execution.actual_response == "main says helper answer"
    assert [(t.name, t.call_id, t.result) for t in execution.tool_calls] == [("ask_helper", "h1", "helper answer")]


# ---------------- ADK 2.x GenAI spans (content in log records), as google-adk 2.13 writes them ----------------


def test_adk_parallel_batch_without_the_merged_span_and_with_results_from_the_model_input():
    """The shapes google-adk 2.13 writes (tests/test_adk_agent.py runs the real thing in the agents venv): tool
    spans with call ids and no content, one ``execute_tool (merged)`` span after a batch, results only in the
    next model call's input."""
    b = SpanBuilder(scope="gcp.vertex.agent")
    calls = [{"type": "tool_call", "id": f"c-{s}", "name": "stock", "arguments": {"sku": s}} for s in ("b", "a")]
    returned = [
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": f"c-{s}", "response": {"sku": s, "n": n}}]}
        for s, n in (("b", 1), ("a", 2))
    ]
    chat = {"gen_ai.operation.name": "generate_content", "gen_ai.request.model": "m"}
    with b.span("invoke_agent shop", {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "shop"}):
        ask = {"gen_ai.input.messages": js([{"role": "user", "parts": [{"type": "text", "content": "go"}]}])}
        b.leaf(
            "generate_content m", chat | ask | {"gen_ai.output.messages": js([{"role": "assistant", "parts": calls}])}
        )
        for sku in ("b", "a"):
            tool = {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "stock",
                "gen_ai.tool.call.id": f"c-{sku}",
            }
            b.leaf("execute_tool stock", tool)
        merged = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "(merged tools)"}
        b.leaf("execute_tool (merged)", merged | {"gen_ai.tool.call.id": "e-7", "gcp.vertex.agent.event_id": "e-7"})
        history = [
            {"role": "user", "parts": [{"type": "text", "content": "go"}]},
            {"role": "assistant", "parts": calls},
        ]
        answer = [{"role": "assistant", "parts": [{"type": "text", "content": "b: 1, a: 2"}]}]
        b.leaf(
            "generate_content m",
            chat | {"gen_ai.input.messages": js(history + returned), "gen_ai.output.messages": js(answer)},
        )
    execution = map_spans(b.spans)
    assert [(t.name, t.call_id, t.args, t.result) for t in execution.tool_calls] == [
        ("stock", "c-b", {"sku": "b"}, {"sku": "b", "n": 1}),
        ("stock", "c-a", {"sku": "a"}, {"sku": "a", "n": 2}),
    ]
    assert [s.name for s in execution.trajectory] == ["shop", "stock", "stock"]
    assert execution.actual_response == "b: 1, a: 2"


# ---------------- a bare collector does not break the program's exit ----------------


def test_collector_on_a_provider_exits_without_a_traceback():
    script = textwrap.dedent(
        """
        from opentelemetry.sdk.trace import TracerProvider
        from tracegrade import TrajectoryCollector

        provider = TracerProvider()
        collector = TrajectoryCollector()
        provider.add_span_processor(collector)
        with provider.get_tracer("t").start_as_current_span("work"):
            pass
        print(len(collector.spans_for()))
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "1", done.stderr
    assert done.stderr == ""  # the provider's atexit shutdown used to print a RuntimeError traceback
