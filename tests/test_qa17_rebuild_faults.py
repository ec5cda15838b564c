"""``tracegrade rebuild`` attacked for real: SIGKILL at several points of a rebuild of a few thousand traces, a full
disk (a small tmpfs holding the store), a lake written by a receiver while it is rebuilt, a file a receiver holds,
hostile options; and ``serve --metrics-address`` on a port of the receiver's own.

Every check is trace by trace and span by span: each trace keeps every span it was stored with and exactly one
trajectory, wholly the older mapper's or wholly the current one's. The older build is told apart row by row: its
node_visits, tool_calls and llm_calls rows carry ``duration_ms = -1``, which the mapper never derives."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from tests.support import pg_cluster
from tests.support.export_load import ExportLoad, assert_stored_once, make_batches
from tests.support.grading_cli import run_cli
from tests.support.lake_serve import LakeServerProcess, lake_span_counts
from tests.support.mapper_spans import SpanBuilder, js
from tests.support.server_process import ServerProcess
from tests.support.small_fs import fill, free, small_filesystem
from tests.support.waiting import wait_until
from tracegrade.models.span import SpanRecord
from tracegrade.store import TraceStore
from tracegrade.store.lake import LakeStore
from tracegrade.store.tenancy import DEFAULT_TENANT
from tracegrade.store.trajectories import TrajectoryRows, execution_rows
from tracegrade.trajectory import MAPPER_REVISION, map_spans

pg_server = pg_cluster.pg_server  # the session's PostgreSQL (a fixture)

OLD_BUILD = -1.0  # the duration_ms of every step row the older mapper built here
STEP_TABLES = ("node_visits", "tool_calls", "llm_calls")
STEPS_PER_TRACE = 1  # the agent run below makes one node visit, one tool call and one LLM call
LAUNCH = [sys.executable, "-c", "from tracegrade.cli.main import main; main()"]


def _agent_run(trace_id: str) -> list[SpanRecord]:
    """An ADK agent that asks its model, then calls a tool: a node visit, an LLM call and a tool call."""
    b = SpanBuilder(trace_id, scope="gcp.vertex.agent")
    model_call = {
        "gen_ai.request.model": "gemini-2.0-flash",
        "gen_ai.usage.input_tokens": 30,
        "gen_ai.usage.output_tokens": 5,
        "gcp.vertex.agent.llm_request": js(
            {"contents": [{"role": "user", "parts": [{"text": f"Bergen {trace_id}?"}]}]}
        ),
        "gcp.vertex.agent.llm_response": js({"content": {"role": "model", "parts": [{"text": "Rain."}]}}),
    }
    tool_call = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "lookup",
        "gen_ai.tool.call.id": f"call-{trace_id}",
        "gcp.vertex.agent.tool_call_args": js({"city": "Bergen"}),
        "gcp.vertex.agent.tool_response": js({"ok": True}),
    }
    with b.span("invocation"), b.span("invoke_agent router"):
        b.leaf("call_llm", model_call)
        b.leaf("execute_tool lookup", tool_call)
    return b.spans


def _store_outdated(store: TraceStore, count: int) -> dict[str, set[str]]:
    """Store ``count`` agent runs with trajectories an older mapper built (revision NULL, step rows marked
    ``OLD_BUILD``); each trace id with the ids of its spans."""
    runs = {f"{n:032x}": _agent_run(f"{n:032x}") for n in range(1, count + 1)}
    store.write([span for spans in runs.values() for span in spans])
    rows = TrajectoryRows()
    stamp = store.stamp()
    for trace_id, spans in runs.items():
        execution_rows(trace_id, map_spans(spans), spans, stamp, rows)
    tables = rows.to_arrow()
    for name in STEP_TABLES:
        old = pa.array([OLD_BUILD] * tables[name].num_rows, tables[name].schema.field("duration_ms").type)
        tables[name] = tables[name].set_column(tables[name].schema.get_field_index("duration_ms"), "duration_ms", old)
    revision = tables["traces"].schema.get_field_index("mapper_revision")
    tables["traces"] = tables["traces"].set_column(
        revision, "mapper_revision", pa.nulls(len(runs), tables["traces"].schema.field(revision).type)
    )
    claim = store.builds.claim_traces([(DEFAULT_TENANT, trace_id) for trace_id in runs])
    store.replace_trajectories(tables, clear=list(runs), tenant=DEFAULT_TENANT)
    store.builds.finish(claim, built=True)
    return {trace_id: {span.span_id for span in spans} for trace_id, spans in runs.items()}


def _current_count(store: TraceStore, spans_of: dict[str, set[str]]) -> int:
    """Check every trace of ``spans_of`` trace by trace (each span kept; one ``traces`` row; step rows all of
    that row's build and as many as it counts) and return how many are built by the current mapper."""
    stored: dict[str, set[str]] = {}
    for trace_id, span_id in store.query("SELECT trace_id, span_id FROM spans").rows:
        stored.setdefault(trace_id, set()).add(span_id)
    assert stored.keys() >= spans_of.keys()
    lost = {t: spans - stored[t] for t, spans in spans_of.items() if spans - stored[t]}
    assert not lost, f"spans lost: {dict(list(lost.items())[:5])}"
    builds: dict[str, list[object]] = {}
    for trace_id, revision in store.query("SELECT trace_id, mapper_revision FROM traces").rows:
        builds.setdefault(trace_id, []).append(revision)
    twice = {t: revisions for t, revisions in builds.items() if len(revisions) != 1}
    assert not twice, f"traces without exactly one trajectory: {dict(list(twice.items())[:5])}"
    assert builds.keys() >= spans_of.keys()
    current = {t for t in spans_of if builds[t] == [MAPPER_REVISION]}
    assert {t for t in spans_of if builds[t] == [None]} == spans_of.keys() - current, "a revision neither old nor new"
    for table in STEP_TABLES:
        steps = {
            trace_id: (rows, old)
            for trace_id, rows, old in store.query(
                f"SELECT trace_id, count(*), count(*) FILTER (WHERE duration_ms = {OLD_BUILD}) FROM {table} "
                "GROUP BY trace_id"
            ).rows
        }
        expected = {t: (STEPS_PER_TRACE, 0 if t in current else STEPS_PER_TRACE) for t in spans_of}
        wrong = {t: steps.get(t) for t in spans_of if steps.get(t) != expected[t]}
        assert not wrong, f"{table}: (rows, rows of the older build) wrong for {dict(list(wrong.items())[:5])}"
    return len(current)


def _rebuild_process(*args: str) -> subprocess.Popen[str]:
    """``tracegrade rebuild ARGS`` in a child process, its progress lines read as they come."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRACEGRADE_")}
    command = [*LAUNCH, "rebuild", *args]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def _read_until(child: subprocess.Popen[str], line: str) -> list[str]:
    """The lines the child printed up to and including ``line`` (fails if it ends first)."""
    assert child.stdout is not None
    lines: list[str] = []
    while not lines or lines[-1] != line:
        printed = child.stdout.readline()
        assert printed, f"the rebuild ended before printing {line!r}: {lines}, {child.communicate()[1]}"
        lines.append(printed.rstrip("\n"))
    return lines


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
        spans_of = _store_outdated(store, TRACES)
    child = _rebuild_process("--store", str(path), "--batch", str(batch))
    printed = _read_until(child, f"rebuilt {kill_after} of {TRACES} trace(s)")
    child.kill()  # the next step is under way: listing, mapping or replacing rows (a file's step of 1,000 commits
    child.wait(30)  # 250 traces at a time, so it may die between two of its commits)
    assert printed[0] == f"rebuilding the trajectories built by an older mapper: {TRACES} trace(s), with mapper " + (
        f"revision {MAPPER_REVISION}"
    )
    assert printed[1:] == [f"rebuilt {n} of {TRACES} trace(s)" for n in range(batch, kill_after + 1, batch)]

    with TraceStore(path) as store:  # opens after the crash (its write-ahead log replayed)
        current = _current_count(store, spans_of)
    assert kill_after <= current < TRACES  # every step it reported is committed, and it did not finish

    again = run_cli("rebuild", "--store", path, "--batch", str(batch))
    assert again.exit_code == 0, again.output
    assert f": {TRACES - current} trace(s), with mapper revision" in again.stdout
    assert f"rebuilt the trajectories of {TRACES - current} trace(s) with mapper revision" in again.stdout
    with TraceStore(path, read_only=True) as store:
        assert _current_count(store, spans_of) == TRACES


def test_a_full_disk_stops_a_rebuild_with_a_precise_error_and_once_room_is_made_the_same_command_finishes(
    tmp_path: Path,
) -> None:
    with small_filesystem(tmp_path / "fs", "32m") as mount:
        path = mount / "store.duckdb"
        with TraceStore(path) as store:
            spans_of = _store_outdated(store, TRACES)
        fill(mount, leave=1_000_000)  # room for a few steps' write-ahead log, not for all of them
        full = _rebuild_process("--store", str(path), "--batch", "100")
        out, err = full.communicate(timeout=120)
        assert full.returncode == 1, err
        reported = int(out.splitlines()[-1].split()[1])  # its last "rebuilt N of 3000 trace(s)"
        assert 0 < reported < TRACES
        assert f'Could not write file "{path}.wal": No space left on device' in err
        advice = "make room on the store's disk, then run the same command again: it goes on with the traces still"
        assert f"(rebuilt {reported} of {TRACES} trace(s) before it); {advice} out of date" in err
        assert "Traceback" not in err

        with TraceStore(path, read_only=True) as store:  # opens on the full disk; each step it reported is there
            assert _current_count(store, spans_of) == reported
        free(mount)
        again = run_cli("rebuild", "--store", path, "--batch", "100")
        assert again.exit_code == 0, again.output
        assert f"rebuilt the trajectories of {TRACES - reported} trace(s) with mapper revision" in again.stdout
        with TraceStore(path, read_only=True) as store:
            assert _current_count(store, spans_of) == TRACES


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
        spans_of = _store_outdated(lake, outdated)
    with LakeServerProcess(where, data, tmp_path / "journal") as server:
        load = _exporting(server.http_url, 5000)  # more than it sends while the rebuild runs
        child = _rebuild_process("--store", where, "--lake-data", str(data), "--batch", "250")
        _read_until(child, f"rebuilt 250 of {outdated} trace(s)")
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
        assert _current_count(lake, spans_of) == outdated
        assert not _one_current_build(lake, {trace_id for trace_id, _ in load.acked})


def test_a_rebuild_of_a_file_its_receiver_holds_is_refused_at_once_and_the_file_stays_whole(tmp_path: Path) -> None:
    path = tmp_path / "store.duckdb"
    with TraceStore(path) as store:
        spans_of = _store_outdated(store, 200)
    with ServerProcess(path) as server:
        load = _exporting(server.http_url, 100)
        refused = _rebuild_process("--store", str(path))
        out, err = refused.communicate(timeout=60)  # not waiting for the file's lock
        assert refused.returncode == 2, err
        assert f"store {path} is held by `tracegrade serve` at {server.http_url}" in err
        assert "Nothing was rebuilt" in err and "Traceback" not in err and not out
        load.join(300)
        assert not load.is_alive() and load.acked_batches == 100  # every trace resent until acknowledged
        assert server.terminate() == 0
    assert_stored_once(path, load.acked)
    with TraceStore(path, read_only=True) as store:
        assert _current_count(store, spans_of) == 0  # the receiver rebuilt none of them by itself
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
        spans_of = _store_outdated(store, 3)
    result = run_cli("rebuild", "--store", path, *options)
    assert result.exit_code == 2, result.output
    assert said in result.stderr
    with TraceStore(path, read_only=True) as store:
        assert _current_count(store, spans_of) == 0


def test_the_largest_batch_is_one_step_and_an_unknown_tenant_has_nothing_to_rebuild(tmp_path: Path) -> None:
    path = tmp_path / "store.duckdb"
    with TraceStore(path) as store:
        spans_of = _store_outdated(store, 3)
    nobody = run_cli("rebuild", "--store", path, "--tenant", "nobody")
    assert nobody.exit_code == 0, nobody.output
    assert nobody.stdout.startswith("tenant nobody has no traces in this store; the tenants with trajectories: default")
    assert "nothing to rebuild" in nobody.stdout
    largest = run_cli("rebuild", "--store", path, "--batch", "1000000")
    assert largest.exit_code == 0, largest.output
    assert largest.stdout.count("rebuilt 3 of 3 trace(s)") == 1
    with TraceStore(path, read_only=True) as store:
        assert _current_count(store, spans_of) == 3


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
            spans_of = _store_outdated(store, 3)
        subprocess.run(["mount", "-o", "remount,ro", str(mount)], check=True)
        read_only = run_cli("rebuild", "--store", mount / "store.duckdb")
        assert read_only.exit_code == 2, read_only.output
        assert f"cannot open store {mount / 'store.duckdb'}" in read_only.stderr
        assert "Read-only file system" in read_only.stderr
        with TraceStore(mount / "store.duckdb", read_only=True) as store:
            assert _current_count(store, spans_of) == 0


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
