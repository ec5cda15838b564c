"""An integer longer than Python converts (4,300 digits by default) in an eval set, config or report is one
located problem, not a ValueError traceback: real ``tracegrade`` processes on real files."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


def _tracegrade(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-c", "from tracegrade.cli.main import cli; cli()", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("command", ["report", "validate"])
def test_an_integer_too_long_to_convert_is_located(tmp_path: Path, command: str) -> None:
    path = tmp_path / "report.json"
    path.write_text('{\n  "note": "' + "9" * 6000 + '",\n  "eval_set_id": ' + "1" * 5000 + "\n}\n")
    done = _tracegrade(command, str(path))
    assert done.returncode != 0
    assert "Traceback" not in done.stderr + done.stdout
    said = "an integer of 5,000 digits at line 3, column 18, more than the 4,300 Python reads; write it as a string"
    assert said in done.stderr + done.stdout  # the digits inside the string before it are text, not a number
