"""One eval set graded twice: live by ``AgentEvaluator`` (spans captured in-process), then offline by
``TraceGrader`` from a real TraceStore file holding the same spans, mapped by the store's own rebuild."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tracegrade.capture.sdk_convert import span_from_readable
from tracegrade.evaluation.evaluator import AgentEvaluator
from tracegrade.evaluation.offline import TraceGrader
from tracegrade.models import EvalSet
from tracegrade.models.config import EvalConfig
from tracegrade.models.results import EvalReport
from tracegrade.store import TraceStore

__all__ = ["grade_live_and_stored", "verdicts"]


def grade_live_and_stored(
    agent: Any, eval_set: EvalSet, config: EvalConfig, store_path: Path
) -> tuple[EvalReport, EvalReport]:
    """The live report and the offline report of the same run."""
    config = config.model_copy(deep=True)
    config.reporter.enabled = False
    exporter = InMemorySpanExporter()
    evaluator = AgentEvaluator(agent, config=config)
    evaluator.provider.add_span_processor(SimpleSpanProcessor(exporter))
    live = asyncio.run(evaluator.evaluate(eval_set))
    spans = [span_from_readable(s) for s in exporter.get_finished_spans()]
    with TraceStore(store_path) as store:
        store.write(spans)
        store.rebuild_trajectories({s.trace_id for s in spans})
        offline = asyncio.run(TraceGrader(store, config).grade_eval_set(eval_set, live.metadata["run_id"]))
    return live, offline


def verdicts(report: EvalReport, *detail_keys: str) -> dict[str, list[tuple[Any, ...]]]:
    """Per case: (criterion, score, passed, error, the named details) of every criterion result."""
    return {
        r.eval_id: [
            (c.criterion, c.score, c.passed, c.error, *((c.details or {}).get(k) for k in detail_keys))
            for c in r.criterion_results
        ]
        for r in report.results
    }
