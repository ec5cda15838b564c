"""One ``tracegrade maintain`` pass at a time on a lake, against a real PostgreSQL and real ``maintain`` processes.

Two passes at once used to race: one failed with DuckLake's serialisation error (exit 1, "maintenance failed").
Now a pass holds an advisory lock in the catalog's database, and a pass that finds it taken says who holds it
and exits 2, the code of every store command that finds its store busy. The tests hold the lock
deterministically from their own process (a plain connection, or the lock ``maintain`` itself takes) while a
real ``maintain`` process runs.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from tests.support import pg_cluster
from tests.support.pg_cluster import PgServer
from tests.support.store_records import make_span
from tests.support.waiting import wait_until
from tracegrade.store.lake import LakeStore
from tracegrade.store.lake_location import catalog_conninfo, redacted
from tracegrade.store.lake_maintenance import MAINTENANCE_KEY, maintenance_lock

pg_server = pg_cluster.pg_server  # the session's PostgreSQL (a fixture)
LAUNCH = "from tracegrade.cli.main import main; main()"
REPO = Path(__file__).resolve().parent.parent
SUMMARY = "live data files"  # what a pass that went through prints


@pytest.fixture
def lake(pg_server: PgServer, tmp_path: Path) -> tuple[str, Path]:
    location, data = f"ducklake:postgres:{pg_server.new_database()}", tmp_path / "lake-data"
    with LakeStore(location, data_path=data) as store:
        store.write([make_span(1, 10, name="agent"), make_span(1, 11, parent=10)])
    return location, data


def _maintain_args(lake: tuple[str, Path], *extra: str) -> list[str]:
    location, data = lake
    return [sys.executable, "-c", LAUNCH, "maintain", "--store", location, "--lake-data", str(data), *extra]


def _maintain(lake: tuple[str, Path]) -> subprocess.CompletedProcess[str]:
    env = {name: value for name, value in os.environ.items() if not name.startswith("TRACEGRADE_")}
    return subprocess.run(_maintain_args(lake), cwd=REPO, env=env, capture_output=True, text=True, timeout=120)


def test_maintain_while_another_session_holds_the_lock_exits_2_naming_it(lake: tuple[str, Path]) -> None:
    with psycopg.connect(catalog_conninfo(lake[0]), autocommit=True, application_name="by hand") as holder:
        holder.execute("SELECT pg_advisory_lock(%s)", [MAINTENANCE_KEY])
        (backend,) = holder.execute("SELECT pg_backend_pid()").fetchone()  # type: ignore[misc]
        refused = _maintain(lake)
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert (
            f"another maintain is running on lake {redacted(lake[0])} (PostgreSQL backend pid {backend}, "
            "application 'by hand', started " in refused.stderr
        )
        assert refused.stderr.rstrip().endswith("try again later"), refused.stderr
        assert SUMMARY not in refused.stdout
        assert "Traceback" not in refused.stderr
    done = _maintain(lake)  # the session ended, and with it the lock
    assert done.returncode == 0, done.stdout + done.stderr
    assert SUMMARY in done.stdout


def test_maintain_names_the_maintain_process_that_holds_the_lock(lake: tuple[str, Path]) -> None:
    with maintenance_lock(catalog_conninfo(lake[0]), redacted(lake[0])):
        refused = _maintain(lake)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert f"(pid {os.getpid()} on {socket.gethostname()}, started " in refused.stderr, refused.stderr
    assert " UTC): one pass runs at a time" in refused.stderr


def test_maintain_every_skips_the_passes_the_lock_is_taken_and_goes_on_after(
    lake: tuple[str, Path], tmp_path: Path
) -> None:
    log = tmp_path / "maintain.log"
    env = {name: value for name, value in os.environ.items() if not name.startswith("TRACEGRADE_")}
    with maintenance_lock(catalog_conninfo(lake[0]), redacted(lake[0])):
        with log.open("ab") as out:
            process = subprocess.Popen(_maintain_args(lake, "--every", "1s"), cwd=REPO, env=env, stdout=out, stderr=out)
        try:
            wait_until(
                lambda: "this one tries again at the next interval" in log.read_text() or process.poll() is not None,
                "a pass to find the lock taken",
                90,
            )
            assert process.poll() is None, log.read_text()
            assert SUMMARY not in log.read_text()
        except BaseException:
            process.kill()
            process.wait(60)
            raise
    try:
        wait_until(lambda: SUMMARY in log.read_text() or process.poll() is not None, "a pass once released", 90)
        assert process.poll() is None, log.read_text()
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            process.wait(60)
    text = log.read_text()
    assert process.returncode == 0, text
    assert "Traceback" not in text and "failed" not in text, text
