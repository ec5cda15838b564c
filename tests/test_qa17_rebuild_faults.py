"""``tracegrade rebuild`` attacked for real: SIGKILL at several points of a rebuild of a few thousand traces, a full
disk (a small tmpfs holding the store), a lake written by a receiver while it is rebuilt, a file a receiver holds
(which that receiver rebuilds), hostile options; and ``serve --metrics-address`` on a port of the receiver's own.

Every check is trace by trace and span by span: each trace keeps every span it was stored with and exactly one
trajectory, wholly the older mapper's or wholly the current one's (told apart row by row: see
``tests.support.outdated_trajectories``)."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

import pytest

from tests.support import pg_cluster
from tests.support.export_load import ExportLoad, assert_stored_once, make_batches
from tests.support.grading_cli import run_cli
from tests.support.lake_serve import LakeServerProcess, lake_span_counts
from tests.support.outdated_trajectories import current_count, read_until, rebuild_process, store_outdated
from tests.support.server_process import ServerProcess
from tests.support.small_fs import fill, free, small_filesystem
from tests.support.waiting import wait_until
from tracegrade.store import TraceStore
from tracegrade.store.lake import LakeStore
from tracegrade.trajectory import MAPPER_REVISION

pg_server = pg_cluster.pg_server  # the session's PostgreSQL (a fixture)

TRACES = 3000


@pytest.mark.parametrize(
    ("batch", "kill_after"),
    [(100, 100), (1000, 1000)],
    ids=["after-the-first-step", "inside-a-step-of-four-commits"],
)
def test_a_rebuild_killed_by_sigkill_leaves_each_trace_whole_and_the_same_command_finishes_it(
    tmp_path: Path, batch: int, kill_after: int
) -> None:
    path = tmp_path / "store.duckdb"
    with TraceStore(path) as store:
        spans_of = store_outdated(store, TRACES)
    child = rebuild_process("--store", str(path), "--batch", str(batch))
    printed = read_until(child, f"rebuilt {kill_after} of {TRACES} trace(s)")
    child.kill()  # the next step is under way: listing, mapping or replacing rows (a file's step of 1,000 commits
    child.wait(30)  # 250 traces at a time, so it may die between two of its commits)
    assert printed[0] == f"rebuilding the trajectories built by an older mapper: {TRACES} trace(s), with mapper " + (
        f"revision {MAPPER_REVISION}"
    )
    assert printed[1:] == [f"rebuilt {n} of {TRACES} trace(s)" for n in range(batch, kill_after + 1, batch)]

    with TraceStore(path) as store:  # opens after the crash (its write-ahead log replayed)
        current = current_count(store, spans_of)
    assert kill_after <= current < TRACES  # every step it reported is committed, and it did not finish

    again = run_cli("rebuild", "--store", path, "--batch", str(batch))
    assert again.exit_code == 0, again.output
    assert f": {TRACES - current} trace(s), with mapper revision" in again.stdout
    assert f"rebuilt the trajectories of {TRACES - current} trace(s) with mapper revision" in again.stdout
    with TraceStore(path, read_only=True) as store:
        assert current_count(store, spans_of) == TRACES


def test_a_full_disk_stops_a_rebuild_with_a_precise_error_and_once_room_is_made_the_same_command_finishes(
    tmp_path: Path,
) -> None:
    with small_filesystem(tmp_path / "fs", "32m") as mount:
        path = mount / "store.duckdb"
        with TraceStore(path) as store:
            spans_of = store_outdated(store, TRACES)
        fill(mount, leave=1_000_000)  # room for a few steps' write-ahead log, not for all of them
        full = rebuild_process("--store", str(path), "--batch", "100")
        out, err = full.communicate(timeout=120)
        assert full.returncode == 1, err
        reported = int(out.splitlines()[-1].split()[1])  # its last "rebuilt N of 3000 trace(s)"
        assert 0 < reported < TRACES
        assert f'Could not write file "{path}.wal": No space left on device' in err
        advice = "make room on the store's disk, then run the same command again: it goes on with the traces still"
        assert f"(rebuilt {reported} of {TRACES} trace(s) before it); {advice} out of date" in err
        assert "Traceback" not in err

        with TraceStore(path, read_only=True) as store:  # opens on the full disk; each step it reported is there
            assert current_count(store, spans_of) == reported
        free(mount)
        again = run_cli("rebuild", "--store", path, "--batch", "100")
        assert again.exit_code == 0, again.output
        assert f"rebuilt the trajectories of {TRACES - reported} trace(s) with mapper revision" in again.stdout
        with TraceStore(path, read_only=True) as store:
            assert current_count(store, spans_of) == TRACES


def _exporting(http_url: str, traces: int) -> ExportLoad:
    """A real OTLP/HTTP exporter sending up to ``traces`` new traces of four spans (until stopped), one a request,
    each resent until acknowledged; started, and seen to be acknowledged before this returns."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    load = ExportLoad(
        OTLPSpanExporter(endpoint=f"{http_url}/v1/traces", timeout=30), make_batches(traces, 4), resend=True
    )
    load.start()
    wait_until(lambda: load.acked_batches >= 5, "the receiver acknowledging the first exports")
    return load


def _one_current_build(store: TraceStore, trace_ids: set[str]) -> dict[str, list[object]]:
    """Those traces whose ``traces`` rows are not exactly one of the current mapper's, with their revisions."""
    builds: dict[str, list[object]] = {trace_id: [] for trace_id in trace_ids}
    for trace_id, revision in store.query("SELECT trace_id, mapper_revision FROM traces").rows:
        if trace_id in builds:
            builds[trace_id].append(revision)
    return {t: revisions for t, revisions in builds.items() if revisions != [MAPPER_REVISION]}


@pytest.mark.parametrize("killed", [False, True], ids=["run-through", "sigkilled-then-run-again"])
def test_a_lake_is_rebuilt_while_its_receiver_stores_new_traces(
    pg_server: pg_cluster.PgServer, tmp_path: Path, killed: bool
) -> None:
    where, data, outdated = f"ducklake:postgres:{pg_server.new_database()}", tmp_path / "data", 1000
    with LakeStore(where, data_path=data) as lake:
        spans_of = store_outdated(lake, outdated)
    with LakeServerProcess(where, data, tmp_path / "journal") as server:
        load = _exporting(server.http_url, 5000)  # more than it sends while the rebuild runs
        child = rebuild_process("--store", where, "--lake-data", str(data), "--batch", "250")
        read_until(child, f"rebuilt 250 of {outdated} trace(s)")
        sent_before = load.acked_batches
        if killed:
            child.kill()
            child.wait(30)
            again = run_cli("rebuild", "--store", where, "--lake-data", data, "--batch", "250")
            assert again.exit_code == 0, again.output
            left = int(again.stdout.split(" trace(s), with mapper revision")[0].rsplit(" ", 1)[1])
            assert 0 < left <= outdated - 250
            assert f"rebuilt the trajectories of {left} trace(s)" in again.stdout
        else:
            out, err = child.communicate(timeout=300)
            assert child.returncode == 0, err
            assert f"rebuilt the trajectories of {outdated} trace(s) with mapper revision {MAPPER_REVISION}" in out
        assert load.is_alive() and load.acked_batches > sent_before, "the traffic did not go on beside the rebuild"
        load.stop()
        load.join(60)
        assert server.terminate() == 0  # builds what it received before it exits

    counts = lake_span_counts(where)
    missing = [ids for ids in load.acked if counts.get(ids) != 1]
    assert not missing, f"{len(missing)} of {len(load.acked)} acknowledged spans not stored once: {missing[:3]}"
    with LakeStore(where, read_only=True) as lake:
        assert current_count(lake, spans_of) == outdated
        assert not _one_current_build(lake, {trace_id for trace_id, _ in load.acked})


def test_a_rebuild_of_a_file_its_receiver_holds_is_made_by_the_receiver_and_the_file_stays_whole(
    tmp_path: Path,
) -> None:
    path = tmp_path / "store.duckdb"
    with TraceStore(path) as store:
        spans_of = store_outdated(store, 200)
    with ServerProcess(path) as server:
        load = _exporting(server.http_url, 100)
        rebuilt = rebuild_process("--store", str(path))
        out, err = rebuilt.communicate(timeout=120)
        assert rebuilt.returncode == 0, err
        assert f"by the server at {server.http_url}: 200 trace(s)" in out
        assert "rebuilt the trajectories of 200 trace(s)" in out and "Traceback" not in err
        load.join(300)
        assert not load.is_alive() and load.acked_batches == 100  # every trace resent until acknowledged
        assert server.terminate() == 0
    assert_stored_once(path, load.acked)
    with TraceStore(path, read_only=True) as store:
        assert current_count(store, spans_of) == 200
        assert not _one_current_build(store, {trace_id for trace_id, _ in load.acked})


@pytest.mark.parametrize(
    ("options", "said"),
    [
        (["--batch", "0"], "Invalid value for '--batch': 0 is not in the range 1<=x<=1000000"),
        (["--batch", "-3"], "Invalid value for '--batch': -3 is not in the range 1<=x<=1000000"),
        (["--batch", str(10**20)], f"Invalid value for '--batch': {10**20} is not in the range 1<=x<=1000000"),
        (["--tenant", "acme' OR '1'='1"], "is not a valid tenant name; use 1-64 characters"),
    ],
    ids=["batch-0", "batch-negative", "batch-beyond-any-integer-sql-takes", "tenant-with-quotes"],
)
def test_hostile_options_are_refused_before_the_store_is_touched(tmp_path: Path, options: list[str], said: str) -> None:
    path = tmp_path / "store.duckdb"
    with TraceStore(path) as store:
        spans_of = store_outdated(store, 3)
    result = run_cli("rebuild", "--store", path, *options)
    assert result.exit_code == 2, result.output
    assert said in result.stderr
    with TraceStore(path, read_only=True) as store:
        assert current_count(store, spans_of) == 0


def test_the_largest_batch_is_one_step_and_an_unknown_tenant_has_nothing_to_rebuild(tmp_path: Path) -> None:
    path = tmp_path / "store.duckdb"
    with TraceStore(path) as store:
        spans_of = store_outdated(store, 3)
    nobody = run_cli("rebuild", "--store", path, "--tenant", "nobody")
    assert nobody.exit_code == 0, nobody.output
    assert nobody.stdout.startswith("tenant nobody has no traces in this store; the tenants with trajectories: default")
    assert "nothing to rebuild" in nobody.stdout
    largest = run_cli("rebuild", "--store", path, "--batch", "1000000")
    assert largest.exit_code == 0, largest.output
    assert largest.stdout.count("rebuilt 3 of 3 trace(s)") == 1
    with TraceStore(path, read_only=True) as store:
        assert current_count(store, spans_of) == 3


def test_a_store_path_that_is_no_writable_store_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    directory = run_cli("rebuild", "--store", tmp_path)
    assert directory.exit_code == 2 and f"{tmp_path} is a directory; give a store file" in directory.stderr
    text = tmp_path / "notes.duckdb"
    text.write_text("not a store\n")
    other = run_cli("rebuild", "--store", text)
    assert other.exit_code == 2 and "is not a DuckDB file (it lacks DuckDB's header)" in other.stderr
    assert text.read_text() == "not a store\n"
    with small_filesystem(tmp_path / "fs", "16m") as mount:  # read-only for root too, as chmod is not
        with TraceStore(mount / "store.duckdb") as store:
            spans_of = store_outdated(store, 3)
        subprocess.run(["mount", "-o", "remount,ro", str(mount)], check=True)
        read_only = run_cli("rebuild", "--store", mount / "store.duckdb")
        assert read_only.exit_code == 2, read_only.output
        assert f"cannot open store {mount / 'store.duckdb'}" in read_only.stderr
        assert "Read-only file system" in read_only.stderr
        with TraceStore(mount / "store.duckdb", read_only=True) as store:
            assert current_count(store, spans_of) == 0


@pytest.mark.parametrize("otlp_option", ["--http-port", "--grpc-port"])
def test_a_metrics_address_on_the_receivers_own_otlp_port_is_refused_at_start_naming_it(
    tmp_path: Path, otlp_option: str
) -> None:
    with socket.create_server(("127.0.0.1", 0)) as probe:  # a port free a moment ago, given to both
        port = probe.getsockname()[1]
    ports = {"--http-port": "0", "--grpc-port": "0", otlp_option: str(port)}
    result = run_cli(
        "serve", "--store", tmp_path / "s.duckdb", "--host", "127.0.0.1",
        *(text for option, value in ports.items() for text in (option, value)),
        "--metrics-address", f"127.0.0.1:{port}",
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    otlp = "OTLP/HTTP" if otlp_option == "--http-port" else "OTLP/gRPC"
    assert f"cannot serve /metrics on 127.0.0.1:{port}: port {port} is this receiver's {otlp} port ({otlp_option})" in (
        result.stderr
    )
    assert "Traceback" not in result.stderr
