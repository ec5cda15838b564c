"""``EvaluationRunner``: several evaluations in one go, or an agent module + eval file + config file.

Each evaluation runs its configured reporters exactly once. (The reference's runner ran every report's
reporters a second time after ``evaluate()`` had already run them, so each file was written and each
console report printed twice.)
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tracegrade.models.config import EvalConfig
from tracegrade.models.dataset import EvalSet
from tracegrade.models.results import EvalReport

__all__ = ["EvaluationRunner"]

Evaluation = tuple[Any, Any, "EvalSet | str | Path"]  # (agent or app, collector or None, eval set or file)


class EvaluationRunner:
    """Runs evaluations one after another and keeps their reports.

    ``results`` maps each eval set id to its latest report; ``reports`` keeps every report in run order
    (two runs of one eval set are both kept there). ``default_config`` defaults to ``EvalConfig.default()``.
    """

    def __init__(self, default_config: EvalConfig | None = None) -> None:
        self.default_config = default_config or EvalConfig.default()
        self.results: dict[str, EvalReport] = {}
        self.reports: list[EvalReport] = []

    def _keep(self, report: EvalReport) -> EvalReport:
        self.results[report.eval_set_id] = report
        self.reports.append(report)
        return report

    async def run(
        self,
        evaluations: Sequence[Evaluation],
        config: EvalConfig | None = None,
        verbose: bool = False,
        output_dir: str | Path | None = None,
    ) -> dict[str, EvalReport]:
        """Evaluate each ``(agent, collector, eval_set)`` in turn with ``config`` (or the default); returns
        ``results``. Reporters run once per evaluation, inside ``AgentEvaluator.evaluate``."""
        from tracegrade.evaluation.evaluator import AgentEvaluator

        for agent, collector, eval_set in evaluations:
            evaluator = AgentEvaluator(agent, collector, config=config or self.default_config)
            self._keep(await evaluator.evaluate(eval_set, verbose=verbose, output_dir=output_dir))
        return dict(self.results)

    async def run_file(
        self,
        agent_module: str | Path,
        eval_file: str | Path,
        config_file: str | Path | None = None,
        output_dir: str | Path | None = None,
        verbose: bool = False,
    ) -> EvalReport:
        """Load the agent from ``agent_module`` (a dotted module or a ``.py`` file defining ``graph``,
        ``compiled_graph``, ``agent_graph``, ``app`` or ``agent``), wire its capture with ``create_eval_app``
        (the reference compiled the graph without its collector, so trajectories came out empty) and
        evaluate ``eval_file`` with ``config_file`` (or the default config)."""
        from tracegrade.evaluation.agent_loading import load_agent
        from tracegrade.evaluation.evaluator import AgentEvaluator, create_eval_app

        config = EvalConfig.from_file(config_file) if config_file is not None else self.default_config
        app, collector = create_eval_app(load_agent(agent_module))
        evaluator = AgentEvaluator(app, collector, config=config)
        return self._keep(await evaluator.evaluate(eval_file, verbose=verbose, output_dir=output_dir))

    @property
    def summary(self) -> dict[str, Any]:
        """``{"total_evaluations": 0}`` before any run; else totals over every kept report."""
        if not self.reports:
            return {"total_evaluations": 0}
        total = sum(r.summary.total_cases for r in self.reports)
        passed = sum(r.summary.passed_cases for r in self.reports)
        return {
            "total_evaluations": len(self.reports),
            "total_cases": total,
            "passed_cases": passed,
            "overall_pass_rate": passed / total if total else 0.0,
        }
