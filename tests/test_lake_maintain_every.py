"""``tracegrade maintain --every`` on a lake after a pass that left its store unusable, against a real PostgreSQL
and a real ``maintain`` process: the next pass opens the lake again and goes on.

Before, the process kept the store it opened at start for good. A pass that met the catalog dropping its
connections (PostgreSQL restarted, a proxy's idle timeout) marks a lake failed, and a DuckLake commit that ends
in an internal error invalidates the DuckDB database: every later pass then failed the same way ("failed and
must be reopened", "database has been invalidated") until someone restarted it, while old traces piled up.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import pg_cluster
from tests.support.pg_cluster import PgServer
from tests.support.store_records import make_span, trace_hex
from tests.support.waiting import wait_until
from tracegrade.store.lake import LakeStore
from tracegrade.store.lake_location import catalog_conninfo

pg_server = pg_cluster.pg_server  # the session's PostgreSQL (a fixture)
REPO = Path(__file__).resolve().parent.parent
LAUNCH = "from tracegrade.cli.main import main; main()"


@pytest.fixture
def lake(pg_server: PgServer, tmp_path: Path) -> tuple[str, Path]:
    return f"ducklake:postgres:{pg_server.new_database()}", tmp_path / "lake-data"


def _write_trace(location: str, data: Path, trace: int) -> None:
    with LakeStore(location, data_path=data) as store:
        store.write([make_span(trace, trace * 10, name="agent"), make_span(trace, trace * 10 + 1, parent=trace * 10)])


def _traces(location: str) -> list[str]:
    with LakeStore(location, read_only=True) as reader:
        return [row[0] for row in reader.query("SELECT DISTINCT trace_id FROM spans ORDER BY 1").rows]


def test_maintain_every_opens_the_lake_again_after_a_pass_that_failed_it(
    lake: tuple[str, Path], pg_server: PgServer, tmp_path: Path
) -> None:
    location, data = lake
    database = catalog_conninfo(location).rsplit("dbname=", 1)[1].split()[0]
    _write_trace(location, data, 1)
    log = tmp_path / "maintain.log"
    args = [
        "maintain",
        "--store",
        location,
        "--lake-data",
        str(data),
        "--every",
        "1s",
        "--retain",
        "1s",
        "--keep",
        "0s",
    ]
    env = {name: value for name, value in os.environ.items() if not name.startswith("TRACEGRADE_")}
    with log.open("ab") as out:
        process = subprocess.Popen([sys.executable, "-c", LAUNCH, *args], cwd=REPO, stdout=out, stderr=out, env=env)
    try:
        # the first trace expires: the pass held the write gate, on its own connection to the catalog
        wait_until(lambda: "expired 1 trace(s)" in log.read_text() or process.poll() is not None, "a first expiry", 90)
        assert process.poll() is None, log.read_text()
        # PostgreSQL ends tracegrade's own connections (the write gate's among them), as a restart or a proxy
        # would; the lake's next write through the gate marks the store failed
        pg_server.psql(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            f"WHERE datname = '{database}' AND application_name = 'tracegrade'"
        )
        _write_trace(location, data, 2)  # another trace to expire, once quiet for a second
        wait_until(
            lambda: log.read_text().count("expired 1 trace(s)") >= 2 or process.poll() is not None,
            "the second trace to expire, after the failed pass",
            90,
        )
        assert process.poll() is None, log.read_text()
        assert _traces(location) == []
        assert trace_hex(2) not in log.read_text()  # the log names no trace, only counts
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            process.wait(60)
    text = log.read_text()
    assert "Traceback" not in text, text
