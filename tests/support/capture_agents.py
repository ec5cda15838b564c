"""Offline agents for the live-capture tests: a LangGraph graph with a scripted chat model, a pydantic-ai
agent with a FunctionModel, and a plain function graph traced with ``trace_node``/``trace_tool``."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from typing import Any

from examples.pydantic_ai_support.agent import latest_request
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode
from pydantic_ai import Agent, ModelRetry, RunContext
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from tracegrade import trace_node, trace_tool
from tracegrade.models import EvalCase, Invocation, ToolCall

CITY_TEMPERATURE = {"Paris": 22, "Tokyo": 18, "Rome": 27, "Oslo": 4}


# ---------------- LangGraph + OpenInference ----------------


class ScriptedChatModel(BaseChatModel):
    """A chat model whose reply is computed by ``script(messages)`` (no network)."""

    script: Callable[[list[BaseMessage]], AIMessage]

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self.script(messages))])


def weather_script(messages: list[BaseMessage]) -> AIMessage:
    """One ``temperature`` call per known city in the last user message (all in one step), then a summary."""
    last_human = max(i for i, m in enumerate(messages) if isinstance(m, HumanMessage))
    results = [m for m in messages[last_human + 1 :] if isinstance(m, ToolMessage)]
    if results:
        return AIMessage(content="Report: " + "; ".join(str(r.content) for r in results))
    cities = [c for c in re.findall(r"[A-Z][a-z]+", str(messages[last_human].content)) if c in CITY_TEMPERATURE]
    if not cities:
        return AIMessage(content="I only know the weather.")
    return AIMessage(
        content="", tool_calls=[{"name": "temperature", "args": {"city": c}, "id": f"call_{c.lower()}"} for c in cities]
    )


@tool
def temperature(city: str) -> str:
    """The temperature in a city."""
    return f"{city} is {CITY_TEMPERATURE[city]} degrees"


class WeatherState(MessagesState):
    unit: str


def build_weather_graph(seen_configs: list[dict[str, Any]] | None = None) -> StateGraph:
    """agent -> (tools | summarize) via a conditional edge; tools -> agent; summarize -> END."""
    model = ScriptedChatModel(script=weather_script)

    def agent(state: WeatherState, config: RunnableConfig) -> dict[str, Any]:
        if seen_configs is not None:
            seen_configs.append({"configurable": dict(config.get("configurable", {})), "unit": state.get("unit")})
        return {"messages": [model.invoke(state["messages"])]}

    def summarize(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage(content=str(state["messages"][-1].content) + ".")]}

    def route(state: MessagesState) -> str:
        last = state["messages"][-1]
        return "tools" if getattr(last, "tool_calls", None) else "summarize"

    graph = StateGraph(WeatherState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode([temperature]))
    graph.add_node("summarize", summarize)
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", route, {"tools": "tools", "summarize": "summarize"})
    graph.add_edge("tools", "agent")
    graph.add_edge("summarize", END)
    return graph


# ---------------- pydantic-ai + FunctionModel ----------------


def _support_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    request = latest_request(messages)
    if request.retried:
        return ModelResponse(parts=[ToolCallPart("lookup", {"sku": "fallback"}, tool_call_id="call_fallback")])
    if request.tool_results:
        return ModelResponse(parts=[TextPart("Found: " + ", ".join(request.tool_results))])
    prompt = request.prompt
    if prompt.startswith("explode"):
        return ModelResponse(parts=[ToolCallPart("explode", {}, tool_call_id="call_explode")])
    if prompt.startswith("whoami"):
        return ModelResponse(parts=[ToolCallPart("whoami", {}, tool_call_id="call_whoami")])
    if prompt.startswith("strict"):
        return ModelResponse(parts=[ToolCallPart("strict_lookup", {"sku": "bad"}, tool_call_id="call_strict")])
    skus = re.findall(r"sku-\w+", prompt)
    if not skus:
        return ModelResponse(parts=[TextPart("No SKU given.")])
    return ModelResponse(parts=[ToolCallPart("lookup", {"sku": s}, tool_call_id=f"call_{s}") for s in skus])


def build_support_agent() -> Agent[Any, str]:
    """``lookup`` answers, ``explode`` raises ValueError, ``strict_lookup`` raises ModelRetry (then the
    model falls back to ``lookup``), ``whoami`` reads the run's deps."""
    agent: Agent[Any, str] = Agent(FunctionModel(_support_model), name="support", deps_type=dict)

    @agent.tool
    def whoami(ctx: RunContext[dict]) -> str:
        return f"you are {ctx.deps['name']}"

    @agent.tool_plain
    def lookup(sku: str) -> str:
        return f"{sku} in stock"

    @agent.tool_plain
    def explode() -> str:
        raise ValueError("the warehouse is on fire")

    @agent.tool_plain(retries=1)
    def strict_lookup(sku: str) -> str:
        raise ModelRetry(f"unknown sku {sku!r}; use lookup")

    return agent


# ---------------- plain functions traced with trace_node / trace_tool ----------------


@trace_tool
async def search(query: str, limit: int = 3) -> list[str]:
    await asyncio.sleep(0)
    return [f"{query}-{i}" for i in range(limit)]


@trace_tool("calculator")
def add(a: float, b: float) -> float:
    return a + b


@trace_node("planner")
async def plan(message: str) -> str:
    await asyncio.sleep(0)
    return "search" if message.startswith("find") else "add"


@trace_node("responder")
def respond(findings: Any) -> str:
    return f"Answer: {findings}"


async def function_graph(message: str) -> str:
    """planner -> (search | calculator) -> responder; the reply text is returned."""
    step = await plan(message)
    if step == "search":
        findings: Any = await search(message.removeprefix("find ").strip(), limit=2)
    else:
        numbers = [float(n) for n in re.findall(r"\d+", message)]
        findings = add(numbers[0], numbers[1])
    return respond(findings)


def single_case(
    eval_id: str,
    query: str,
    response: str | None = None,
    tools: list[ToolCall] | None = None,
    nodes: list[str] | None = None,
) -> EvalCase:
    return EvalCase(eval_id=eval_id, conversation=[Invocation.simple(query, response, tools, nodes)])
