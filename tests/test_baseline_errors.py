"""A baseline the pytest plugin cannot read ends the session in a usage line that says why, never in pytest's
INTERNALERROR traceback: a client library's error (here pyarrow's, on a stored run whose packed cases were damaged)
as much as tracegrade's own; and a first session gated against a lake that does not exist yet is told how a
pytest session creates it.

Real pytest sessions (``pytester``) on test_pytest_plugin_store's project, a real DuckDB store file damaged with
DuckDB itself, and a lake on a real PostgreSQL."""

from __future__ import annotations

import duckdb
import pytest

from tests.support import pg_cluster
from tests.support.pg_cluster import PgServer
from tests.test_pytest_plugin_store import _runs, _session, project  # noqa: F401  (project: the fixture)
from tracegrade.evaluation.run_records import list_runs
from tracegrade.store.lake import LakeStore
from tracegrade.store.lake_location import redacted

pytest_plugins = ["pytester"]
pg_server = pg_cluster.pg_server  # the session's PostgreSQL (a fixture), for the lake


def test_a_stored_baseline_a_library_cannot_read_is_a_usage_line(
    project: pytest.Pytester,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert _session(project, monkeypatch, []).ret == 0
    [(run_id, _)] = _runs(project)
    with duckdb.connect(str(project.path / "runs.duckdb")) as con:  # a damaged copy: its packed cases cut short
        (packed,) = con.execute("SELECT case_results FROM eval_runs WHERE run_id = ?", [run_id]).fetchone()  # type: ignore[misc]
        assert packed is not None and len(packed) > 12
        con.execute("UPDATE eval_runs SET case_results = ? WHERE run_id = ?", [packed[:12], run_id])
    result = _session(project, monkeypatch, [], "--tracegrade-baseline", "latest")
    output = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in output and "Traceback" not in output, output
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --tracegrade-baseline 'latest': reading it from runs.duckdb failed: *"])
    assert len(_runs(project)) == 1  # a session refused at the start records nothing


def test_a_first_session_gated_against_a_new_lake_is_told_how_a_session_creates_it(
    project: pytest.Pytester,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
    pg_server: PgServer,
) -> None:
    location = f"ducklake:postgres:{pg_server.new_database()}"
    lake_data = project.path / "lake-data"
    monkeypatch.setenv("TRACEGRADE_LAKE_DATA", str(lake_data))
    args = ("-p", "no:cacheprovider", "--tracegrade-store", location)
    refused = project.runpytest(*args, "--tracegrade-baseline", "latest")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines(
        [
            f"ERROR: --tracegrade-baseline 'latest': lake {redacted(location)} does not exist yet (its database holds "
            f"no lake), so it holds no run to gate against: a session run with --tracegrade-store {redacted(location)} "
            "and without --tracegrade-baseline creates it and records its run with TRACEGRADE_LAKE_DATA set to *"
        ]
    )
    assert "--lake-data" not in refused.stderr.str()  # the CLI's option: no pytest session takes it
    # as it says: the first session creates the lake and records its run, the next one is gated against that run
    assert project.runpytest(*args).ret == 0
    with LakeStore(location, data_path=lake_data) as lake:
        [first_run] = [r.run_id for r in list_runs(lake)]
    gated = project.runpytest(*args, "--tracegrade-baseline", "latest")
    assert gated.ret == 0, gated.stdout.str() + gated.stderr.str()
    gated.stdout.fnmatch_lines([f"baseline {first_run}: gate pass (12 paired cases, alpha 0.05)"])


def test_a_first_session_gated_against_a_new_store_file_is_told_how_a_session_creates_it(
    project: pytest.Pytester,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    refused = _session(project, monkeypatch, [], "--tracegrade-baseline", "latest")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines(
        [
            "ERROR: --tracegrade-baseline 'latest': store runs.duckdb does not exist yet, so it holds no run to gate "
            "against: a session run with --tracegrade-store runs.duckdb and without --tracegrade-baseline creates it "
            "and records its run; later sessions gate against that run"
        ]
    )
    assert "tracegrade serve" not in refused.stderr.str()
    assert not (project.path / "runs.duckdb").exists()
