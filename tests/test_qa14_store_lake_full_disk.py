"""`tracegrade serve` on a lake whose ``--lake-data`` filesystem is full while trajectory builds are queued: the
receiver reopens its store once, not every second, and once space is back every trace is built and graded.

Before, the receiver's worker waited for room (``ingest.disk_room``) but its trajectory rebuilder did not: each
reopened lake took the journal's replay, then the rebuilder's next build of the traces still queued wrote a Parquet
file that did not fit, failed the lake, and the receiver reopened it again, every second for as long as the disk
stayed full (a receiver without ``--worker-rules`` had no such wait at all).

Real processes and filesystems: ``tracegrade serve`` on a real PostgreSQL catalog with its data path on a tmpfs the
test fills and frees, traces sent by the OpenTelemetry SDK's OTLP/HTTP exporter, the lake read back afterwards.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.support import pg_cluster
from tests.support.export_load import export_all, make_batches
from tests.support.lake_serve import LakeServerProcess, lake_span_counts
from tests.support.pg_cluster import PgServer
from tests.support.server_otlp import get_text
from tests.support.small_fs import fill, free, small_filesystem
from tests.support.waiting import wait_until
from tests.support.worker_process import metric_samples
from tracegrade.store.lake import LakeStore

pg_server = pg_cluster.pg_server  # the session's PostgreSQL (a fixture)
W = "tracegrade_worker_"
TRACES = 100  # stored before the disk fills
HELD_CYCLES = 30  # the worker's cycles watched on the full disk (5 a second at poll_seconds 0.2)
MOST_REOPENINGS = 2  # the failure the first write on the full disk caused, and one to spare
REOPENED = "the store is open again"


def _samples(server: LakeServerProcess) -> dict:
    status, text = get_text(f"{server.http_url}/metrics")
    assert status == 200, text
    return metric_samples(text)


@pytest.mark.slow
def test_a_lake_whose_data_disk_is_full_is_reopened_once_and_builds_and_grades_everything_once_space_is_back(
    pg_server: PgServer, tmp_path: Path
) -> None:
    rule = {"name": "keywords", "settle_seconds": 0, "criteria": {"contains_keywords": {"keywords": ["step"]}}}
    rules = tmp_path / "rules.yaml"
    rules.write_text(yaml.safe_dump({"poll_seconds": 0.2, "lease_seconds": 3, "rules": [rule]}), encoding="utf-8")
    location = f"ducklake:postgres:{pg_server.new_database()}"
    journal = tmp_path / "receiver.journal"  # the journal and the logs off the small disk: only the lake fills it
    with small_filesystem(tmp_path / "fs", "32m") as mount:
        # traces stored by a receiver that builds nothing (their builds stay queued in the catalog), then stopped
        first = LakeServerProcess(location, mount / "data", journal, extra_args=("--no-build-trajectories",))
        first.log_path = tmp_path / "first.log"
        with first:
            acked = export_all(first.http_url, make_batches(TRACES, 10, payload_bytes=1500))
            assert first.terminate() == 0, first.log()
        # the disk fills: the queued builds and the grading cannot be written
        fill(mount)
        server = LakeServerProcess(location, mount / "data", journal, extra_args=("--worker-rules", str(rules)))
        server.log_path = tmp_path / "serve.log"
        reopenings = lambda: server.log().count(REOPENED)  # noqa: E731
        with server:
            wait_until(lambda: reopenings() >= 1, "the store reopened after a write failed on the full disk", 120)
            # count events, not time: the worker's cycles held from here on, against the reopenings meanwhile
            held = lambda: _samples(server).get((W + "cycles_held_total", frozenset()), 0.0)  # noqa: E731
            watched_from = held()
            wait_until(
                lambda: held() >= watched_from + HELD_CYCLES or reopenings() > MOST_REOPENINGS,
                f"{HELD_CYCLES} worker cycles held on the full disk",
                180,
            )
            assert reopenings() <= MOST_REOPENINGS, server.log()
            assert "No space left on device" in server.log()
            free(mount)
            graded = lambda: sum(  # noqa: E731
                value for (name, _), value in _samples(server).items() if name == W + "jobs_graded_total"
            )
            wait_until(lambda: graded() >= TRACES, "every trace graded once space is back", 180)
            assert reopenings() <= MOST_REOPENINGS, server.log()
            assert server.terminate() == 0, server.log()
        # read while the data path is mounted. Span by span: every acknowledged span stored, none twice;
        # every trace built (a row of traces) and graded, once
        counts = lake_span_counts(location)
        assert sorted(counts) == sorted(acked) and set(counts.values()) == {1}
        with LakeStore(location, read_only=True) as reader:
            built = reader.query("SELECT count(DISTINCT trace_id) FROM traces").rows[0][0]
            jobs = reader.query("SELECT status, count(*) FROM grading_jobs GROUP BY ALL").rows
        assert built == TRACES
        assert jobs == [("done", TRACES)], jobs
