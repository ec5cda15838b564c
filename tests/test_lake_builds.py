"""A lake's build queue in its catalog's PostgreSQL: one builder per trace at a time, late spans queue the
trace again, a dead builder's claim passes to another when its lease runs out, and `tracegrade build`
processes build what receivers started with --no-build-trajectories only queue."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.support import pg_cluster
from tests.support.export_load import ExportLoad, make_batches
from tests.support.lake_serve import LakeServerProcess
from tests.support.pg_cluster import PgServer
from tests.support.store_records import make_span, trace_hex
from tracegrade.store.lake import LakeStore
from tracegrade.store.tenancy import DEFAULT_TENANT

pg_server = pg_cluster.pg_server  # the session's PostgreSQL (a fixture)

_WAIT_SECONDS = 120.0  # bound on waiting for background work on a busy machine (not a timing assertion)


@pytest.fixture
def lake(pg_server: PgServer, tmp_path: Path) -> tuple[str, Path]:
    return f"ducklake:postgres:{pg_server.new_database()}", tmp_path / "lake-data"


def _settled_now(store: LakeStore) -> LakeStore:
    store.builds.configure(settle_seconds=0, root_settle_seconds=0, capacity=0)
    return store


def test_two_builders_claiming_at_once_never_take_the_same_trace(lake: tuple[str, Path]) -> None:
    location, data = lake
    with _settled_now(LakeStore(location, data_path=data)) as first, LakeStore(location, data_path=data) as second:
        first.write([make_span(t, 1) for t in range(1, 61)])
        claimed: dict[str, list[str]] = {"first": [], "second": []}

        def claim_all(name: str, store: LakeStore) -> None:
            while (claim := store.builds.claim(7)) is not None:
                claimed[name] += [trace_id for _, trace_id in claim.keys]

        threads = [threading.Thread(target=claim_all, args=item) for item in (("first", first), ("second", second))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(_WAIT_SECONDS)
        assert not set(claimed["first"]) & set(claimed["second"])
        assert sorted(claimed["first"] + claimed["second"]) == sorted(trace_hex(t) for t in range(1, 61))
        assert first.builds.claim(100, due_only=False) is None  # every trace is leased to its builder


def test_a_span_written_while_its_trace_is_built_queues_the_trace_again(lake: tuple[str, Path]) -> None:
    location, data = lake
    with _settled_now(LakeStore(location, data_path=data)) as store:
        store.write([make_span(1, 1)])
        one = [(DEFAULT_TENANT, trace_hex(1))]
        claim = store.builds.claim(10)
        assert claim is not None and claim.keys == one
        store.write([make_span(1, 2)])  # a late span, committed while the claim's build runs
        store.builds.finish(claim, built=True)
        assert store.stale_trajectories() == one
        again = store.builds.claim(10)
        assert again is not None and again.keys == one and again.updated_at > claim.updated_at
        store.builds.finish(again, built=True)
        assert store.stale_trajectories() == []


def test_a_dead_builders_claim_passes_to_another_when_its_lease_runs_out(lake: tuple[str, Path]) -> None:
    location, data = lake
    with _settled_now(LakeStore(location, data_path=data)) as dying, LakeStore(location, data_path=data) as other:
        dying._catalog_builds.lease_seconds = 1.0
        dying.write([make_span(1, 1)])
        assert dying.builds.claim(10) is not None  # and never finished: its builder died
        assert other.builds.claim(10, due_only=False) is None
        deadline = time.monotonic() + _WAIT_SECONDS
        while (taken := other.builds.claim(10)) is None:
            assert time.monotonic() < deadline, "the lease never ran out"
            time.sleep(0.2)
        assert taken.keys == [(DEFAULT_TENANT, trace_hex(1))]


def _build(location: str, data: Path, *args: str) -> subprocess.Popen[str]:
    code = "from tracegrade.cli.main import main; main()"
    command = [sys.executable, "-c", code, "build", "--store", location, "--lake-data", str(data), *args]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_build_processes_build_what_receivers_without_builders_queue(lake: tuple[str, Path], tmp_path: Path) -> None:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter

    location, data = lake
    receiver = LakeServerProcess(
        location, data, tmp_path / "r.journal", extra_args=("--no-build-trajectories",)
    ).start()
    builders: list[subprocess.Popen[str]] = []
    try:
        traces = make_batches(12, 5)
        first = ExportLoad(HttpSpanExporter(endpoint=f"{receiver.http_url}/v1/traces", timeout=30), traces[:6], 0)
        first.run()
        deadline = time.monotonic() + _WAIT_SECONDS
        with LakeStore(location, read_only=True) as reader:
            while len(reader.stale_trajectories()) < 6:  # queued by the receiver's commits, built by nobody
                assert time.monotonic() < deadline, receiver.log()
                time.sleep(0.2)
            assert reader.query("SELECT count(*) FROM traces").rows == [(0,)]
        once = _build(location, data, "--once")
        output, _ = once.communicate(timeout=_WAIT_SECONDS)
        assert once.returncode == 0 and "built the trajectories of 6 traces" in output, output

        builders = [_build(location, data), _build(location, data)]  # two builders share the queue
        late = [span for trace in traces[:3] for span in trace[:1]]  # the root spans, sent again: duplicates
        second = ExportLoad(HttpSpanExporter(endpoint=f"{receiver.http_url}/v1/traces", timeout=30), traces[6:], 0)
        second.run()
        ExportLoad(HttpSpanExporter(endpoint=f"{receiver.http_url}/v1/traces", timeout=30), [late], 0).run()
        with LakeStore(location, read_only=True) as reader:
            while reader.stale_trajectories() or reader.query("SELECT count(*) FROM traces").rows != [(12,)]:
                assert time.monotonic() < deadline + _WAIT_SECONDS, receiver.log()
                time.sleep(0.2)
            assert reader.query("SELECT DISTINCT span_count FROM traces").rows == [(5,)]
        for builder in builders:
            builder.send_signal(signal.SIGTERM)
            output, _ = builder.communicate(timeout=_WAIT_SECONDS)
            assert builder.returncode == 0, output
        assert receiver.terminate() == 0, receiver.log()
    finally:
        for builder in builders:
            if builder.poll() is None:
                builder.kill()
        receiver.kill()


def test_build_refuses_a_file_store_and_serve_keeps_building_a_file(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from tracegrade.cli.main import cli
    from tracegrade.errors import ConfigError
    from tracegrade.ingest.settings import ServeSettings

    refused = CliRunner().invoke(cli, ["build", "--store", str(tmp_path / "traces.duckdb")])
    assert refused.exit_code == 2 and "works on a lake store" in refused.output, refused.output
    missing = CliRunner().invoke(cli, ["build", "--store", "ducklake:postgres:host=localhost dbname=x"])
    assert missing.exit_code == 2 and "--lake-data" in missing.output, missing.output
    with pytest.raises(ConfigError, match="--no-build-trajectories is for a lake store"):
        ServeSettings.build({"store": str(tmp_path / "traces.duckdb"), "build_trajectories": False})
