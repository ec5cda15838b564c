"""A grading worker started again under the id of one that held leases hands those jobs back at its first cycle,
pending with their attempt given back, and grades them at once: on a store file as on a lake, for a store opened
again under a running worker (``use_store``) and for ``tracegrade worker --worker-id`` restarted.

Before, such jobs stayed leased until their lease ran out (``lease_seconds``, 60 s by default) and each stop
spent one of their ``max_attempts``: three store failures failed a job for good without it ever being graded.
A receiver's in-process worker, whose store fails and is opened again, is tested in
tests/test_worker_identity_outage.py.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
import yaml

from tests.support import pg_cluster
from tests.support.store_kinds import STORE_KINDS, location, open_store
from tests.support.store_records import make_span, trace_hex
from tests.support.worker_process import LAUNCH, REPO
from tracegrade.evaluation.worker import GradingWorker, WorkerRules
from tracegrade.store import TraceStore
from tracegrade.store.backend import open_store as reopen_store

pg_server = pg_cluster.pg_server  # the session's PostgreSQL (a fixture), for the lake runs

TRACES = [1, 2, 3]
LEASE = timedelta(hours=1)  # never runs out while a test runs: a job graded again was handed back
RULES = {
    "lease_seconds": LEASE.total_seconds(),
    "rules": [{"name": "answers", "settle_seconds": 0, "criteria": {"contains_keywords": {"keywords": ["refund"]}}}],
}


@pytest.fixture
def store(store_kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[TraceStore]:
    with open_store(store_kind, tmp_path, request) as opened:
        _write_traces(opened)
        yield opened


def _write_traces(store: TraceStore) -> None:
    attributes = {"gen_ai.operation.name": "invoke_agent", "output.value": "refund sent"}
    store.write([make_span(trace, trace * 10, name="agent", attributes=attributes) for trace in TRACES])
    store.rebuild_trajectories([trace_hex(trace) for trace in TRACES])


def _jobs(store: TraceStore) -> list[tuple[str, str | None, int]]:
    """(status, owner, attempts) of every job, in job order."""
    return [tuple(row) for row in store.query("SELECT status, owner, attempts FROM grading_jobs ORDER BY job_id").rows]


@STORE_KINDS
def test_release_held_hands_back_every_lease_of_its_owner_and_no_other(store: TraceStore) -> None:
    queue = store.job_queue()
    assert queue.enqueue("answers", ["true"], []) == len(TRACES)
    mine = queue.claim("mine", 2, LEASE, 3)
    (theirs,) = queue.claim("theirs", 5, LEASE, 3)
    assert [job.attempts for job in [*mine, theirs]] == [1, 1, 1]
    assert queue.release_held("mine", "handed back: the store failed") == 2
    assert _jobs(store) == [("pending", None, 0), ("pending", None, 0), ("leased", "theirs", 1)]
    errors = store.query("SELECT error FROM grading_jobs WHERE status = 'pending'").rows
    assert errors == [("handed back: the store failed",)] * 2
    assert queue.release_held("mine", "nothing left") == 0
    again = queue.claim("mine", 5, LEASE, 3)
    assert sorted(job.job_id for job in again) == sorted(job.job_id for job in mine)
    assert [job.attempts for job in again] == [1, 1]  # the attempts the store's failure took were given back


@STORE_KINDS
def test_a_worker_on_its_store_opened_again_grades_the_jobs_it_held_at_once(store: TraceStore) -> None:
    rules = WorkerRules.model_validate(RULES)
    worker = GradingWorker(store, rules, worker_id="w")
    assert worker.enqueue() == len(TRACES)
    assert len(worker.claim()) == len(TRACES)  # then the store fails: the results are lost, the leases left
    store.close()
    with reopen_store(location(store), data_path=getattr(store, "data_path", None)) as reopened:
        worker.use_store(reopened)
        assert asyncio.run(worker.run_once()) == len(TRACES)
        assert _jobs(reopened) == [("done", None, 1)] * len(TRACES)


def _worker_once(rules: Path, store: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """A ``tracegrade worker --once`` process on ``store``, run to its end."""
    command = ["worker", "--rules", str(rules), "--store", str(store), "--once", *extra]
    return subprocess.run(
        [sys.executable, "-c", LAUNCH, *command], cwd=REPO, capture_output=True, text=True, timeout=300
    )


def test_tracegrade_worker_restarted_with_its_worker_id_grades_the_jobs_it_held_at_once(tmp_path: Path) -> None:
    rules_path = tmp_path / "rules.yaml"
    rules_path.write_text(yaml.safe_dump(RULES), encoding="utf-8")
    path = tmp_path / "store.duckdb"
    with TraceStore(path) as store:
        _write_traces(store)
        stopped = GradingWorker(store, WorkerRules.from_file(rules_path), worker_id="grader-1")
        stopped.enqueue()
        assert len(stopped.claim()) == len(TRACES)  # the process holding these leases stops here
    others = _worker_once(rules_path, path)  # another worker: the leases are not its own
    assert others.returncode == 0 and "ran 0 job(s)" in others.stdout, others.stdout + others.stderr
    restarted = _worker_once(rules_path, path, "--worker-id", "grader-1")
    assert restarted.returncode == 0, restarted.stdout + restarted.stderr
    assert f"ran {len(TRACES)} job(s)" in restarted.stdout, restarted.stdout + restarted.stderr
    with TraceStore(path, read_only=True) as reader:
        assert _jobs(reader) == [("done", None, 1)] * len(TRACES)
