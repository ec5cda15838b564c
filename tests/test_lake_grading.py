"""Recorded runs and the grading job queue on a lake (real PostgreSQL catalog): what several machines recording
at once leave visible (each key once, a case's newest results, a case-by-case run's true counts), and how the
queue in the catalog database hands each job to one worker and takes expired leases over."""

from __future__ import annotations

import threading
from datetime import timedelta
from pathlib import Path

import pytest

from tests.support import pg_cluster
from tests.support.grading_traces import AgentRun, fill_store
from tests.support.lake_serve import store_copies_again
from tests.support.large_reports import large_report
from tests.support.pg_cluster import PgServer
from tests.support.store_kinds import set_job_columns
from tracegrade.evaluation.run_records import _columns, list_runs, load_run, record_cases, record_report
from tracegrade.evaluation.worker import GradingWorker, WorkerRules
from tracegrade.models.results import CriterionResult, EvalCaseResult, EvalReport
from tracegrade.store.grading_tables import RECORD_KEYS
from tracegrade.store.lake import LakeStore
from tracegrade.store.tenancy import with_tenant
from tracegrade.timespec import utc_now

pg_server = pg_cluster.pg_server  # the session's PostgreSQL (a fixture)


@pytest.fixture
def lake(pg_server: PgServer, tmp_path: Path) -> tuple[str, Path]:
    return f"ducklake:postgres:{pg_server.new_database()}", tmp_path / "lake-data"


def _visible_and_stored(store: LakeStore, table: str) -> tuple[int, int, int]:
    """Rows of ``table`` as queried, its distinct keys, and the copies stored in ``raw``."""
    key = ", ".join(RECORD_KEYS[table])
    visible, keys = store.query(f"SELECT count(*), count(DISTINCT ({key})) FROM {table}").rows[0]
    return visible, keys, store.query(f"SELECT count(*) FROM raw.{table}").rows[0][0]


def test_a_run_recorded_on_two_machines_and_stored_twice_is_visible_once(lake: tuple[str, Path]) -> None:
    location, data = lake
    report = large_report(30)
    with LakeStore(location, data_path=data) as first, LakeStore(location, data_path=data) as second:
        record_report(first, report, "eval_set", "run-x")
        record_report(second, report, "eval_set", "run-x")  # the same run recorded again, elsewhere
        for table in ("eval_results", "eval_case_results", "eval_runs"):
            store_copies_again(location, table, "true")  # and every row written twice by one commit
        for table in ("eval_results", "eval_case_results", "eval_runs"):
            visible, keys, stored = _visible_and_stored(second, table)
            assert visible == keys and stored == 4 * visible, table
        assert _visible_and_stored(first, "eval_case_results")[0] == 30
        loaded = load_run(first, "run-x")
        assert loaded.model_dump(exclude={"timestamp"}) == report.model_dump(exclude={"timestamp"})
        assert [(r.run_id, r.total_cases) for r in list_runs(second)] == [("run-x", 30)]


def _one_case(eval_id: str, passed: bool, *criteria: str) -> EvalReport:
    case = EvalCaseResult.success(
        eval_id, [CriterionResult.success(name, 1.0 if passed else 0.0, 0.5) for name in criteria]
    )
    return EvalReport.create("online", [case])


def test_a_case_graded_again_elsewhere_shows_only_its_newest_results(lake: tuple[str, Path]) -> None:
    location, data = lake
    with LakeStore(location, data_path=data) as first, LakeStore(location, data_path=data) as second:
        record_cases(first, _one_case("a", True, "keywords", "safety"), "worker", "w-run", {})
        record_cases(second, _one_case("a", False, "keywords"), "worker", "w-run", {})  # a later grading, one fewer
        assert first.query("SELECT eval_id, criterion, score FROM eval_results").rows == [("a", "keywords", 0.0)]
        assert first.query("SELECT count(*) FROM raw.eval_results").rows == [(3,)]
        assert [c.passed for c in load_run(first, "w-run").results] == [False]


def test_a_run_recorded_case_by_case_on_two_machines_counts_every_case(lake: tuple[str, Path]) -> None:
    location, data = lake
    with LakeStore(location, data_path=data) as first, LakeStore(location, data_path=data) as second:
        record_cases(first, _one_case("a", True, "keywords"), "worker", "w-run", {"rule": "r"})
        record_cases(second, _one_case("b", False, "keywords"), "worker", "w-run", {"rule": "r"})
        # two workers recording at once each count the cases they see: the one that commits last may not
        # have seen the other's, and its row is the newest
        stale = [["w-run", utc_now(), "worker", "online", "", 1, 1, 0, 0, 1.0, "{}", '{"rule": "r"}', None, None]]
        first.write_records(
            {"eval_runs": with_tenant(_columns("eval_runs", [[value] for value in stale[0]]), "default")}
        )
        (run,) = list_runs(second)
        assert (run.total_cases, run.passed_cases, run.failed_cases, run.error_cases) == (2, 1, 1, 0)
        assert run.pass_rate == pytest.approx(0.5)
        assert load_run(second, "w-run").summary.total_cases == 2


def _rules(**settings: object) -> WorkerRules:
    rule = {"name": "billing", "settle_seconds": 0, "criteria": {"contains_keywords": {"keywords": ["refund"]}}}
    return WorkerRules.model_validate({"rules": [rule], **settings})


def test_workers_on_two_machines_claim_each_job_once_and_take_expired_leases_over(lake: tuple[str, Path]) -> None:
    location, data = lake
    runs = [AgentRun(n, f"q{n}", "refund sent", [], service="billing", start_offset_s=n) for n in range(1, 41)]
    fill_store(LakeStore(location, data_path=data), runs).close()
    with LakeStore(location, data_path=data) as first, LakeStore(location, data_path=data) as second:
        one = GradingWorker(first, _rules(batch_size=3), worker_id="one")
        two = GradingWorker(second, _rules(batch_size=3), worker_id="two")
        assert (one.enqueue(), two.enqueue(), two.enqueue()) == (40, 0, 0)  # each (rule, trace) queued once

        claimed: dict[str, list[str]] = {"one": [], "two": []}
        both_started = threading.Barrier(2, timeout=60)  # else one thread may drain the queue before the other runs

        def claim_all(worker: GradingWorker) -> None:
            jobs = worker.claim()
            both_started.wait()
            while jobs:
                claimed[worker.worker_id].extend(job.job_id for job in jobs)
                jobs = worker.claim()

        racing = [threading.Thread(target=claim_all, args=(w,)) for w in (one, two)]
        for thread in racing:
            thread.start()
        for thread in racing:
            thread.join(120)
        assert not set(claimed["one"]) & set(claimed["two"])
        assert len(claimed["one"]) + len(claimed["two"]) == 40
        assert claimed["one"] and claimed["two"]

        # "one" stops: its leases run out (moved back in PostgreSQL), and "two" takes its jobs over
        for job_id in claimed["one"]:
            set_job_columns(first, job_id, lease_expires=utc_now() - timedelta(seconds=1))
        taken = [job.job_id for job in two.claim()]
        assert taken == sorted(claimed["one"])[:3]  # the oldest first (added together: then by job id)
        one.jobs.finish([taken[0]], "one", "done", None, None)  # too late: the lease is no longer its own
        assert first.query("SELECT owner, attempts FROM grading_jobs WHERE job_id = ?", [taken[0]]).rows == [("two", 2)]
