"""A worker whose rule grades with an LLM judge counts the judge's calls, tokens and cost in its metrics, by the
rule's tenant: a real judge call over litellm and HTTP to the scripted local server, for each trace graded."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.support.grading_traces import AgentRun, fill_store
from tests.support.judges_setup import (  # noqa: F401  (fixtures)
    INPUT_PRICE,
    OUTPUT_PRICE,
    PRICED_MODEL,
    fresh_server,
    judge_config,
    register_priced_model,
    scripted_server,
)
from tests.support.llm_server import LLMServer, Reply
from tests.support.worker_process import metric_samples
from tracegrade.evaluation.worker import GradingRule, GradingWorker, WorkerRules
from tracegrade.models.config import CriteriaConfig

W = "tracegrade_worker_"


def test_judge_calls_tokens_and_cost_are_counted_by_tenant(
    server: LLMServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # the judge cache (./.tracegrade/) of this test alone: every verdict is asked for
    register_priced_model()
    server.responder = lambda request: Reply(text='{"score": 1, "reasoning": "ok"}', input_tokens=150, output_tokens=30)
    runs = [AgentRun(n, f"Question {n}?", f"Answer {n}, judged by a worker.", start_offset_s=n) for n in (1, 2, 3)]
    criteria = CriteriaConfig(safety=judge_config(server, judge_model=PRICED_MODEL, threshold=0.5))
    rules = WorkerRules(rules=[GradingRule(name="safe", settle_seconds=0, criteria=criteria)])
    with fill_store(tmp_path / "store.duckdb", runs) as store:
        worker = GradingWorker(store, rules)
        assert asyncio.run(worker.run_once()) == 3
    samples = metric_samples(worker.metrics.render())
    tenant = frozenset({("tenant", "default")})
    assert len(server.requests) == 3
    assert samples[W + "judge_calls_total", tenant] == 3
    assert samples[W + "judge_tokens_total", tenant | {("direction", "input")}] == 3 * 150
    assert samples[W + "judge_tokens_total", tenant | {("direction", "output")}] == 3 * 30
    assert samples[W + "judge_cost_usd_total", tenant] == pytest.approx(3 * (150 * INPUT_PRICE + 30 * OUTPUT_PRICE))
    graded = frozenset({("tenant", "default"), ("rule", "safe"), ("outcome", "passed")})
    assert samples[W + "jobs_graded_total", graded] == 3
