"""``tracegrade export`` refuses an output it cannot write with ``cannot write PATH: <reason>`` (exit 2), and makes
no output directory for a store it cannot read."""

from __future__ import annotations

import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.support.grading_cli import run_cli
from tests.support.grading_traces import AgentRun, fill_store


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("export-outputs") / "store.duckdb"
    fill_store(path, [AgentRun(1, "what is the weather?", "sunny")]).close()
    return path


def _export(store: Path, output: Path) -> tuple[int, str]:
    result = run_cli("export", "--store", store, "-o", output, "--table", "traces")
    return result.exit_code, result.stderr


def test_a_regular_file_in_the_output_path_is_refused_with_the_path(store: Path, tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("keep me", encoding="utf-8")
    code, err = _export(store, tmp_path / "afile" / "sub")
    assert code == 2, err
    assert f"cannot write {tmp_path / 'afile' / 'sub' / 'traces.parquet'}: Not a directory" in err
    assert (tmp_path / "afile").read_text(encoding="utf-8") == "keep me"


def test_a_directory_where_a_table_file_goes_is_refused(store: Path, tmp_path: Path) -> None:
    (tmp_path / "out" / "traces.parquet").mkdir(parents=True)
    code, err = _export(store, tmp_path / "out")
    assert code == 2, err
    assert f"cannot write {tmp_path / 'out' / 'traces.parquet'}: it is a directory, not a regular file" in err


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="sysfs refuses new directories, even to root")
def test_a_directory_the_system_refuses_to_make_is_refused_with_the_reason(store: Path) -> None:
    code, err = _export(store, Path("/sys/tracegrade-export"))
    assert code == 2, err
    assert "cannot write /sys/tracegrade-export/traces.parquet: " in err and "Traceback" not in err


def test_a_missing_store_leaves_no_output_directory(tmp_path: Path) -> None:
    code, err = _export(tmp_path / "nosuch.duckdb", tmp_path / "newdir")
    assert code == 2 and "store not found" in err
    assert not (tmp_path / "newdir").exists()


def test_the_output_directory_is_made_with_its_parents(store: Path, tmp_path: Path) -> None:
    code, err = _export(store, tmp_path / "a" / "b")
    assert code == 0, err
    assert pq.read_table(tmp_path / "a" / "b" / "traces.parquet").num_rows == 1
