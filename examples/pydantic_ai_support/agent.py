"""A pydantic-ai order-support agent driven by a scripted ``FunctionModel``, so it runs offline.

The model reads the order number (``#1234``) from the user's message and asks for ``get_order_status``,
or ``cancel_order`` when the user wants to cancel; once the tool has answered it replies with the result.
``cancel_order`` refuses shipped orders with ``ModelRetry``; the model then explains it cannot cancel.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pydantic_ai import Agent, ModelRetry
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

ORDERS = {"1001": "shipped", "1002": "processing", "1003": "delivered"}


@dataclass
class LatestRequest:
    """What the model is asked to answer: a tool's refusal, tool results, or the user's prompt."""

    retried: bool  # a tool raised ModelRetry
    tool_results: list[str]
    prompt: str


def latest_request(messages: list[ModelMessage]) -> LatestRequest:
    """Read the latest request's parts."""
    last = messages[-1]
    parts = last.parts if isinstance(last, ModelRequest) else []
    return LatestRequest(
        # ModelRetry arrives as a RetryPromptPart (pydantic-ai 1.x) or as a "retried" return (2.x)
        retried=any(isinstance(p, RetryPromptPart) or getattr(p, "outcome", None) == "retried" for p in parts),
        tool_results=[str(p.content) for p in parts if isinstance(p, ToolReturnPart)],
        prompt=next((str(p.content) for p in parts if isinstance(p, UserPromptPart)), ""),
    )


def scripted_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Decide the next step from the latest request."""
    request = latest_request(messages)
    if request.retried:
        return ModelResponse(parts=[TextPart("Sorry, that order has already shipped and cannot be cancelled.")])
    if request.tool_results:
        return ModelResponse(parts=[TextPart(" ".join(request.tool_results))])
    prompt = request.prompt
    match = re.search(r"#(\d+)", prompt)
    if match is None:
        return ModelResponse(parts=[TextPart("Please tell me your order number, like #1001.")])
    tool = "cancel_order" if "cancel" in prompt.lower() else "get_order_status"
    return ModelResponse(parts=[ToolCallPart(tool, {"order_id": match.group(1)}, tool_call_id=f"call_{tool}")])


agent = Agent(FunctionModel(scripted_model), name="support_agent", instructions="Help with orders.")


@agent.tool_plain
def get_order_status(order_id: str) -> str:
    """Where an order is."""
    return f"Order #{order_id} is {ORDERS.get(order_id, 'unknown')}."


@agent.tool_plain
def cancel_order(order_id: str) -> str:
    """Cancel an order that has not shipped yet."""
    if ORDERS.get(order_id) == "shipped":
        raise ModelRetry(f"order #{order_id} has shipped; it cannot be cancelled")
    return f"Order #{order_id} is cancelled."
