"""Trajectories an older mapper built are known and rebuilt: each ``traces`` row carries the mapper revision that
built it (NULL before schema version 13), `tracegrade rebuild` maps the out-of-date ones again (every one with
--all, one tenant's with --tenant, saying so when the store holds nothing of that tenant), in steps, on a file and
on a lake; a store made by the previous schema opens and migrates, its trajectories out of date; the receiver says
at start how many are out of date and what rebuilds them, and a rebuild of the file it holds is its to make
(tests/test_rebuild_through_server.py tests that path under load).

A trajectory "built by the older mapper" is the current mapper's without its ``within_tool`` marks (what the
mapper derived before revision 1), stored with the revision an older tracegrade wrote."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from importlib import resources
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest

from tests.support import pg_cluster
from tests.support.grading_cli import run_cli
from tests.support.lake_serve import LakeServerProcess
from tests.support.mapper_spans import adk_agent_tool_trace
from tests.support.server_process import ServerProcess
from tests.support.store_kinds import STORE_KINDS, location, open_store
from tests.support.waiting import wait_until
from tracegrade.errors import StoreMissingError
from tracegrade.evaluation.selection import load_executions
from tracegrade.models.dataset import StepType
from tracegrade.store import TraceStore
from tracegrade.store.lake import LakeStore
from tracegrade.store.schema import MIGRATIONS, SCHEMA_VERSION
from tracegrade.store.tenancy import DEFAULT_TENANT
from tracegrade.store.tenant_scope import TenantStore
from tracegrade.store.trajectories import TrajectoryRows, execution_rows
from tracegrade.trajectory import MAPPER_REVISION, map_spans

pg_server = pg_cluster.pg_server  # the session's PostgreSQL (a fixture)

OLD, STALE_REVISION, CURRENT = "a" * 32, "b" * 32, "c" * 32  # trace ids: built before revisions, at 0, now


def _old_rule_rows(trace_id: str, spans: list[Any], updated_at: Any) -> dict[str, pa.Table]:
    """The trajectory rows of ``spans`` as the mapper derived them before it marked calls made inside another tool
    call, as a tracegrade of the previous schema wrote them (no ``mapper_revision``)."""
    execution = map_spans(spans)
    for step in execution.trajectory:
        step.metadata.pop("within_tool", None)
    rows = TrajectoryRows()
    execution_rows(trace_id, execution, spans, updated_at, rows)
    tables = rows.to_arrow()
    tables["traces"] = tables["traces"].drop_columns(["mapper_revision"])
    return tables


def _store_old_trajectories(
    store: TraceStore, trace_ids: list[str], revision: int | None, tenant: str = DEFAULT_TENANT
) -> None:
    """Store each trace's spans (an ADK AgentTool run) and its trajectory by the older rule, stamped with
    ``revision`` (None: as every row built before schema version 13 reads)."""
    runs = {trace_id: adk_agent_tool_trace(trace_id) for trace_id in trace_ids}
    store.write([span for spans in runs.values() for span in spans], tenant=tenant)
    stamp = store.stamp()
    built = [_old_rule_rows(trace_id, spans, stamp) for trace_id, spans in runs.items()]
    tables = {name: pa.concat_tables([rows[name] for rows in built]) for name in built[0]}
    revisions = pa.array([revision] * len(trace_ids), pa.int32())
    tables["traces"] = tables["traces"].append_column("mapper_revision", revisions)
    _built(store, tables, trace_ids, tenant)


def _built(store: TraceStore, tables: dict[str, pa.Table], trace_ids: list[str], tenant: str = DEFAULT_TENANT) -> None:
    """Store ``tables`` as the traces' build, which their build queue then holds done (as a receiver's build does:
    a lake's queue, in its catalog, would have a receiver build them again)."""
    claim = store.builds.claim_traces([(tenant, trace_id) for trace_id in trace_ids])
    store.replace_trajectories(tables, clear=trace_ids, tenant=tenant)
    store.builds.finish(claim, built=True)


def _tool_steps(store: Any, trace_id: str) -> list[tuple[str, bool]]:
    """Each tool step of the stored trajectory, in order: its name, and whether it is marked made inside the
    forecaster's call (the span id ``within_tool`` names is that call's)."""
    (execution,) = load_executions(store, [trace_id]).values()
    steps = [step for step in execution.trajectory if step.step_type == StepType.TOOL]
    forecaster = next(step.metadata["span_id"] for step in steps if step.name == "forecaster")
    return [(step.name, step.metadata.get("within_tool") == forecaster) for step in steps]


OLD_RULE = [("forecaster", False), ("get_weather", False), ("lookup", False)]
NEW_RULE = [("forecaster", False), ("get_weather", True), ("lookup", False)]


def _revisions(store: Any) -> dict[str, Any]:
    return dict(store.query("SELECT trace_id, mapper_revision FROM traces").rows)


def _updated(store: Any) -> dict[str, Any]:
    return dict(store.query("SELECT trace_id, updated_at FROM traces").rows)


def _lake_args(store: TraceStore) -> list[str]:
    return ["--lake-data", str(store.data_path)] if isinstance(store, LakeStore) else []


def _reopened(store: TraceStore) -> TraceStore:
    if isinstance(store, LakeStore):
        return LakeStore(store.location, data_path=store.data_path)
    return TraceStore(store.path)


@STORE_KINDS
def test_rebuild_maps_the_trajectories_an_older_mapper_built_then_nothing_then_all_with_all(
    store_kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    store = open_store(store_kind, tmp_path, request)
    _store_old_trajectories(store, [OLD], None)
    _store_old_trajectories(store, [STALE_REVISION], 0)
    store.write(adk_agent_tool_trace(CURRENT))
    store.rebuild_trajectories([CURRENT])
    assert _revisions(store) == {OLD: None, STALE_REVISION: 0, CURRENT: MAPPER_REVISION}
    assert _tool_steps(store, OLD) == _tool_steps(store, STALE_REVISION) == OLD_RULE
    assert _tool_steps(store, CURRENT) == NEW_RULE
    built_before = _updated(store)
    where = location(store)
    store.close()

    first = run_cli("rebuild", "--store", where, *_lake_args(store))
    assert first.exit_code == 0, first.output
    assert f"2 trace(s), with mapper revision {MAPPER_REVISION}" in first.stdout
    assert "rebuilt 2 of 2 trace(s)" in first.stdout
    with _reopened(store) as reopened:
        assert _revisions(reopened) == dict.fromkeys([OLD, STALE_REVISION, CURRENT], MAPPER_REVISION)
        for trace_id in (OLD, STALE_REVISION, CURRENT):
            assert _tool_steps(reopened, trace_id) == NEW_RULE, trace_id
        after_first = _updated(reopened)
    assert after_first[CURRENT] == built_before[CURRENT]  # current already: not rebuilt
    assert all(after_first[t] > built_before[t] for t in (OLD, STALE_REVISION))

    second = run_cli("rebuild", "--store", where, *_lake_args(store))
    assert second.exit_code == 0, second.output
    assert "nothing to rebuild" in second.stdout
    with _reopened(store) as reopened:
        assert _updated(reopened) == after_first

    every = run_cli("rebuild", "--store", where, "--all", "--batch", "2", *_lake_args(store))
    assert every.exit_code == 0, every.output
    assert "rebuilt 2 of 3 trace(s)" in every.stdout and "rebuilt 3 of 3 trace(s)" in every.stdout  # two steps
    assert f"rebuilt the trajectories of 3 trace(s) with mapper revision {MAPPER_REVISION}" in every.stdout
    with _reopened(store) as reopened:
        after_all = _updated(reopened)
        assert _revisions(reopened) == dict.fromkeys([OLD, STALE_REVISION, CURRENT], MAPPER_REVISION)
    assert all(after_all[t] > after_first[t] for t in (OLD, STALE_REVISION, CURRENT))


def test_rebuild_of_one_tenant_leaves_the_others_out_of_date(tmp_path: Path) -> None:
    path = tmp_path / "store.duckdb"
    with TraceStore(path) as store:
        _store_old_trajectories(store, [OLD], None, tenant="acme")
        _store_old_trajectories(store, [OLD], None, tenant="umbrella")
    result = run_cli("rebuild", "--store", path, "--tenant", "acme")
    assert result.exit_code == 0, result.output
    assert "of tenant acme: 1 trace(s)" in result.stdout
    with TraceStore(path, read_only=True) as store:
        revisions = store.query("SELECT tenant, mapper_revision FROM traces ORDER BY tenant").rows
        assert revisions == [("acme", MAPPER_REVISION), ("umbrella", None)]
        assert _tool_steps(TenantStore(store, "acme"), OLD) == NEW_RULE
        assert _tool_steps(TenantStore(store, "umbrella"), OLD) == OLD_RULE


@STORE_KINDS
def test_rebuild_of_a_tenant_without_traces_says_so_and_names_the_tenants_that_have(
    store_kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    store = open_store(store_kind, tmp_path, request)
    _store_old_trajectories(store, [OLD], None, tenant="acme")
    _store_old_trajectories(store, [OLD], None, tenant="umbrella")
    store.write(adk_agent_tool_trace(CURRENT), tenant="waiting")  # spans only: its trajectory not built yet
    store.close()
    rebuild = ["rebuild", "--store", location(store), *_lake_args(store)]
    for every in ([], ["--all"]):
        result = run_cli(*rebuild, "--tenant", "nobody", *every)
        assert result.exit_code == 0, result.output  # as `traces`, `sql`, `forget` and `export` of such a tenant
        assert result.stdout.startswith(
            "tenant nobody has no traces in this store; the tenants with trajectories: acme, umbrella ("
        ), result.stdout
        assert "check the name given to --tenant; nothing to rebuild" in result.stdout
    waiting = run_cli(*rebuild, "--tenant", "waiting")  # a tenant the store has spans of
    assert waiting.exit_code == 0, waiting.output
    assert waiting.stdout.startswith("no trajectory of tenant waiting is built by an older mapper; nothing to")
    with _reopened(store) as reopened:  # nothing rebuilt, nothing built
        assert reopened.query("SELECT tenant, mapper_revision FROM traces ORDER BY tenant").rows == [
            ("acme", None),
            ("umbrella", None),
        ]
    assert run_cli(*rebuild, "--tenant", "acme").exit_code == 0
    current = run_cli(*rebuild, "--tenant", "acme")  # known, and current: said as before
    assert current.exit_code == 0, current.output
    assert current.stdout.startswith("no trajectory of tenant acme is built by an older mapper; nothing to rebuild")


@pytest.mark.parametrize(
    ("signum", "exit_code", "said"),
    [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated (SIGTERM)")],
    ids=["SIGINT", "SIGTERM"],
)
def test_a_rebuild_stopped_by_a_signal_keeps_its_steps_and_the_same_command_goes_on(
    tmp_path: Path, signum: int, exit_code: int, said: str
) -> None:
    path, many = tmp_path / "store.duckdb", [f"{n:032x}" for n in range(1, 61)]
    with TraceStore(path) as store:
        _store_old_trajectories(store, many, None)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRACEGRADE_")}
    launch = [sys.executable, "-c", "from tracegrade.cli.main import main; main()"]
    command = [*launch, "rebuild", "--store", str(path), "--batch", "1"]
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    assert child.stdout is not None
    assert "60 trace(s)" in child.stdout.readline()
    assert child.stdout.readline() == "rebuilt 1 of 60 trace(s)\n"
    child.send_signal(signum)  # 59 steps to go: it stops after the one in progress
    rest, errors = child.communicate(timeout=60)
    assert child.returncode == exit_code, errors
    reported = int(rest.splitlines()[-1].split()[1]) if rest else 1  # its last "rebuilt N of 60"
    assert reported < 60
    assert f"{said}: rebuilt {reported} of 60 trace(s); run the same command again" in errors
    assert "Traceback" not in errors
    with TraceStore(path, read_only=True) as store:  # every step it reported is committed, and none half-done
        current = [t for t, r in _revisions(store).items() if r == MAPPER_REVISION]
        assert len(current) == reported
        assert all(_tool_steps(store, t) == NEW_RULE for t in current)

    again = run_cli("rebuild", "--store", path)
    assert again.exit_code == 0, again.output
    assert f"{60 - reported} trace(s)" in again.stdout
    with TraceStore(path, read_only=True) as store:
        assert set(_revisions(store).values()) == {MAPPER_REVISION}
        assert all(_tool_steps(store, t) == NEW_RULE for t in many)


def test_rebuild_refuses_a_store_that_is_not_there_and_creates_none(
    pg_server: pg_cluster.PgServer, tmp_path: Path
) -> None:
    missing = tmp_path / "typo.duckdb"
    result = run_cli("rebuild", "--store", missing)
    assert result.exit_code == 2 and "store not found" in result.output
    assert not missing.exists()
    lake = f"ducklake:postgres:{pg_server.new_database()}"
    result = run_cli("rebuild", "--store", lake)
    assert result.exit_code == 2 and "add --lake-data PATH" in result.output
    result = run_cli("rebuild", "--store", lake, "--lake-data", tmp_path / "data")
    assert result.exit_code == 2 and "cannot open lake" in result.output
    with pytest.raises(StoreMissingError):  # still no lake there
        LakeStore(lake, data_path=tmp_path / "data", create=False)


def _previous_schema_file(path: Path, donor: Path) -> None:
    """A store file exactly as the previous schema (version 12) left it, with ``donor``'s rows."""
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE schema_version (version INTEGER PRIMARY KEY, description VARCHAR, applied_at TIMESTAMP)")
    for migration in MIGRATIONS[: SCHEMA_VERSION - 1]:
        con.execute(resources.files("tracegrade.store").joinpath(migration.script).read_text(encoding="utf-8"))
        con.execute("INSERT INTO schema_version VALUES (?, 'previous', now())", [migration.version])
    con.execute(f"ATTACH '{donor}' AS donor (READ_ONLY)")
    for table in ("spans", "logs", "traces", "tool_calls", "llm_calls", "node_visits"):
        left_out = " EXCLUDE (mapper_revision)" if table == "traces" else ""
        con.execute(f"INSERT INTO main.{table} BY NAME SELECT *{left_out} FROM donor.{table}")
    con.close()


def test_a_store_file_of_the_previous_schema_migrates_its_trajectories_out_of_date(tmp_path: Path) -> None:
    donor, path = tmp_path / "donor.duckdb", tmp_path / "previous.duckdb"
    with TraceStore(donor) as store:
        _store_old_trajectories(store, [OLD], None)
    _previous_schema_file(path, donor)
    refused = run_cli("traces", "--store", path)  # a read-only open does not migrate: it says how to
    assert refused.exit_code == 2 and "Open it once read-write" in refused.output

    result = run_cli("rebuild", "--store", path)
    assert result.exit_code == 0, result.output
    assert "rebuilt 1 of 1 trace(s)" in result.stdout
    with TraceStore(path, read_only=True) as store:
        assert store.query("SELECT max(version) FROM schema_version").rows == [(SCHEMA_VERSION,)]
        assert _revisions(store) == {OLD: MAPPER_REVISION}
        assert _tool_steps(store, OLD) == NEW_RULE


def test_a_lake_of_the_previous_schema_migrates_its_receiver_notes_it_and_a_rebuild_beside_it_maps_it(
    pg_server: pg_cluster.PgServer, tmp_path: Path
) -> None:
    where, data = f"ducklake:postgres:{pg_server.new_database()}", tmp_path / "data"
    with LakeStore(where, data_path=data) as lake:  # the lake as version 12 made it, with a trajectory
        lake._con.execute("ALTER TABLE lake.raw.traces DROP COLUMN mapper_revision")
        lake._con.execute(f"DELETE FROM lake.main.schema_version WHERE version >= {SCHEMA_VERSION}")
        spans = adk_agent_tool_trace(OLD)
        lake.write(spans)
        _built(lake, _old_rule_rows(OLD, spans, lake.stamp()), [OLD])
    with LakeServerProcess(where, data, tmp_path / "journal") as server:  # migrates the lake as it opens it
        note = "1 stored trace(s) hold a trajectory built by an older"
        wait_until(lambda: note in server.log(), "the start note")
        assert "`tracegrade rebuild --store ducklake:postgres:" in server.log()
        assert f"--lake-data {data}` rebuilds them beside the receivers" in server.log()
        with LakeStore(where, read_only=True) as lake:
            assert lake.query("SELECT max(version) FROM schema_version").rows == [(SCHEMA_VERSION,)]
            assert _revisions(lake) == {OLD: None}
        result = run_cli("rebuild", "--store", where, "--lake-data", data)  # beside the running receiver
        assert result.exit_code == 0, result.output
        assert server.terminate() == 0
    with LakeStore(where, read_only=True) as lake:
        assert _revisions(lake) == {OLD: MAPPER_REVISION}
        assert _tool_steps(lake, OLD) == NEW_RULE


def test_a_receiver_says_at_start_what_is_out_of_date_and_rebuilds_its_file_when_asked(tmp_path: Path) -> None:
    path = tmp_path / "store.duckdb"
    with TraceStore(path) as store:
        _store_old_trajectories(store, [OLD], None)
        _store_old_trajectories(store, [STALE_REVISION], 0)
    with ServerProcess(path) as server:
        wait_until(lambda: "2 stored trace(s) hold a trajectory built by an older" in server.log(), "the start note")
        assert f"`tracegrade rebuild --store {path}` has this receiver rebuild them" in server.log()
        assert server.terminate() == 0
    with TraceStore(path, read_only=True) as store:
        assert _revisions(store) == {OLD: None, STALE_REVISION: 0}  # the receiver rebuilt nothing by itself
        assert _tool_steps(store, OLD) == OLD_RULE
    with ServerProcess(path) as server:
        rebuilt = run_cli("rebuild", "--store", path)
        assert rebuilt.exit_code == 0, rebuilt.output
        assert f"by the server at {server.http_url}: 2 trace(s)" in rebuilt.stdout
        assert server.terminate() == 0
    with TraceStore(path, read_only=True) as store:
        assert _revisions(store) == {OLD: MAPPER_REVISION, STALE_REVISION: MAPPER_REVISION}
        assert _tool_steps(store, OLD) == _tool_steps(store, STALE_REVISION) == NEW_RULE
