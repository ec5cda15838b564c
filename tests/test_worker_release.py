"""A job handed back (``JobQueue.release``: the store was out of reach while it was graded) is pending again with
its attempt given back, on a store file as on a lake (tests/test_lake_worker_outage.py); only its lease holder
can hand it back."""

from __future__ import annotations

from pathlib import Path

from tests.support.store_records import make_span, trace_hex
from tracegrade.evaluation.worker import GradingWorker, WorkerRules
from tracegrade.store import TraceStore


def test_a_released_job_is_pending_again_with_its_attempt_given_back(tmp_path: Path) -> None:
    rules = WorkerRules.model_validate(
        {"rules": [{"name": "answers", "settle_seconds": 0, "criteria": {"contains_keywords": {"keywords": ["x"]}}}]}
    )
    with TraceStore(tmp_path / "store.duckdb") as store:
        store.write([make_span(1, 10, name="agent"), make_span(1, 11, parent=10)])
        store.rebuild_trajectories([trace_hex(1)])
        worker = GradingWorker(store, rules, worker_id="holder")
        assert worker.enqueue() == 1
        (job,) = worker.claim()
        assert job.attempts == 1
        store.job_queue().release([job.job_id], "someone-else", "not theirs to hand back")
        assert store.query("SELECT status, owner, attempts FROM grading_jobs").rows == [("leased", "holder", 1)]
        store.job_queue().release([job.job_id], "holder", "the store was out of reach: I/O error")
        rows = store.query("SELECT status, owner, lease_expires, attempts, error FROM grading_jobs").rows
        assert rows == [("pending", None, None, 0, "the store was out of reach: I/O error")]
        (again,) = worker.claim()
        assert (again.job_id, again.attempts) == (job.job_id, 1)
