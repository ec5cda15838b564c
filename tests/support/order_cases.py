"""Thirty one-turn cases about orders ("When does order 7 ship?") and the agent that answers each right: the runs
the comparison and gate tests build their baselines and candidates from."""

from __future__ import annotations

from tracegrade.models import EvalSet
from tracegrade.models.dataset import EvalCase

__all__ = ["ORDERS", "ORDER_CASES", "answer_order", "order_of"]

ORDER_CASES = 30
ORDERS = EvalSet(
    eval_set_id="orders",
    eval_cases=[
        EvalCase.single_turn(
            eval_id=f"order-{n}", user_query=f"When does order {n}?", expected_response=f"Order {n} ships tomorrow."
        )
        for n in range(ORDER_CASES)
    ],
)


def order_of(message: str) -> int:
    """The order a case's question is about."""
    return int(message.split()[-1].rstrip("?"))


def answer_order(message: str) -> str:
    """The right answer to a case's question."""
    return f"Order {order_of(message)} ships tomorrow."
