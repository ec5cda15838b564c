"""The online worker groups its jobs into one run per rule and time window, each job a case inside it."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support import pg_cluster
from tests.support.grading_traces import AgentRun, fill_store
from tests.support.store_kinds import location, open_store, set_job_columns
from tracegrade.cli.main import cli
from tracegrade.evaluation.run_records import list_runs, load_run
from tracegrade.evaluation.worker import GradingWorker, WorkerRules

KEYWORDS = {"contains_keywords": {"keywords": ["refund"]}}
pg_server = pg_cluster.pg_server  # the session's PostgreSQL (a fixture), for the lake


def rules(*names: str, **settings: object) -> WorkerRules:
    rule_list = [
        {"name": n, "where": "service_name = 'billing'", "settle_seconds": 0, "criteria": KEYWORDS} for n in names
    ]
    return WorkerRules.model_validate({"rules": rule_list, **settings})


@pytest.fixture(params=["file", "lake"])
def store(request: pytest.FixtureRequest, tmp_path: Path):
    runs = [
        AgentRun(
            n, f"q{n}", "refund sent" if n % 2 else "no", [("lookup", {"n": n})], service="billing", start_offset_s=n
        )
        for n in range(1, 9)
    ]
    with fill_store(open_store(request.param, tmp_path, request), runs) as opened:
        yield opened


def count(store, sql: str) -> int:
    return int(store.query(sql).rows[0][0])


def test_one_run_per_rule_and_window_with_every_job_a_case(store) -> None:
    worker = GradingWorker(store, rules("billing", "audit"), worker_id="w1")
    assert worker.enqueue() == 16
    assert asyncio.run(worker.run_once()) + asyncio.run(worker.run_once()) == 16  # a first claim of 10, the rest
    runs = list_runs(store)
    assert len(runs) == 2 and {r.run_id.rsplit(":", 1)[0] for r in runs} == {"worker:billing", "worker:audit"}
    assert all(
        (r.kind, r.total_cases, r.passed_cases, r.failed_cases, r.error_cases) == ("worker", 8, 4, 4, 0) for r in runs
    )
    assert all(r.pass_rate == pytest.approx(0.5) for r in runs)
    # each job points at its rule's window run; the job's case there is keyed by its trace
    jobs = store.query("SELECT rule, run_id, trace_id FROM grading_jobs ORDER BY rule, trace_id").rows
    assert {(rule, run_id) for rule, run_id, _ in jobs} == {(r.run_id.split(":")[1], r.run_id) for r in runs}
    billing = next(r for r in runs if r.run_id.startswith("worker:billing:"))
    report = load_run(store, billing.run_id)
    assert [c.eval_id for c in report.results] == [f"trace-{n:032x}" for n in range(1, 9)]
    assert {c.metadata["job_id"] for c in report.results} == {f"billing:{n:032x}" for n in range(1, 9)}
    assert report.summary.total_cases == 8 and report.summary.passed_cases == 4
    assert report.metadata["rule"] == "billing" and report.metadata["window_start"] < report.metadata["window_end"]


def test_jobs_enqueued_in_another_window_go_to_another_run(store) -> None:
    worker = GradingWorker(store, rules("billing", run_window_minutes=10), worker_id="w1")
    worker.enqueue()
    # three jobs were enqueued an hour earlier (the test moves their enqueue time back)
    earlier = store.query(
        "SELECT job_id, created_at FROM grading_jobs WHERE trace_id IN (?, ?, ?)", [f"{n:032x}" for n in (1, 2, 3)]
    ).rows
    for job_id, created_at in earlier:
        set_job_columns(store, job_id, created_at=created_at - timedelta(hours=1))
    asyncio.run(worker.run_once())
    sizes = sorted((r.total_cases, r.run_id) for r in list_runs(store))
    assert [n for n, _ in sizes] == [3, 5]
    earlier, later = sorted(run_id for _, run_id in sizes)
    assert earlier < later  # the window start in the id sorts by time


def test_a_retried_job_replaces_its_case_and_counts_stay_right(store) -> None:
    worker = GradingWorker(store, rules("billing"), worker_id="w1")
    worker.enqueue()
    jobs = worker.claim()
    for job in jobs:
        asyncio.run(worker.run_job(job))
    other = GradingWorker(store, rules("billing"), worker_id="w2")  # a worker that took over the leases
    for job in jobs[:3]:
        asyncio.run(other.run_job(job))
    (run,) = list_runs(store)
    assert (run.total_cases, run.passed_cases) == (8, 4)
    for table in ("eval_results", "eval_case_results", "eval_run_cases"):
        assert count(store, f"SELECT count(*) FROM {table}") == 8, table
    assert {c.metadata["worker"] for c in load_run(store, run.run_id).results} == {"w1", "w2"}


def test_tracegrade_runs_lists_a_row_per_window_and_diff_reads_it(store, tmp_path) -> None:
    worker = GradingWorker(store, rules("billing"), worker_id="w1")
    worker.enqueue()
    asyncio.run(worker.run_once())
    store.close()
    path = location(store)
    listed = CliRunner().invoke(cli, ["runs", "--store", path, "--format", "json"], catch_exceptions=False)
    assert listed.exit_code == 0
    (row,) = json.loads(listed.stdout)
    assert row["run_id"].startswith("worker:billing:") and row["total_cases"] == 8
    table = CliRunner().invoke(cli, ["runs", "--store", path], catch_exceptions=False, terminal_width=120)
    assert table.exit_code == 0 and table.stdout.count("worker:billing:") == 1
    compared = CliRunner().invoke(cli, ["diff", "--store", path, row["run_id"], row["run_id"]], catch_exceptions=False)
    assert compared.exit_code == 0, compared.output
