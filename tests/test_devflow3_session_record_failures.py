"""A pytest session that cannot record its run says why in one problem line and fails, its report files
written, instead of ending in pytest's INTERNALERROR traceback; a lake given to ``--tracegrade-store`` is recorded
in as a lake (its data path from ``TRACEGRADE_LAKE_DATA``), not looked for as a file.

Real pytest sessions (``pytester``) on test_pytest_plugin_store's project; a real ``tracegrade serve`` killed
with SIGKILL, a real process holding its store, another program on the port the server announced; a real
PostgreSQL for the lake."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import pg_cluster
from tests.support.pg_cluster import PgServer
from tests.support.stale_announcement import held_with_stale_announcement, ssh_banner
from tests.test_pytest_plugin_store import _session, project  # noqa: F401  (project: the fixture)
from tracegrade.evaluation.run_records import list_runs
from tracegrade.store.lake import LakeStore

pytest_plugins = ["pytester"]
pg_server = pg_cluster.pg_server  # the session's PostgreSQL (a fixture), for the lake


@pytest.fixture
def store_held_with_a_stale_announcement(project: pytest.Pytester) -> Iterator[Path]:  # noqa: F811
    """The project's store held by another process while its sidecar still names the port of a server that was
    killed, and another program (not HTTP) now listens there."""
    with held_with_stale_announcement(project.path / "runs.duckdb", ssh_banner) as store:
        yield store


def test_a_store_that_answers_no_http_is_a_problem_line_and_the_reports_stay(
    project: pytest.Pytester,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
    store_held_with_a_stale_announcement: Path,
) -> None:
    result = _session(project, monkeypatch, [], "--tracegrade-report", "reports")
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    result.assert_outcomes(passed=12)
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # every test passed; the run was not recorded
    # what answers there is no server: the store is said to be held, as when nothing answers
    result.stdout.fnmatch_lines(
        [
            "problem: the session's run could not be recorded in runs.duckdb: store runs.duckdb is held by another "
            "process (pid *); start `tracegrade serve --store runs.duckdb` or stop that process"
        ]
    )
    assert sorted(p.suffix for p in (project.path / "reports").iterdir()) == [".html", ".json", ".xml"]


def test_a_lake_store_is_recorded_in_as_a_lake(
    project: pytest.Pytester,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
    pg_server: PgServer,
) -> None:
    location = f"ducklake:postgres:{pg_server.new_database()}"
    monkeypatch.setenv("TRACEGRADE_LAKE_DATA", str(project.path / "lake-data"))
    result = project.runpytest("-p", "no:cacheprovider", "--tracegrade-store", location)
    assert result.ret == 0, result.stdout.str()
    with LakeStore(location, data_path=project.path / "lake-data") as lake:
        [(run_id, passed)] = [(r.run_id, r.passed_cases) for r in list_runs(lake)]
    assert passed == 12
    result.stdout.fnmatch_lines([f"recorded run {run_id} in {location}"])
    # a lake whose catalog is out of reach: said as such (not "store not found"), the session failed
    gone = "ducklake:postgres:host=127.0.0.1 port=1 dbname=nowhere user=nobody"
    missing = project.runpytest("-p", "no:cacheprovider", "--tracegrade-store", gone, "--tracegrade-report", "reports")
    assert missing.ret == pytest.ExitCode.TESTS_FAILED
    missing.stdout.fnmatch_lines([f"problem: the session's run could not be recorded in {gone}: cannot open lake *"])
    assert "store not found" not in missing.stdout.str()
    assert (project.path / "reports").is_dir()
