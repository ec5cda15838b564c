"""Online grading across machines: two real ``tracegrade worker`` processes share one lake's jobs (the queue
in its catalog's PostgreSQL), spans sent by real OTLP exporters into a real ``tracegrade serve`` on the lake;
one worker is SIGKILLed in the middle of a job, the other takes its leases over when they expire, and every
job is graded exactly once. A worker whose lake failed under it (its catalog refusing connections when it
recorded a result) opens the lake again, rides out its catalog going away (a private PostgreSQL cluster
stopped and started) and grades every job.
And ``serve --worker-rules`` grades on a lake too."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import pg_cluster
from tests.support.grading_slow_criterion import write_slow_rules
from tests.support.lake_serve import LakeServerProcess
from tests.support.pg_cluster import PgServer, PrivateCluster
from tests.support.waiting import wait_for_value, wait_until
from tracegrade.store.lake import LakeStore
from tracegrade.store.lake_location import catalog_conninfo

pg_server = pg_cluster.pg_server  # the session's PostgreSQL (a fixture)
REPO = Path(__file__).resolve().parent.parent
LAUNCH = "from tracegrade.cli.main import main; main()"
TRACES = 12


@pytest.fixture
def lake(pg_server: PgServer, tmp_path: Path) -> tuple[str, Path]:
    return f"ducklake:postgres:{pg_server.new_database()}", tmp_path / "lake-data"


def _export_agent_runs(http_url: str, count: int) -> None:
    """``count`` agent turns (an OpenInference AGENT root with its answer, one tool span), sent by the OTel
    SDK's OTLP/HTTP exporter; every other answer mentions a refund."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": "billing"}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{http_url}/v1/traces", timeout=30)))
    tracer = provider.get_tracer("tests.lake_workers")
    for n in range(count):
        answer = "refund sent" if n % 2 else "no"
        attributes = {"openinference.span.kind": "AGENT", "input.value": f"question {n}", "output.value": answer}
        with (
            tracer.start_as_current_span("support-agent", attributes=attributes),
            tracer.start_as_current_span("lookup", attributes={"openinference.span.kind": "TOOL"}),
        ):
            pass
    assert provider.force_flush(30_000)
    provider.shutdown()


def _worker(
    lake: tuple[str, Path],
    tmp_path: Path,
    name: str,
    seconds: float,
    lease: float,
    release: Path | None = None,
    attempts: int = 3,
) -> subprocess.Popen[bytes]:
    """``tracegrade worker --worker-id NAME`` on the lake, grading ``seconds`` slowly (or until ``release``
    exists) under ``lease``-second leases, three jobs a claim, each tried ``attempts`` times at most; its
    output in ``NAME.log``."""
    location, data = lake
    rules = write_slow_rules(
        tmp_path / f"{name}.yaml",
        tmp_path / "markers",
        seconds,
        lease_seconds=lease,
        batch_size=3,
        release=release,
        max_attempts=attempts,
    )
    args = [
        sys.executable,
        "-c",
        LAUNCH,
        "worker",
        "--rules",
        str(rules),
        "--store",
        location,
        "--lake-data",
        str(data),
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRACEGRADE_")}
    with (tmp_path / f"{name}.log").open("ab") as out:
        return subprocess.Popen([*args, "--worker-id", name], cwd=REPO, stdout=out, stderr=out, env=env)


def _query(location: str, sql: str) -> list[tuple]:
    with LakeStore(location, read_only=True) as reader:
        return reader.query(sql).rows


def test_two_workers_one_killed_mid_job_every_job_graded_exactly_once(lake: tuple[str, Path], tmp_path: Path) -> None:
    location, data = lake
    server = LakeServerProcess(location, data, tmp_path / "receiver.journal").start(timeout=90)
    workers: list[subprocess.Popen[bytes]] = []
    try:
        _export_agent_runs(server.http_url, TRACES)
        wait_for_value(
            lambda: _query(location, "SELECT count(*) FROM traces")[0][0], TRACES, "every trace mapped", timeout=60
        )
        markers = tmp_path / "markers"
        markers.mkdir()
        # the doomed worker hangs in its first job; its leases (5 s) run out, and it is killed meanwhile
        doomed = _worker(lake, tmp_path, "doomed", seconds=600, lease=5)
        workers.append(doomed)
        wait_until(lambda: any(markers.iterdir()) or doomed.poll() is not None, "the doomed worker's first job", 90)
        assert doomed.poll() is None, (tmp_path / "doomed.log").read_text()
        held = _query(location, "SELECT job_id FROM grading_jobs WHERE owner = 'doomed' AND status = 'leased'")
        assert len(held) == 3
        survivor = _worker(lake, tmp_path, "survivor", seconds=0.1, lease=60)
        workers.append(survivor)
        # both grade at once for a while: the survivor finishes jobs while the doomed one holds its three
        wait_until(
            lambda: _query(location, "SELECT count(*) FROM grading_jobs WHERE status = 'done'")[0][0] >= 2,
            "the survivor to finish jobs beside the doomed worker",
            120,
        )
        doomed.kill()
        doomed.wait(30)
        wait_for_value(
            lambda: _query(location, "SELECT status, count(*) FROM grading_jobs GROUP BY ALL"),
            [("done", TRACES)],
            "every job done",
            timeout=180,
        )
        survivor.terminate()
        assert survivor.wait(60) == 0, (tmp_path / "survivor.log").read_text()
    finally:
        for process in workers:
            if process.poll() is None:
                process.kill()
                process.wait(30)
        server.kill()

    jobs = _query(location, "SELECT job_id, trace_id, owner, attempts, run_id FROM grading_jobs ORDER BY job_id")
    taken_over = {job_id for (job_id,) in held}
    assert {job_id for job_id, _, _, attempts, _ in jobs if attempts == 2} == taken_over
    assert all(attempts == 1 for job_id, _, _, attempts, _ in jobs if job_id not in taken_over)
    # exactly once: one recorded write per job (the killed worker recorded nothing), two criteria each
    assert _query(location, "SELECT count(*), count(DISTINCT eval_id) FROM raw.eval_case_results") == [(TRACES, TRACES)]
    per_job = _query(
        location,
        "SELECT j.job_id, count(*) FROM grading_jobs j JOIN eval_results r "
        "ON r.run_id = j.run_id AND r.trace_id = j.trace_id GROUP BY j.job_id",
    )
    assert sorted(per_job) == [(job_id, 2) for job_id, *_ in jobs]
    assert _query(location, "SELECT criterion, count(*), sum(score) FROM eval_results GROUP BY ALL ORDER BY ALL") == [
        ("contains_keywords", TRACES, TRACES // 2),
        ("slow_answered", TRACES, TRACES),
    ]
    worker_of = dict(
        _query(location, "SELECT result->>'$.metadata.job_id', result->>'$.metadata.worker' FROM eval_run_cases")
    )
    assert set(worker_of.values()) == {"survivor"} and set(worker_of) == {job_id for job_id, *_ in jobs}
    # the window's run counts every case, recorded by whichever worker
    assert _query(location, "SELECT count(*), sum(total_cases), sum(passed_cases) FROM eval_runs") == [
        (1, TRACES, TRACES // 2)
    ]


def test_serve_grades_on_a_lake_with_worker_rules(lake: tuple[str, Path], tmp_path: Path) -> None:
    location, data = lake
    rules = write_slow_rules(tmp_path / "rules.yaml", tmp_path, seconds=0, lease_seconds=60)
    server = LakeServerProcess(
        location, data, tmp_path / "receiver.journal", extra_args=("--worker-rules", str(rules))
    ).start(timeout=90)
    try:
        _export_agent_runs(server.http_url, 4)
        wait_for_value(
            lambda: _query(location, "SELECT status, count(*) FROM grading_jobs GROUP BY ALL"),
            [("done", 4)],
            "the receiver's worker to grade every trace",
            timeout=120,
        )
        assert server.terminate() == 0, server.log()
    finally:
        server.kill()
    assert _query(location, "SELECT count(*) FROM eval_results") == [(8,)]


def _refuse_lake_connections(pg: PgServer, location: str, refuse: bool) -> None:
    """Make the lake's catalog database refuse new connections (or accept them again); refusing also ends
    the connections DuckDB's postgres extension holds, so the lake's next statement must connect anew and
    fails with an I/O error, while tracegrade's own queue connections (application_name tracegrade) live on."""
    database = catalog_conninfo(location).rsplit("dbname=", 1)[1].split()[0]
    pg.psql(f"ALTER DATABASE {database} ALLOW_CONNECTIONS {'false' if refuse else 'true'}")
    if refuse:
        pg.psql(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            f"WHERE datname = '{database}' AND application_name <> 'tracegrade'"
        )


def test_a_worker_whose_lake_failed_opens_it_again_and_rides_out_a_catalog_outage(tmp_path: Path) -> None:
    cluster = PrivateCluster()  # stopped and started here: never the shared cluster
    server: LakeServerProcess | None = None
    worker: subprocess.Popen[bytes] | None = None
    log = tmp_path / "phoenix.log"

    def said(*phrases: str) -> int:
        text = log.read_text()
        return sum(text.count(phrase) for phrase in phrases)

    try:
        pg = cluster.start()
        lake = f"ducklake:postgres:{pg.new_database()}", tmp_path / "lake-data"
        location = lake[0]
        server = LakeServerProcess(location, lake[1], tmp_path / "receiver.journal").start(timeout=90)
        _export_agent_runs(server.http_url, 6)
        wait_for_value(lambda: _query(location, "SELECT count(*) FROM traces")[0][0], 6, "every trace mapped", 60)
        assert server.terminate() == 0, server.log()
        markers, release = tmp_path / "markers", tmp_path / "release"
        markers.mkdir()
        # jobs fail a few times while the lake is out of reach: they must not run out of attempts
        worker = _worker(lake, tmp_path, "phoenix", 600, lease=3, release=release, attempts=20)
        wait_until(lambda: any(markers.iterdir()) or worker.poll() is not None, "the worker's first job", 90)
        # the catalog refuses the lake's connections when the first job's result is recorded: the lake
        # marks itself failed (an I/O error), as when PostgreSQL goes away in the middle of a commit
        _refuse_lake_connections(pg, location, True)
        release.touch()
        wait_until(lambda: said("opening it again") or worker.poll() is not None, "the lake to fail", 120)
        assert worker.poll() is None, log.read_text()
        _refuse_lake_connections(pg, location, False)
        # and then the catalog goes away altogether, while the worker grades or opens the lake again
        before = said("trying again in", "worker cycle failed")
        cluster.stop()
        wait_until(
            lambda: said("trying again in", "worker cycle failed") > before, "the worker to meet the outage", 120
        )
        cluster.start()
        wait_for_value(
            lambda: _query(location, "SELECT status, count(*) FROM grading_jobs GROUP BY ALL"),
            [("done", 6)],
            "every job done once the catalog was back",
            timeout=180,
        )
        worker.terminate()
        assert worker.wait(60) == 0, log.read_text()
        assert _query(location, "SELECT criterion, count(*) FROM eval_results GROUP BY ALL ORDER BY ALL") == [
            ("contains_keywords", 6),
            ("slow_answered", 6),
        ]
    finally:
        if worker is not None and worker.poll() is None:
            worker.kill()
            worker.wait(30)
        if server is not None:
            server.kill()
        cluster.remove()
