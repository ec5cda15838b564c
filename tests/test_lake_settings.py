"""An operator's wrong settings for a lake, against a real PostgreSQL: each is refused at open with what is
wrong, where, and what to do (never a traceback, never a receiver that starts and then fails every commit).

* a data path that cannot be made (a file where a directory should be) or written (a directory no file can
  be made in);
* a data path other than the one the lake was created with;
* a read-only command, or `maintain`, pointed at a database that holds no lake (a mistyped dbname): never
  a new, empty lake made there.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support import pg_cluster
from tests.support.pg_cluster import PgServer
from tracegrade.cli.main import cli
from tracegrade.errors import StoreError
from tracegrade.store.lake import LakeStore

pg_server = pg_cluster.pg_server  # the session's PostgreSQL (a fixture)


@pytest.fixture
def location(pg_server: PgServer) -> str:
    return f"ducklake:postgres:{pg_server.new_database()}"


def _maintain(location: str, data: Path):  # type: ignore[no-untyped-def]
    env = {name: None for name in os.environ if name.startswith("TRACEGRADE_")}
    return CliRunner().invoke(cli, ["maintain", "--store", location, "--lake-data", str(data)], env=env)


def test_a_data_path_under_a_file_is_refused_with_the_path_and_the_fix(location: str, tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where the data path's parent should be")
    with pytest.raises(StoreError) as raised:
        LakeStore(location, data_path=blocker / "lake")
    message = str(raised.value)
    assert f"cannot use {blocker / 'lake'} as the data path of lake" in message
    assert "Not a directory" in message and "--lake-data" in message
    # the command says the same, as an error (exit 2), not a traceback
    result = _maintain(location, blocker / "lake")
    assert result.exit_code == 2, result.output
    assert f"cannot use {blocker / 'lake'} as the data path" in result.output
    assert "Traceback" not in result.output and not isinstance(result.exception, OSError)


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs /proc: a directory no process can write to")
def test_a_data_path_no_file_can_be_made_in_is_refused_at_open(location: str) -> None:
    # /proc refuses new files even to root (a read-only mount does the same); DuckLake would only fail at the
    # first commit, leaving a receiver that acknowledges into its journal and never commits
    with pytest.raises(StoreError, match=r"cannot use /proc as the data path of lake .*--lake-data"):
        LakeStore(location, data_path="/proc")


def test_a_data_path_other_than_the_lakes_says_to_give_the_lakes(location: str, tmp_path: Path) -> None:
    with LakeStore(location, data_path=tmp_path / "shared"):
        pass
    with pytest.raises(StoreError) as raised:
        LakeStore(location, data_path=tmp_path / "elsewhere")
    message = str(raised.value)
    assert str(tmp_path / "shared") in message and "Give --lake-data the path the lake was created with" in message
    assert "is PostgreSQL reachable" not in message  # it is: the hint would send the operator the wrong way
    assert not (tmp_path / "elsewhere").exists()


def test_a_read_only_open_of_a_database_without_a_lake_says_so(location: str) -> None:
    with pytest.raises(StoreError) as raised:
        LakeStore(location, read_only=True)
    message = str(raised.value)
    assert "its database holds no lake yet" in message and "check dbname" in message
    assert "is PostgreSQL reachable" not in message


def test_maintain_on_a_database_without_a_lake_refuses_rather_than_make_an_empty_one(
    location: str, tmp_path: Path
) -> None:
    result = _maintain(location, tmp_path / "lake")
    assert result.exit_code == 2, result.output
    assert "its database holds no lake yet" in result.output and "check dbname" in result.output
    # nothing was created: a read-only open still finds no lake there
    with pytest.raises(StoreError, match="holds no lake yet"):
        LakeStore(location, read_only=True)
    # a receiver's read-write open still creates one
    with LakeStore(location, data_path=tmp_path / "lake"):
        pass
    assert _maintain(location, tmp_path / "lake").exit_code == 0
