"""A store's DuckDB connection draws no progress bar. DuckDB's Python client turns it on outside pytest, and draws
it on standard output for any query past two seconds: a soak run found it in a lake receiver's log, and it would
land in the middle of what ``tracegrade sql`` or ``export`` writes to standard output. The setting is read in a
process of its own, as the commands and the receiver open stores (under pytest DuckDB leaves it off); so is the
in-memory database of SQL assertions."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import pg_cluster
from tests.support.store_kinds import STORE_KINDS, location, open_store

pg_server = pg_cluster.pg_server  # the session's PostgreSQL (a fixture), for the lake

_SANDBOX = """
from tracegrade.criteria.trajectory_db import TrajectorySandbox
print(TrajectorySandbox()._con.execute("SELECT current_setting('enable_progress_bar')").fetchone()[0])
"""
_SHOW = """
import sys
from tracegrade.store.backend import open_store
with open_store(sys.argv[1], read_only=sys.argv[2] == "ro", data_path=sys.argv[3] or None) as store:
    # the query gate refuses current_setting() to queries: read it on the store's own connection
    print(store._con.execute("SELECT current_setting('enable_progress_bar')").fetchone()[0])
"""


def _progress_bar(where: str, read_only: bool, lake_data: Path | None = None) -> str:
    mode = "ro" if read_only else "rw"
    shown = subprocess.run(
        [sys.executable, "-c", _SHOW, where, mode, str(lake_data or "")], capture_output=True, text=True, check=False
    )
    assert shown.returncode == 0, shown.stderr
    return shown.stdout.strip()


@STORE_KINDS
def test_a_store_draws_no_progress_bar(store_kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    with open_store(store_kind, tmp_path, request) as store:
        where = location(store)
    lake_data = tmp_path / "lake-data" if store_kind == "lake" else None
    assert _progress_bar(where, read_only=False, lake_data=lake_data) == "False"
    assert _progress_bar(where, read_only=True, lake_data=lake_data) == "False"


def test_the_sql_assertions_sandbox_draws_no_progress_bar() -> None:
    shown = subprocess.run([sys.executable, "-c", _SANDBOX], capture_output=True, text=True, check=False)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.strip() == "False"
