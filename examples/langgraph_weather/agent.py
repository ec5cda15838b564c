"""A LangGraph weather agent traced by OpenInference, with a scripted chat model so it runs offline.

The graph: ``agent`` (the chat model) -> ``tools_condition`` -> ``tools`` (a ToolNode) -> back to ``agent``,
until the model answers without tool calls. The scripted model asks for ``get_weather`` once per city it
recognises in the user's last message (two cities: two tool calls in one step), then summarises the results.
"""

from __future__ import annotations

import re
from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

WEATHER = {"Paris": "sunny, 22°C", "Tokyo": "rainy, 18°C", "Rome": "clear, 27°C", "Berlin": "cloudy, 15°C"}


@tool
def get_weather(city: str) -> str:
    """Current weather in a city."""
    return f"{city}: {WEATHER.get(city, 'unknown')}"


@tool
def get_forecast(city: str, days: int) -> str:
    """Weather forecast for the next days (the scripted model never asks for it)."""
    return f"{city}: {WEATHER.get(city, 'unknown')} for {days} days"


class ScriptedWeatherModel(BaseChatModel):
    """Stands in for a real chat model: deterministic replies with tool calls, no network."""

    @property
    def _llm_type(self) -> str:
        return "scripted-weather"

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        reply = self._reply(messages)
        prompt_tokens = sum(len(str(m.content).split()) for m in messages)  # a word count stands in for tokens
        output_tokens = len(str(reply.content).split()) + 8 * len(reply.tool_calls)
        reply.usage_metadata = {
            "input_tokens": prompt_tokens,
            "output_tokens": output_tokens,
            "total_tokens": prompt_tokens + output_tokens,
        }
        return ChatResult(generations=[ChatGeneration(message=reply)])

    @staticmethod
    def _reply(messages: list[BaseMessage]) -> AIMessage:
        last_human = max(i for i, m in enumerate(messages) if isinstance(m, HumanMessage))
        results = [m for m in messages[last_human + 1 :] if isinstance(m, ToolMessage)]
        if results:  # the tools have answered: summarise
            return AIMessage(content=" ".join(f"{r.content}." for r in results))
        text = str(messages[last_human].content)
        cities = [c for c in re.findall(r"[A-Z][a-z]+", text) if c in WEATHER]
        if not cities:
            return AIMessage(content="Hello! Ask me about the weather in Paris, Tokyo, Rome or Berlin.")
        calls = [{"name": "get_weather", "args": {"city": c}, "id": f"call_{c.lower()}_{last_human}"} for c in cities]
        return AIMessage(content="", tool_calls=calls)


MODEL = ScriptedWeatherModel()


def agent(state: MessagesState) -> dict[str, list[BaseMessage]]:
    return {"messages": [MODEL.invoke(state["messages"])]}


def build_graph() -> StateGraph:
    """The uncompiled graph (``create_eval_app`` compiles it with a checkpointer)."""
    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode([get_weather, get_forecast]))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    return graph


graph = build_graph()  # what `AgentEvaluator.evaluate_file` picks up
