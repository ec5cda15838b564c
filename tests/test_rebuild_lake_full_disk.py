"""``tracegrade rebuild`` on a lake whose data disk fills up: the Parquet files of a step cannot be written.

Real processes and filesystems: a lake on the session's PostgreSQL with its ``--lake-data`` on a small tmpfs, filled
before the rebuild starts or while it runs; ``tracegrade rebuild`` in a child process. The command stops with exit
code 1 and an error saying the disk is full, which file of the data path could not be written, and to make room
there and run the same command again; it leaves no file on the data path that the catalog does not list (the one
it could not write is removed at once); every step it reported is committed, no trace loses a span or has other
than one trajectory (the older mapper's or the current one's, checked trace by trace with SQL), and once room is
made the same command finishes the rest.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import pg_cluster
from tests.support.lake_files import unlisted_files
from tests.support.outdated_trajectories import current_count, read_until, rebuild_process, store_outdated
from tests.support.small_fs import fill, free, small_filesystem
from tracegrade.store.lake import LakeStore
from tracegrade.trajectory import MAPPER_REVISION

pg_server = pg_cluster.pg_server  # the session's PostgreSQL (a fixture)

TRACES = 300
BATCH = 25  # twelve steps, each writing new Parquet files (and delete files for the rows it replaces)


@pytest.mark.parametrize("while_running", [False, True], ids=["full-before-it-starts", "filled-while-it-runs"])
def test_a_full_lake_data_disk_stops_a_rebuild_saying_where_to_make_room_and_the_same_command_then_finishes(
    pg_server: pg_cluster.PgServer, tmp_path: Path, while_running: bool
) -> None:
    where = f"ducklake:postgres:{pg_server.new_database()}"
    with small_filesystem(tmp_path / "fs", "24m") as mount:
        data = mount / "data"
        with LakeStore(where, data_path=data) as lake:
            spans_of = store_outdated(lake, TRACES)
        command = ("--store", where, "--lake-data", str(data), "--batch", str(BATCH))
        if while_running:
            full = rebuild_process(*command)
            printed = read_until(full, f"rebuilt {BATCH} of {TRACES} trace(s)")
            fill(mount)  # the step under way or the next one cannot write its Parquet files
        else:
            fill(mount)
            full = rebuild_process(*command)
            printed = []
        out, err = full.communicate(timeout=120)
        assert full.returncode == 1, err
        printed += out.splitlines()
        progress = [line for line in printed if line.startswith("rebuilt ")]
        reported = int(progress[-1].split()[1]) if progress else 0  # its last "rebuilt N of 300 trace(s)"
        assert (0 < reported < TRACES) if while_running else reported == 0, printed
        assert f'Could not write file "{data}/' in err and '.parquet": No space left on device' in err, err
        before = f" (rebuilt {reported} of {TRACES} trace(s) before it)" if reported else ""
        advice = (
            f"{before}; the disk of the lake's data path {data}/ is full: make room on it, then run the same command "
            "again: it goes on with the traces still out of date"
        )
        assert err.rstrip("\n").endswith(advice), err
        assert "Traceback" not in err
        assert unlisted_files(where, data) == []  # the file the failed step could not write is not left behind

        with LakeStore(where, read_only=True) as lake:  # read on the full disk: each step it reported is there
            assert current_count(lake, spans_of) == reported
        free(mount)
        again = rebuild_process(*command)
        out, err = again.communicate(timeout=120)
        assert again.returncode == 0, err
        assert f"rebuilt the trajectories of {TRACES - reported} trace(s) with mapper revision {MAPPER_REVISION}" in out
        with LakeStore(where, read_only=True) as lake:
            assert current_count(lake, spans_of) == TRACES
        assert unlisted_files(where, data) == []
