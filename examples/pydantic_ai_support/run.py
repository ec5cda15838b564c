"""Evaluate the pydantic-ai support agent offline: ``python examples/pydantic_ai_support/run.py [OUT_DIR]``.

Prints the console report and writes JSON and HTML reports to OUT_DIR (default: a new temp dir).
One case is designed to fail, so the report shows a real failure; the script still exits 0.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]  # this example's modules, then the shared example_cli

from agent import agent  # noqa: E402
from example_cli import run_example  # noqa: E402
from otlp_export import exporting  # noqa: E402

from tracegrade import AgentEvaluator, EvalConfig, EvalReport, create_eval_app  # noqa: E402


async def evaluate(out_dir: str) -> EvalReport:
    app, collector = create_eval_app(agent)  # instruments the agent with a provider feeding the collector
    evaluator = AgentEvaluator(app, collector, config=EvalConfig.from_file(HERE / "config.json"))
    with exporting(collector):  # also to OTEL_EXPORTER_OTLP_ENDPOINT when it is set
        return await evaluator.evaluate(HERE / "eval_set.json", output_dir=out_dir)


if __name__ == "__main__":
    run_example(evaluate, temp_prefix="tracegrade-pydantic-ai-")
