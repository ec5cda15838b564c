"""A pytest session's ``--tracegrade-store`` in a directory that does not exist yet (a CI job's first session on
``.tracegrade/runs.duckdb`` in a fresh checkout) is created with its directories, as ``tracegrade serve`` and
``import`` create a store, and the run is recorded in it. Before, the session failed with DuckDB's "Cannot open
file ...: No such file or directory" on every fresh checkout. A real pytest session (``pytester``)."""

from __future__ import annotations

import pytest

from tests.test_pytest_plugin_store import project  # noqa: F401  (project: the fixture)
from tracegrade.evaluation.run_records import list_runs
from tracegrade.store import TraceStore

pytest_plugins = ["pytester"]


def test_the_first_session_creates_the_stores_directories(project: pytest.Pytester) -> None:  # noqa: F811
    result = project.runpytest("-p", "no:cacheprovider", "--tracegrade-store", ".tracegrade/ci/runs.duckdb")
    assert result.ret == 0, result.stdout.str()
    with TraceStore(project.path / ".tracegrade" / "ci" / "runs.duckdb") as store:
        [(run_id, passed)] = [(r.run_id, r.passed_cases) for r in list_runs(store)]
    assert passed == 12
    result.stdout.fnmatch_lines([f"recorded run {run_id} in .tracegrade/ci/runs.duckdb"])
