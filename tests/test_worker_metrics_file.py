"""`tracegrade worker --metrics-address`: a real worker process on a DuckDB file serves /metrics whose counters
move as it grades, and /healthz, which fails while a criterion holds its event loop past the stall limit (the
server runs on a thread of its own, so it still answers); a bad address or a port in use stops it at start
(exit 2). Before, the worker served nothing: a stalled worker looked the same as an idle one."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import yaml

from tests.support.grading_slow_criterion import write_slow_rules
from tests.support.grading_traces import AgentRun, fill_store
from tests.support.waiting import wait_for_value, wait_until
from tests.support.worker_process import LAUNCH, REPO, WorkerProcess, metric_samples, take_over_after_the_lease
from tracegrade.evaluation.worker_metrics import stall_seconds
from tracegrade.store import TraceStore

W = "tracegrade_worker_"
RULE = {"tenant": "default", "rule": "answered"}


def _store(tmp_path: Path, replies: list[str]) -> Path:
    path = tmp_path / "store.duckdb"
    runs = [AgentRun(n, f"q{n}", reply, [("lookup", {"n": n})], start_offset_s=n) for n, reply in enumerate(replies, 1)]
    fill_store(path, runs).close()
    return path


def _rules(path: Path, **settings: object) -> Path:
    rules = {
        "poll_seconds": 0.2,
        "rules": [
            {"name": "answered", "settle_seconds": 0, "criteria": {"contains_keywords": {"keywords": ["refund"]}}}
        ],
        **settings,
    }
    path.write_text(yaml.safe_dump(rules), encoding="utf-8")
    return path


def test_the_counters_move_as_a_real_worker_grades(tmp_path: Path) -> None:
    store = _store(tmp_path, ["refund sent", "no idea", "refund sent"])
    with WorkerProcess(_rules(tmp_path / "rules.yaml"), store, tmp_path / "worker.log") as worker:
        wait_for_value(
            lambda: sum(worker.metric(W + "jobs_graded_total", **RULE, outcome=o) for o in ("passed", "failed")),
            3.0,
            "jobs graded",
            timeout=120,
        )
        # the cycle's end (its duration, then the backlog read after it) comes after its jobs are counted graded
        backlog = (W + "backlog_jobs", frozenset({"tenant": "default", "status": "pending"}.items()))
        wait_until(lambda: backlog in metric_samples(worker.metrics_text()), "the backlog read after the cycle", 120)
        samples = metric_samples(worker.metrics_text())

        def value(name: str, **labels: str) -> float:
            return samples[W + name, frozenset(labels.items())]

        assert value("jobs_enqueued_total", **RULE) == 3
        assert value("jobs_claimed_total", **RULE) == 3
        assert value("jobs_graded_total", **RULE, outcome="passed") == 2
        assert value("jobs_graded_total", **RULE, outcome="failed") == 1
        assert value("jobs_graded_total", **RULE, outcome="error") == 0
        assert value("leases_lost_total", **RULE) == 0
        assert value("judge_calls_total", tenant="default") == 0
        assert value("cycle_duration_seconds_count") >= 1
        assert value("cycle_failures_total") == 0
        assert value("store_reachable") == 1
        assert value("stall_seconds") == stall_seconds(0.2, 60.0)
        # the backlog, read after the first cycle, which graded every job
        assert value("backlog_jobs", tenant="default", status="pending") == 0
        status, health = worker.health()
        assert status == 200 and health["status"] == "ok", health
        assert worker.stop() == 0, worker.output()


def test_healthz_fails_while_a_criterion_holds_the_worker_past_the_stall_limit(tmp_path: Path) -> None:
    store = _store(tmp_path, ["refund sent"] * 2)
    markers, release = tmp_path / "markers", tmp_path / "release"
    markers.mkdir()
    # lease 2 s: stalled after 4 s without a completed cycle; the criterion holds the event loop until released
    rules = write_slow_rules(tmp_path / "rules.yaml", markers, seconds=300, lease_seconds=2, release=release)
    with WorkerProcess(rules, store, tmp_path / "worker.log") as worker:
        wait_until(lambda: any(markers.iterdir()), "the first job to start", 120)
        _, health = _wait_for_status(worker, 503)
        assert health["status"] == "unhealthy"
        assert "no grading cycle completed for" in health["reason"], health
        assert worker.metric(W + "last_cycle_age_seconds") > worker.metric(W + "stall_seconds")
        release.touch()
        _, health = _wait_for_status(worker, 200)
        assert health["reason"] is None
        wait_for_value(lambda: worker.metric(W + "jobs_graded_total", **RULE, outcome="passed"), 2.0, "jobs graded")
        assert worker.stop() == 0, worker.output()


def _wait_for_status(worker: WorkerProcess, status: int) -> tuple[int, dict]:
    seen: list[tuple[int, dict]] = []

    def answered() -> bool:
        seen.append(worker.health())
        return seen[-1][0] == status

    wait_until(answered, f"/healthz to answer {status}", 120, interval=0.2)
    return seen[-1]


def _worker_cli(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-c", LAUNCH, "worker", *args]
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120)


def test_a_bad_address_or_a_port_in_use_stops_the_worker_at_start(tmp_path: Path) -> None:
    store = _store(tmp_path, ["refund sent"])
    rules = _rules(tmp_path / "rules.yaml")
    for address, message in [
        ("9464", "--metrics-address '9464': expected HOST:PORT"),
        ("localhost:http", "expected HOST:PORT"),
        ("::1:9464", "expected HOST:PORT"),
        ("127.0.0.1:70000", "expected HOST:PORT"),
        ("no-such-host.invalid:9464", "cannot serve the worker's metrics on no-such-host.invalid:9464"),
    ]:
        done = _worker_cli("--rules", str(rules), "--store", str(store), "--metrics-address", address)
        assert done.returncode == 2, (address, done.stdout, done.stderr)
        assert message in done.stderr, done.stderr
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        done = _worker_cli("--rules", str(rules), "--store", str(store), "--metrics-address", f"127.0.0.1:{port}")
    assert done.returncode == 2, done.stderr
    assert f"cannot serve the worker's metrics on 127.0.0.1:{port}: Address already in use" in done.stderr
    # the rules file's address is checked as the file is, where it is written
    bad_rules = _rules(tmp_path / "bad-rules.yaml", metrics_address="0.0.0.0")
    done = _worker_cli("--rules", str(bad_rules), "--store", str(store))
    assert done.returncode == 2 and "metrics_address" in done.stderr and "HOST:PORT" in done.stderr, done.stderr
    done = _worker_cli("--rules", str(rules), "--store", str(store), "--once", "--metrics-address", "127.0.0.1:0")
    assert done.returncode == 2 and "--once runs one cycle and exits" in done.stderr, done.stderr
    with TraceStore(store, read_only=True) as reader:  # refused before anything was graded
        assert reader.query("SELECT count(*) FROM grading_jobs").rows[0][0] == 0


def test_the_rules_files_address_is_served_when_no_option_names_one(tmp_path: Path) -> None:
    store = _store(tmp_path, ["refund sent"])
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]  # free now; the worker binds it below
    rules = _rules(tmp_path / "rules.yaml", metrics_address=f"127.0.0.1:{port}")
    log = tmp_path / "worker.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-c", LAUNCH, "worker", "--rules", str(rules), "--store", str(store)],
            cwd=REPO,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_until(lambda: "grading; stop with" in log.read_text() or process.poll() is not None, "grading", 120)
        assert f"worker metrics on http://127.0.0.1:{port}/metrics" in log.read_text(), log.read_text()
    finally:
        process.terminate()
        assert process.wait(60) == 0, log.read_text()


def test_a_job_taken_over_after_its_lease_ran_out_counts_as_a_lease_lost(tmp_path: Path) -> None:
    with TraceStore(_store(tmp_path, ["refund sent"])) as store:
        slow, quick = take_over_after_the_lease(store)
    assert metric_samples(slow.metrics.render())[W + "leases_lost_total", frozenset(RULE.items())] == 1
    assert metric_samples(quick.metrics.render())[W + "leases_lost_total", frozenset(RULE.items())] == 0
