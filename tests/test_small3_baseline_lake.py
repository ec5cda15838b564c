"""``--tracegrade-baseline`` looks its run up in a lake given to ``--tracegrade-store`` (``ducklake:postgres:...``)
as in a store file: the location stays the string it was given, never a path to look for.

Real pytest sessions, each in a process of its own, on test_pytest_plugin_store's project, with a lake on a real
PostgreSQL and its data path from ``TRACEGRADE_LAKE_DATA``."""

from __future__ import annotations

import pytest

from tests.support import pg_cluster
from tests.support.pg_cluster import PgServer
from tests.test_pytest_plugin_store import CITIES, project  # noqa: F401  (project: the fixture)
from tracegrade.evaluation.run_records import list_runs
from tracegrade.store.lake import LakeStore

pytest_plugins = ["pytester"]
pg_server = pg_cluster.pg_server  # the session's PostgreSQL (a fixture), for the lake


def test_a_baseline_is_looked_up_in_a_lake(
    project: pytest.Pytester,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
    pg_server: PgServer,
) -> None:
    location = f"ducklake:postgres:{pg_server.new_database()}"
    lake_data = project.path / "lake-data"
    monkeypatch.setenv("TRACEGRADE_LAKE_DATA", str(lake_data))
    args = ("-p", "no:cacheprovider", "--tracegrade-store", location)
    first = project.runpytest_subprocess(*args)
    assert first.ret == 0, first.stdout.str()
    with LakeStore(location, data_path=lake_data) as lake:
        [first_run] = [r.run_id for r in list_runs(lake)]

    # nine of twelve cases regressed against the lake's latest run: significant, the session fails
    monkeypatch.setenv("BROKEN_CITIES", ",".join(CITIES[3:]))
    gated = project.runpytest_subprocess(*args, "--tracegrade-baseline", "latest")
    assert gated.ret == pytest.ExitCode.TESTS_FAILED, gated.stdout.str() + gated.stderr.str()
    gated.stdout.fnmatch_lines(
        [
            f"baseline {first_run}: gate fail (12 paired cases, alpha 0.05)",
            "  REGRESSED cases: pass rate 100% -> 25% (9 pass->fail, 0 fail->pass, *",
        ]
    )
    assert "not found" not in gated.stdout.str() + gated.stderr.str()
    with LakeStore(location, data_path=lake_data) as lake:
        assert len(list_runs(lake)) == 2  # gated, then recorded


def test_a_baseline_in_a_lake_out_of_reach_is_a_usage_error_naming_the_lake(
    project: pytest.Pytester,  # noqa: F811
) -> None:
    gone = "ducklake:postgres:host=127.0.0.1 port=1 dbname=nowhere user=nobody"
    refused = project.runpytest_subprocess(
        "-p", "no:cacheprovider", "--tracegrade-store", gone, "--tracegrade-baseline", "latest"
    )
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines(["*--tracegrade-baseline 'latest': cannot open lake *"])
    assert "store not found" not in refused.stderr.str()
