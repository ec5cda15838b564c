"""Where a lake store's DuckDB spills: every connection (the first and each renewed one) spills to a directory of its
own under the system's temp directory, never the working directory, and the directory goes with its connection (a
killed process's, with the next lake store that opens on the machine).

A receiver started from a directory it cannot write (``/`` under systemd, as a service user) could not run a query
that spills; and stores in processes started from one directory shared ``.tmp`` (and ``.tmp-1``, ``.tmp-2`` … after
renewals), where DuckDB names its spill files alike and removes the directory when a database closes: one process's
query read another's spill file, or found it gone (IO Error)."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.support import pg_cluster
from tests.support.pg_cluster import PgServer
from tests.support.small_fs import small_filesystem
from tests.support.store_records import make_span
from tests.support.waiting import wait_until
from tracegrade.store.lake import LakeStore

pg_server = pg_cluster.pg_server  # the session's PostgreSQL (a fixture)

# a sort of about 300 MB of strings: it spills under the 64 MB memory limit below
_SPILLING_QUERY = (
    "SELECT count(*) AS n, sum(hash(s)) AS h FROM "
    "(SELECT repeat('x', 60) || i::VARCHAR AS s FROM range(3000000) t(i) ORDER BY s)"
)


def _spill_directory(store: LakeStore) -> Path:
    (setting,) = store._con.execute("SELECT current_setting('temp_directory')").fetchone()  # type: ignore[misc]
    return Path(setting)


def test_a_lake_store_started_from_a_directory_it_cannot_write_runs_queries_that_spill(
    pg_server: PgServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    location = f"ducklake:postgres:{pg_server.new_database()}"
    LakeStore(location, data_path=tmp_path / "data").close()  # the lake, made from a writable directory
    monkeypatch.setattr(LakeStore, "renew_after_commits", 1)
    with small_filesystem(tmp_path / "cwd", "1m") as cwd:
        # read-only for root too, as a service user's working directory is for it
        subprocess.run(["mount", "-o", "remount,ro", str(cwd)], check=True)
        monkeypatch.chdir(cwd)
        store = LakeStore(location, data_path=tmp_path / "data", memory_limit="64MB")
        try:
            (n, _), *_ = store.query(_SPILLING_QUERY).rows
            assert n == 3_000_000
            for trace in range(3):  # renewed before the second and third commits
                store.write([make_span(trace, 1)])
            assert store.renewals == 2
            (n, _), *_ = store.query(_SPILLING_QUERY).rows
            assert n == 3_000_000
        finally:
            store.close()
            monkeypatch.chdir(tmp_path)


def test_each_connection_spills_to_a_directory_of_its_own_removed_with_it(
    pg_server: PgServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    location = f"ducklake:postgres:{pg_server.new_database()}"
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(LakeStore, "renew_after_commits", 1)
    first = LakeStore(location, data_path=tmp_path / "data", memory_limit="64MB")
    second = LakeStore(location, data_path=tmp_path / "data", memory_limit="64MB")  # as another receiver's
    try:
        used = [_spill_directory(first), _spill_directory(second)]
        for store in (first, second):
            store.query(_SPILLING_QUERY)
            for trace in range(2):
                store.write([make_span(trace, 1)])
            assert store.renewals == 1
            store.query(_SPILLING_QUERY)
            used.append(_spill_directory(store))
        assert len(set(used)) == 4, used  # no two connections share one
        assert not any(path.is_relative_to(tmp_path) for path in used)  # nothing in the working directory
        assert not used[0].exists() and not used[1].exists()  # renewed: the old connection's went with it
        assert sorted(os.listdir(tmp_path)) == ["data"]
    finally:
        first.close()
        second.close()
    assert [path for path in used if path.exists()] == []


def test_a_process_that_ends_without_closing_its_lake_store_leaves_no_spill_directory(
    pg_server: PgServer, tmp_path: Path
) -> None:
    location = f"ducklake:postgres:{pg_server.new_database()}"
    temp = tmp_path / "tmp"
    temp.mkdir()
    opened = (
        "import sys\n"
        "from tracegrade.store.lake import LakeStore\n"
        "LakeStore.renew_after_commits = 1\n"
        "from tests.support.store_records import make_span\n"
        f"store = LakeStore({location!r}, data_path={str(tmp_path / 'data')!r}, memory_limit='64MB')\n"
        "for trace in range(2):\n"
        "    store.write([make_span(trace, 1)])\n"
        f"store.query({_SPILLING_QUERY!r})\n"
        "print(store.renewals)\n"  # and ends with the store open
    )
    done = subprocess.run(
        [sys.executable, "-c", opened],
        cwd=tmp_path,
        env={**os.environ, "TMPDIR": str(temp), "PYTHONPATH": str(Path(__file__).parent.parent)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "1"
    assert sorted(os.listdir(temp)) == []
    assert sorted(os.listdir(tmp_path)) == ["data", "tmp"]


# holds a lake store whose queries spill, one after another, until the file named stop exists; then closes it
_SPILLING_HOLDER = f"""
import sys
from pathlib import Path
from tracegrade.store.lake import LakeStore
location, data, stop = sys.argv[1:]
store = LakeStore(location, data_path=data, memory_limit="64MB")
print(store._spill, flush=True)
while not Path(stop).exists():
    store.query({_SPILLING_QUERY!r})
store.close()
"""


def _holds_spill_files(spill: Path) -> bool:
    return any(spill.glob("duckdb_temp*"))


def test_a_store_opening_removes_the_spill_directory_of_a_killed_process_and_no_live_one(
    pg_server: PgServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process SIGKILLed (the OOM killer) while its queries spill removes nothing; the next lake store to open on
    the machine removes its directory, and leaves alone the one another receiver is spilling into right now."""
    location, data = f"ducklake:postgres:{pg_server.new_database()}", tmp_path / "data"
    LakeStore(location, data_path=data).close()  # the lake
    temp = tmp_path / "tmp"
    temp.mkdir()
    older = temp / "tracegrade-lake-spill-older"  # as an older tracegrade's: no owner to tell, so it stays
    older.mkdir()
    holders = [
        subprocess.Popen(
            [sys.executable, "-c", _SPILLING_HOLDER, location, str(data), str(tmp_path / f"stop-{n}")],
            env={**os.environ, "TMPDIR": str(temp)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(2)
    ]
    killed, alive = holders
    try:
        spills = [Path(holder.stdout.readline().strip()) for holder in holders]  # type: ignore[union-attr]
        for spill in spills:
            wait_until(functools.partial(_holds_spill_files, spill), f"a spill file in {spill}", timeout=300)
        killed.kill()
        killed.wait()
        assert spills[0].is_dir()  # nothing removed it
        monkeypatch.setattr(tempfile, "tempdir", str(temp))  # where this process's stores spill, as TMPDIR says
        store = LakeStore(location, data_path=data)
        try:
            assert not spills[0].exists()
            assert spills[1].is_dir()
            assert older.is_dir()
            assert sorted(temp.iterdir()) == sorted([older, spills[1], _spill_directory(store)])
            (tmp_path / "stop-1").touch()  # the live holder's query running now began before the store opened
            _, errors = alive.communicate(timeout=300)
            assert alive.returncode == 0, errors  # every query of its spilled and read back what it spilled
        finally:
            store.close()
        assert sorted(temp.iterdir()) == [older]
    finally:
        for holder in holders:
            holder.kill()
            holder.wait()
