"""Evaluation-run traffic (turns stamped with ``tracegrade.run.id``) kept apart from production traffic:
online grading rules skip it unless they opt in, and ``tracegrade traces --no-eval-traffic`` leaves it out."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support.grading_traces import AgentRun, fill_store
from tracegrade.cli.main import cli
from tracegrade.evaluation.worker import GradingWorker, WorkerRules

PRODUCTION = [AgentRun(n, f"production {n}", "refund sent", start_offset_s=n) for n in range(1, 5)]
EVALUATION = [
    AgentRun(n, f"eval {n}", "refund sent", case_id=f"case-{n}", run_id="ci-run-7", start_offset_s=n)
    for n in range(5, 8)
]


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    path = tmp_path / "store.duckdb"
    fill_store(path, PRODUCTION + EVALUATION).close()
    return path


def worker_rules(**rule: object) -> WorkerRules:
    base = {"name": "refunds", "settle_seconds": 0, "criteria": {"contains_keywords": {"keywords": ["refund"]}}}
    return WorkerRules.model_validate({"rules": [{**base, **rule}]})


def test_the_stored_evaluation_traces_carry_their_run_id(store_path: Path) -> None:
    from tracegrade.store import TraceStore

    with TraceStore(store_path) as store:
        rows = store.query("SELECT run_id, count(*) FROM traces GROUP BY ALL ORDER BY 1 NULLS FIRST").rows
    assert rows == [(None, len(PRODUCTION)), ("ci-run-7", len(EVALUATION))]


@pytest.mark.parametrize(
    ("opt_in", "graded"), [({}, PRODUCTION), ({"include_eval_runs": True}, PRODUCTION + EVALUATION)]
)
def test_online_rules_skip_evaluation_runs_unless_they_opt_in(store_path: Path, opt_in, graded) -> None:
    from tracegrade.store import TraceStore

    with TraceStore(store_path) as store:
        worker = GradingWorker(store, worker_rules(**opt_in), worker_id="w1")
        assert worker.enqueue() == len(graded)
        assert asyncio.run(worker.run_once()) == len(graded)
        jobs = {r[0] for r in store.query("SELECT trace_id FROM grading_jobs").rows}
    assert jobs == {run.trace_id for run in graded}


def test_traces_can_leave_evaluation_traffic_out(store_path: Path) -> None:
    def listed(*flags: str) -> set[str]:
        result = CliRunner().invoke(cli, ["traces", "--store", str(store_path), "--format", "json", *flags])
        assert result.exit_code == 0, result.output
        return {row["trace_id"] for row in json.loads(result.stdout)}

    everything = {run.trace_id for run in PRODUCTION + EVALUATION}
    assert listed() == everything == listed("--eval-traffic")
    assert listed("--no-eval-traffic") == {run.trace_id for run in PRODUCTION}
