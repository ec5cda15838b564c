"""``BatchSimulator``: many simulated conversations against one agent, at most N at a time, and a summary."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from tracegrade.evaluation.simulator import ConversationScenario, SimulationResult, UserSimulator

__all__ = ["BatchSimulator"]


class BatchSimulator:
    """Runs :meth:`UserSimulator.run` for many scenarios concurrently (``max_concurrency`` at a time).

    ``simulator`` defaults to ``UserSimulator(**simulator_options)``. Each conversation gets its own session
    (thread id), so conversations with one agent never share history.
    """

    def __init__(self, simulator: UserSimulator | None = None, max_concurrency: int = 5, **simulator_options: Any):
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency must be at least 1, got {max_concurrency}")
        self.simulator = simulator or UserSimulator(**simulator_options)
        self.max_concurrency = max_concurrency

    async def run_batch(self, agent: Any, scenarios: Sequence[ConversationScenario]) -> list[SimulationResult]:
        """Every scenario's result, in the order of ``scenarios``; a conversation that raises becomes a result
        with its ``error`` (the others go on)."""
        gate = asyncio.Semaphore(self.max_concurrency)

        async def one(scenario: ConversationScenario) -> SimulationResult:
            async with gate:
                try:
                    return await self.simulator.run(agent, scenario)
                except Exception as exc:
                    return SimulationResult(
                        scenario_id=scenario.scenario_id, stopped_by="error", error=f"{type(exc).__name__}: {exc}"
                    )

        return list(await asyncio.gather(*(one(s) for s in scenarios)))

    @staticmethod
    def summary(results: Sequence[SimulationResult]) -> dict[str, Any]:
        """``total_scenarios``, ``completed``, ``completion_rate``, ``total_goals_achieved``, ``average_turns``
        and ``errors`` (the number of conversations that ended in an error); rates are 0 for no results."""
        total = len(results)
        completed = sum(1 for r in results if r.completed)
        return {
            "total_scenarios": total,
            "completed": completed,
            "completion_rate": completed / total if total else 0.0,
            "total_goals_achieved": sum(len(r.goals_achieved) for r in results),
            "average_turns": sum(r.turns for r in results) / total if total else 0.0,
            "errors": sum(1 for r in results if r.error is not None),
        }
