"""A worker killed mid-job (SIGKILL): after its lease expires another worker finishes the job, and the
results are recorded exactly once."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.grading_slow_criterion import write_slow_rules
from tests.support.grading_traces import AgentRun, fill_store
from tests.support.waiting import wait_until
from tracegrade.store import TraceStore
from tracegrade.timespec import utc_now

REPO = Path(__file__).resolve().parent.parent
LAUNCH = "from tracegrade.cli.main import main; main()"


def start_worker(rules: Path, store: Path, *extra: str) -> subprocess.Popen[bytes]:
    args = [sys.executable, "-c", LAUNCH, "worker", "--rules", str(rules), "--store", str(store), *extra]
    return subprocess.Popen(args, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def test_killed_worker_job_is_finished_by_the_next_worker_without_duplicates(tmp_path: Path) -> None:
    store_path = tmp_path / "store.duckdb"
    runs = [AgentRun(n, f"q{n}", "refund sent", [("lookup", {"n": n})], start_offset_s=n) for n in (1, 2, 3)]
    fill_store(store_path, runs).close()
    markers = tmp_path / "markers"
    markers.mkdir()

    # worker 1 takes every job and is killed while its first job is being graded (the criterion is slow)
    first = start_worker(write_slow_rules(tmp_path / "rules.yaml", markers, seconds=60), store_path)
    try:
        wait_until(lambda: any(markers.iterdir()) or first.poll() is not None, "the first job to start", 120)
        assert first.poll() is None, first.stdout.read().decode()  # type: ignore[union-attr]
    finally:
        first.kill()
        first.wait(30)
    (in_flight,) = [m.name.removesuffix(".started") for m in markers.iterdir()]

    with TraceStore(store_path, read_only=True) as store:
        jobs = store.query("SELECT job_id, status, attempts, owner, lease_expires FROM grading_jobs").rows
        assert len(jobs) == 3 and {(j[1], j[2]) for j in jobs} == {("leased", 1)}
        assert store.query("SELECT count(*) FROM eval_runs").rows[0][0] == 0
        lease_expires = max(j[4] for j in jobs)
    wait_until(lambda: utc_now() > lease_expires, "the lease to expire")

    # worker 2 (quick now) takes the expired leases over and finishes every job
    second = start_worker(write_slow_rules(tmp_path / "rules.yaml", markers, seconds=0), store_path, "--once")
    output = second.communicate(timeout=120)[0].decode()
    assert second.returncode == 0, output

    with TraceStore(store_path, read_only=True) as store:
        jobs = store.query("SELECT job_id, trace_id, status, attempts, run_id FROM grading_jobs ORDER BY job_id").rows
        assert {(j[2], j[3]) for j in jobs} == {("done", 2)}
        assert f"answered:{in_flight}" in {j[0] for j in jobs}
        per_job = store.query(
            "SELECT j.job_id, count(DISTINCT r.run_id), count(*) FROM grading_jobs j "
            "JOIN eval_results r ON r.run_id = j.run_id AND r.trace_id = j.trace_id GROUP BY j.job_id"
        ).rows
        # each job is one case of its rule's run for the window, graded once: two criteria each
        assert sorted(per_job) == [(j[0], 1, 2) for j in jobs]
        duplicates = store.query(
            "SELECT run_id, eval_id, criterion, count(*) FROM eval_results GROUP BY ALL HAVING count(*) > 1"
        ).rows
        assert duplicates == []
        # one run for the rule's window holds the three jobs as its cases
        assert store.query("SELECT count(*), max(total_cases) FROM eval_runs").rows[0] == (1, 3)
        scores = store.query("SELECT criterion, min(score) FROM eval_results GROUP BY ALL ORDER BY ALL").rows
        assert scores == [("contains_keywords", 1.0), ("slow_answered", 1.0)]
