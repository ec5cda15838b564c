"""The online grading worker in-process: which traces become jobs, grading and recording them, retries;
on a DuckDB file store and on a lake (whose job queue is in its catalog's PostgreSQL database)."""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest

from tests.support import pg_cluster
from tests.support.grading_traces import AgentRun, fill_store
from tests.support.store_kinds import open_store, set_job_columns
from tests.support.waiting import wait_until
from tracegrade.evaluation import worker as worker_module
from tracegrade.evaluation.selection import in_sample
from tracegrade.evaluation.worker import FIRST_BATCH, GradingWorker, WorkerRules, next_batch_size
from tracegrade.timespec import utc_now

KEYWORDS = {"contains_keywords": {"keywords": ["refund"]}}
pg_server = pg_cluster.pg_server  # the session's PostgreSQL (a fixture), for the lake


def rules(**overrides: object) -> WorkerRules:
    rule = {"name": "billing", "where": "service_name = 'billing'", "settle_seconds": 0, "criteria": KEYWORDS}
    rule.update(overrides.pop("rule", {}))  # type: ignore[arg-type]
    return WorkerRules.model_validate({"rules": [rule], **overrides})


@pytest.fixture(params=["file", "lake"])
def store(request: pytest.FixtureRequest, tmp_path: Path):
    with fill_store(open_store(request.param, tmp_path, request), _agent_runs(10)) as opened:
        yield opened


def _agent_runs(count: int) -> list[AgentRun]:
    """Runs 1..count: the first 8 by the billing service (the rule's), the others by chat; odd ones say refund."""
    return [
        AgentRun(
            n,
            f"q{n}",
            "refund sent" if n % 2 else "no",
            [("lookup", {"n": n})],
            service="billing" if n <= 8 else "chat",
            start_offset_s=n,
        )
        for n in range(1, count + 1)
    ]


def _results_per_key(store) -> list[tuple]:
    return store.query(
        "SELECT run_id, eval_id, criterion, count(*) AS n FROM eval_results GROUP BY ALL HAVING n > 1"
    ).rows


def test_worker_grades_matching_settled_traces_and_records_each_job(store) -> None:
    worker = GradingWorker(store, rules(), worker_id="w1")
    assert worker.enqueue() == 8 and worker.enqueue() == 0  # the chat traces are not for this rule
    assert asyncio.run(worker.run_once()) == 8
    assert worker.job_counts() == {"done": 8}
    rows = store.query(
        "SELECT j.trace_id, r.score, t.final_response FROM grading_jobs j "
        "JOIN eval_results r ON r.run_id = j.run_id AND r.trace_id = j.trace_id "
        "JOIN traces t ON t.trace_id = j.trace_id ORDER BY j.trace_id"
    ).rows
    assert len(rows) == 8
    assert all(score == (1.0 if "refund" in response else 0.0) for _, score, response in rows)
    run_ids = [r[0] for r in store.query("SELECT run_id FROM grading_jobs ORDER BY job_id").rows]
    assert len(set(run_ids)) == 1 and run_ids[0].startswith("worker:billing:")  # one run for the window
    kinds = store.query("SELECT DISTINCT kind FROM eval_runs").rows
    assert kinds == [("worker",)]


def _graded(store) -> list[tuple]:
    return store.query(
        "SELECT j.job_id, j.status, j.run_id, r.eval_id, r.trace_id, r.criterion, r.score, "
        "c.result->'metadata'->>'job_id' FROM grading_jobs j "
        "JOIN eval_results r ON r.run_id = j.run_id AND r.trace_id = j.trace_id "
        "JOIN eval_run_cases c ON c.run_id = r.run_id AND c.eval_id = r.eval_id ORDER BY j.job_id"
    ).rows


def test_a_batch_graded_together_records_what_its_jobs_graded_one_by_one_record(tmp_path: Path) -> None:
    with fill_store(tmp_path / "together.duckdb", _agent_runs(8)) as together:
        worker = GradingWorker(together, rules(), worker_id="w1")
        worker.enqueue()
        assert asyncio.run(worker.run_once()) == 8  # one claim: the 8 jobs of one rule and window, as one group
        batched = _graded(together)
    with fill_store(tmp_path / "alone.duckdb", _agent_runs(8)) as alone:
        worker = GradingWorker(alone, rules(), worker_id="w1")
        worker.enqueue()
        for job in worker.claim():
            asyncio.run(worker.run_job(job))
        assert _graded(alone) == batched
    assert len(batched) == 8 and {row[1] for row in batched} == {"done"}
    assert all(row[7] == row[0] for row in batched)  # each case names its own job


def test_a_job_whose_stored_trace_is_damaged_fails_alone_and_its_batch_is_graded(tmp_path: Path) -> None:
    damaged = f"{3:032x}"
    with fill_store(tmp_path / "store.duckdb", _agent_runs(8)) as store:
        # the stored execution of one trace no longer reads (a damaged blob), so loading it raises
        store.execute_write("UPDATE traces SET lean_execution = ? WHERE trace_id = ?", [b"\x10\0\0\0junk", damaged])
        worker = GradingWorker(store, rules(max_attempts=1), worker_id="w1")
        worker.enqueue()
        assert asyncio.run(worker.run_once()) == 8
        jobs = {row[0]: row[1:] for row in store.query("SELECT trace_id, status, error FROM grading_jobs").rows}
        status, error = jobs.pop(damaged)
        assert status == "failed" and error  # with what went wrong
        assert {status for status, _ in jobs.values()} == {"done"}
        graded = [row[0] for row in store.query("SELECT trace_id FROM eval_results ORDER BY trace_id").rows]
        assert graded == sorted(jobs)  # every other trace once, none for the damaged one


def test_a_retried_job_never_duplicates_results(store) -> None:
    worker = GradingWorker(store, rules(), worker_id="w1")
    worker.enqueue()
    jobs = worker.claim()
    for job in jobs:
        asyncio.run(worker.run_job(job))
    before = store.query("SELECT count(*) FROM eval_results").rows[0][0]
    # the same jobs graded again (a worker that lost its lease and a new owner both finishing)
    other = GradingWorker(store, rules(), worker_id="w2")
    for job in jobs:
        asyncio.run(other.run_job(job))
    assert store.query("SELECT count(*) FROM eval_results").rows[0][0] == before == 8
    assert _results_per_key(store) == []


def test_rule_where_may_name_any_traces_column_and_sampling_is_by_trace_id(store) -> None:
    worker = GradingWorker(store, rules(rule={"where": "status = 'UNSET' AND tool_calls = 1", "sample": 0.5}))
    worker.enqueue()
    queued = {r[0] for r in store.query("SELECT trace_id FROM grading_jobs").rows}
    assert queued == {f"{n:032x}" for n in range(1, 11) if in_sample(f"{n:032x}", 0.5)}


def test_unsettled_traces_wait(store) -> None:
    worker = GradingWorker(store, rules(rule={"settle_seconds": 3600}))
    assert worker.enqueue() == 0


def test_a_job_whose_lease_expired_too_often_fails(store) -> None:
    worker = GradingWorker(store, rules(max_attempts=1, batch_size=1), worker_id="dead")
    worker.enqueue()
    (job,) = worker.claim()
    past = utc_now() - timedelta(seconds=1)
    set_job_columns(store, job.job_id, lease_expires=past)
    survivor = GradingWorker(store, rules(max_attempts=1, batch_size=1), worker_id="next")
    assert survivor.claim()[0].job_id != job.job_id
    status, error = store.query("SELECT status, error FROM grading_jobs WHERE job_id = ?", [job.job_id]).rows[0]
    assert status == "failed" and "stopped 1 time(s) without finishing" in error


def test_a_worker_looks_for_settled_traces_once_per_poll_interval(store) -> None:
    slow = GradingWorker(store, rules(poll_seconds=3600), worker_id="slow")
    assert asyncio.run(slow.run_once()) == 8  # its first cycle looks
    fill_store(store, [AgentRun(n, f"q{n}", "refund sent", [], service="billing") for n in (11, 12)])
    assert asyncio.run(slow.run_once()) == 0  # it looked less than an hour ago: the new traces wait
    eager = GradingWorker(store, rules(poll_seconds=1e-6), worker_id="eager")
    assert asyncio.run(eager.run_once()) == 2
    assert asyncio.run(eager.run_once()) == 0 and eager.job_counts() == {"done": 10}


def test_a_look_reads_the_traces_updated_since_the_last_one_and_now_and_then_all(store, monkeypatch) -> None:
    worker = GradingWorker(store, rules(), worker_id="w1")
    assert worker.enqueue() == 8  # the first look reads every trace
    late, fresh = f"{11:032x}", f"{12:032x}"
    fill_store(store, [AgentRun(n, f"q{n}", "refund sent", [], service="billing") for n in (11, 12)])
    # trace 11 became visible only now, stamped long before the last look (a commit that took that long)
    table = "traces" if isinstance(store.path, Path) else "raw.traces"  # a lake's traces view reads raw.traces
    store.execute_write(f"UPDATE {table} SET updated_at = ? WHERE trace_id = ?", [utc_now() - timedelta(hours=1), late])
    assert worker.enqueue() == 1  # trace 12 only: trace 11 is older than the window this look reads
    assert _queued(store) == {f"{n:032x}" for n in range(1, 9)} | {fresh}
    monkeypatch.setattr(worker_module, "FULL_LOOK_SECONDS", 0.0)  # the next look is a full one
    assert worker.enqueue() == 1 and late in _queued(store)


def _queued(store) -> set[str]:
    return {row[0] for row in store.query("SELECT trace_id FROM grading_jobs").rows}


def test_a_live_worker_keeps_the_leases_of_a_batch_that_outlasts_them(store, tmp_path: Path) -> None:
    markers, release = tmp_path / "markers", tmp_path / "release"
    markers.mkdir()
    slow_criterion = {"seconds": 60, "marker_dir": str(markers), "release": str(release)}
    settings = rules(
        lease_seconds=1.5,
        batch_size=1,
        plugins=["tests.support.grading_slow_criterion"],
        rule={"extra_criteria": [{"name": "slow_answered", "config": {"metadata": slow_criterion}}]},
    )
    slow = GradingWorker(store, settings, worker_id="slow")
    slow.enqueue()
    grading = threading.Thread(target=lambda: asyncio.run(slow.run_once()))
    grading.start()
    try:
        wait_until(lambda: any(markers.iterdir()), "the slow job to start")
        (held,) = store.query("SELECT job_id FROM grading_jobs WHERE owner = 'slow'").rows
        time.sleep(3 * 1.5)  # three leases' time: a lease that was not renewed has run out by now
        taken = GradingWorker(store, settings, worker_id="other").claim()
        assert [job.job_id for job in taken] != [held[0]]  # the oldest job, were its lease not renewed
    finally:
        release.touch()
        grading.join(60)
    status = store.query("SELECT status, owner, attempts FROM grading_jobs WHERE job_id = ?", [held[0]]).rows
    assert status == [("done", None, 1)]  # finished by the worker that kept it, on its first attempt


def test_finishing_many_jobs_touches_only_those_whose_lease_is_still_held(store) -> None:
    first = GradingWorker(store, rules(batch_size=3), worker_id="first")
    first.enqueue()
    held = first.claim()
    assert [job.attempts for job in held] == [1, 1, 1]
    set_job_columns(store, held[0].job_id, lease_expires=utc_now() - timedelta(seconds=1))
    second = GradingWorker(store, rules(batch_size=1), worker_id="second")
    assert [job.job_id for job in second.claim()] == [held[0].job_id]
    first.jobs.finish([job.job_id for job in held], "first", "done", "run-1", None)
    rows = store.query(
        "SELECT job_id, status, owner, run_id FROM grading_jobs WHERE job_id IN (?, ?, ?) ORDER BY job_id",
        [job.job_id for job in held],
    ).rows
    assert sorted(rows) == sorted(
        [(held[0].job_id, "leased", "second", None)] + [(job.job_id, "done", None, "run-1") for job in held[1:]]
    )


@pytest.mark.parametrize(
    ("seconds_per_job", "lease", "batch_size", "claimed"),
    [
        (None, 60, 200, FIRST_BATCH),  # the pace unknown yet: a small first claim
        (None, 60, 3, 3),
        (0.001, 60, 200, 200),  # quick jobs: as many as allowed
        (1.0, 60, 200, 15),  # a quarter of the lease's worth
        (100.0, 60, 200, 1),  # slower than the lease itself: one at a time
        (0.0, 60, 200, 200),
    ],
)
def test_a_claim_takes_what_a_quarter_of_the_lease_grades_at_the_last_batch_s_pace(
    seconds_per_job: float | None, lease: float, batch_size: int, claimed: int
) -> None:
    assert next_batch_size(seconds_per_job, lease, batch_size) == claimed


def test_claims_grow_while_jobs_are_quick_and_shrink_when_they_are_slow(tmp_path: Path) -> None:
    runs = [AgentRun(n, f"q{n}", "refund sent", [], service="billing") for n in range(1, 41)]
    with fill_store(tmp_path / "store.duckdb", runs) as store:
        quick = GradingWorker(store, rules(batch_size=25), worker_id="quick")
        quick.enqueue()
        # after its first claim, a quick job takes far less than the lease's quarter (15 s) over 25
        assert [asyncio.run(quick.run_once()) for _ in range(3)] == [FIRST_BATCH, 25, 5]
        store.execute_write("UPDATE grading_jobs SET status = 'pending', owner = NULL")
        slow_rule = {
            "extra_criteria": [{"name": "slow_answered", "config": {"metadata": {"seconds": 0.1}}}],
        }
        slow = GradingWorker(
            store,
            rules(batch_size=50, lease_seconds=2, plugins=["tests.support.grading_slow_criterion"], rule=slow_rule),
            worker_id="slow",
        )
        # 10 jobs of 0.1 s or more: then no more than the lease's quarter (0.5 s) holds
        assert asyncio.run(slow.run_once()) == FIRST_BATCH
        assert 1 <= asyncio.run(slow.run_once()) <= 5
        assert _results_per_key(store) == []


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"rule": {"criteria": {"trajectory": {}}}}, "every criterion (tool_trajectory_avg_score) needs an eval case"),
        ({"rule": {"criteria": {}}}, "enables no criterion"),
        ({"rule": {"extra_criteria": [{"name": "no_such"}]}}, "unknown criterion 'no_such'"),
        ({"plugins": ["tests.support.no_such_plugin"]}, "cannot import 'tests.support.no_such_plugin'"),
    ],
)
def test_rules_that_could_only_fail_are_refused_at_start(store, bad: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", "\\(").replace(")", "\\)")):
        GradingWorker(store, rules(**bad))
