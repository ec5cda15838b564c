"""Standard output redirected to a full disk: every command fails saying so (exit 2, one line), never exits 0
with its output cut (CPython's buffered writer can drop the rest of a large write without an error) or 120
with an "Exception ignored" traceback (a flush that fails at exit). Real processes, a real small tmpfs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.long_text import long_text_sql
from tests.support.small_fs import fill, small_filesystem
from tracegrade.store import TraceStore

FAILED = ["Error: cannot write standard output: No space left on device"]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("stdout") / "store.duckdb"
    TraceStore(path).close()
    return path


def _sql_into(output: Path, store: Path, characters: int) -> subprocess.CompletedProcess[str]:
    query = f"SELECT {long_text_sql(characters)} AS value"
    with output.open("wb") as stdout:
        return subprocess.run(
            [sys.executable, "-m", "tracegrade.cli.main", "sql", "--store", str(store), "--format", "json", query],
            stdout=stdout,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )


def test_a_large_output_that_the_disk_cuts_short_fails_the_command(store: Path, tmp_path: Path) -> None:
    with small_filesystem(tmp_path / "fs", "256k") as mount:
        fill(mount, leave=64 * 1024)
        done = _sql_into(mount / "out.json", store, 300_000)
    assert (done.returncode, done.stderr.splitlines()) == (2, FAILED)


def test_a_small_output_whose_last_flush_fails_fails_the_command(store: Path, tmp_path: Path) -> None:
    with small_filesystem(tmp_path / "fs", "256k") as mount:
        fill(mount)
        done = _sql_into(mount / "out.json", store, 100)
    assert (done.returncode, done.stderr.splitlines()) == (2, FAILED)


def test_output_that_fits_is_written_whole(store: Path, tmp_path: Path) -> None:
    done = _sql_into(tmp_path / "out.json", store, 300_000)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "out.json").read_text(encoding="utf-8").count("x") == 300_000
