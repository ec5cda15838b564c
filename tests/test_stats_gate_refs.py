"""``gate`` and ``diff`` given a report file that does not exist say so, rather than naming only the store.

A reference that is not an existing file is looked up as a run in the store; for a mistyped report path the
error was "store not found: tracegrade.duckdb", which never mentioned the file the user gave.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.grading_cli import run_cli
from tests.test_stats_gate_power import _run


@pytest.fixture(autouse=True)
def _no_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # no tracegrade.duckdb here
    monkeypatch.delenv("TRACEGRADE_STORE", raising=False)


def test_gate_names_the_missing_report_file(tmp_path: Path) -> None:
    _run(True, 10).to_file(tmp_path / "base.json")
    result = run_cli("gate", "--baseline", tmp_path / "base.json", "--candidate", tmp_path / "candidte.json")
    assert result.exit_code == 2
    assert f"report file {tmp_path / 'candidte.json'} does not exist" in result.output


def test_diff_names_the_missing_report_file(tmp_path: Path) -> None:
    _run(True, 10).to_file(tmp_path / "a.json")
    result = run_cli("diff", "missing.json", "a.json")
    assert result.exit_code == 2 and "report file missing.json does not exist" in result.output


def test_a_run_id_without_a_store_still_names_the_store(tmp_path: Path) -> None:
    result = run_cli("diff", "run-20260101-000000-abcdef", "latest")
    assert result.exit_code == 2 and "store not found" in result.output and "report file" not in result.output
