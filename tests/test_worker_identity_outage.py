"""`tracegrade serve --worker-rules` whose store fails while its worker grades (a lake whose catalog goes away, a
store file whose disk fills up): once the receiver has opened its store again, the jobs the worker held are graded
at once, and the outage spent none of their attempts.

Before, the worker of the reopened store had a new id: the jobs the old one held (their results lost with the
store, and handing them back failed with the catalog) stayed leased to a worker that no longer existed until their
lease ran out, and each such outage spent one of their ``max_attempts``.

Real processes: ``tracegrade serve`` on a lake whose catalog is a private PostgreSQL cluster, stopped and started
again, or on a store file on a tmpfs that is filled and freed, while a grading job is held in flight
(``tests.support.grading_slow_criterion``); spans sent by the OpenTelemetry SDK's OTLP/HTTP exporter; the job
queue read from the catalog, or from the file once the receiver stopped.
"""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from tests.support.grading_slow_criterion import write_slow_rules
from tests.support.lake_serve import LakeServerProcess
from tests.support.pg_cluster import PrivateCluster
from tests.support.server_otlp import get_text
from tests.support.server_process import ServerProcess
from tests.support.small_fs import fill, free, small_filesystem
from tests.support.waiting import wait_until
from tests.support.worker_process import metric_samples
from tracegrade.store import TraceStore
from tracegrade.store.lake_location import catalog_conninfo

pytestmark = pytest.mark.slow

W = "tracegrade_worker_"
TRACES = 3
CYCLES_AFTER = 25  # the worker's cycles watched once the store is open again (5 a second at poll_seconds 0.2)
WAIT = 180.0  # bound on waiting for background work on a busy machine (not a timing assertion)
REOPENED = "the store is open again"


def _send_answers(server: ServerProcess, count: int) -> None:
    """``count`` traces, a turn span each, over OTLP/HTTP."""
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(HttpSpanExporter(endpoint=f"{server.http_url}/v1/traces")))
    for n in range(count):
        turn = {"tracegrade.turn.input": f"question {n}", "tracegrade.turn.output": "refund sent"}
        with provider.get_tracer("test").start_as_current_span("tracegrade.turn prod", attributes=turn):
            pass
    provider.shutdown()


def _jobs(location: str) -> dict[str, tuple[str, str | None, int]]:
    """job id -> (status, owner, attempts), read from the catalog's queue."""
    with psycopg.connect(catalog_conninfo(location), autocommit=True) as con:
        rows = con.execute("SELECT job_id, status, owner, attempts FROM tracegrade.grading_jobs").fetchall()
    return {job_id: (status, owner, attempts) for job_id, status, owner, attempts in rows}


def _all_done(location: str) -> bool:
    jobs = _jobs(location)
    return len(jobs) == TRACES and all(status == "done" for status, _, _ in jobs.values())


def _samples(server: ServerProcess) -> dict:
    status, text = get_text(f"{server.http_url}/metrics")
    assert status == 200, text
    return metric_samples(text)


def _completed_cycles(server: ServerProcess) -> float:
    return _samples(server).get((W + "cycle_duration_seconds_count", frozenset()), 0.0)


def _graded(server: ServerProcess) -> float:
    return sum(v for (name, _), v in _samples(server).items() if name == W + "jobs_graded_total")


def test_the_jobs_held_when_the_store_failed_are_graded_once_it_is_open_again_without_spending_an_attempt(
    tmp_path: Path,
) -> None:
    markers, release = tmp_path / "markers", tmp_path / "release"
    markers.mkdir()
    # a lease that never runs out while the test runs: a held job graded after the outage was handed back
    rules = write_slow_rules(tmp_path / "rules.yaml", markers, seconds=600, lease_seconds=3600, release=release)
    cluster = PrivateCluster()
    try:
        location = f"ducklake:postgres:{cluster.start().new_database()}"
        server = LakeServerProcess(
            location, tmp_path / "lake-data", tmp_path / "journal", extra_args=("--worker-rules", str(rules))
        )
        server.log_path = tmp_path / "serve.log"
        with server:
            _send_answers(server, TRACES)
            # a job is in flight: the criterion holds it, leased, until ``release`` exists
            wait_until(lambda: any(markers.iterdir()), "a grading job to start", WAIT)
            held = {job_id for job_id, (status, _, _) in _jobs(location).items() if status == "leased"}
            assert held, _jobs(location)
            cluster.stop()
            release.touch()  # the job's results meet the catalog's outage: lost, and handing the job back fails
            wait_until(lambda: "the store failed" in server.log(), "the store to fail", WAIT)
            cluster.start()
            wait_until(lambda: REOPENED in server.log(), "the store to open again", WAIT)
            # count the worker's cycles, not time: the held jobs are graded within a few, or never before their lease
            watched_from = _completed_cycles(server)
            wait_until(
                lambda: _all_done(location) or _completed_cycles(server) >= watched_from + CYCLES_AFTER,
                "every job graded, or the worker's cycles after the reopening",
                WAIT,
            )
            jobs = _jobs(location)
            assert server.terminate() == 0, server.log()
        assert len(jobs) == TRACES and {status for status, _, _ in jobs.values()} == {"done"}, (jobs, held)
        # each job was claimed once for good: the attempt the store's failure took was given back
        assert {attempts for _, _, attempts in jobs.values()} == {1}, jobs
        assert f"handed back {len(held)} grading job(s) leased to this worker" in server.log(), server.log()
    finally:
        cluster.remove()


def test_the_jobs_held_when_a_full_disk_failed_the_store_file_are_graded_once_it_has_room_without_spending_an_attempt(
    tmp_path: Path,
) -> None:
    markers, release = tmp_path / "markers", tmp_path / "release"
    markers.mkdir()
    rules = write_slow_rules(tmp_path / "rules.yaml", markers, seconds=600, lease_seconds=3600, release=release)
    with small_filesystem(tmp_path / "fs", "64m") as mount:
        store = mount / "store.duckdb"
        server = ServerProcess(store, extra_args=("--worker-rules", str(rules)))
        server.log_path = tmp_path / "serve.log"  # off the full disk, so the receiver's log stays readable
        with server:
            _send_answers(server, TRACES)
            wait_until(lambda: any(markers.iterdir()), "a grading job to start", WAIT)
            fill(mount)
            release.touch()  # the job's results meet the full disk: lost, and handing the job back fails
            wait_until(lambda: "the store failed" in server.log(), "the store to fail", WAIT)
            wait_until(lambda: REOPENED in server.log(), "the store to open again", WAIT)
            free(mount)  # the worker of the reopened store waited for room; it writes again from here
            watched_from = _completed_cycles(server)
            wait_until(
                lambda: _graded(server) >= TRACES or _completed_cycles(server) >= watched_from + CYCLES_AFTER,
                "every job graded, or the worker's cycles once the disk has room",
                WAIT,
            )
            assert server.terminate() == 0, server.log()
        assert "No space left on device" in server.log()
        with TraceStore(store, read_only=True) as reader:
            jobs = reader.query("SELECT status, attempts FROM grading_jobs").rows
        assert sorted(jobs) == [("done", 1)] * TRACES, jobs
        assert "grading job(s) leased to this worker" in server.log(), server.log()
