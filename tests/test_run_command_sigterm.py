"""SIGTERM (what a CI runner sends a job it cancels) stops ``tracegrade run`` as Ctrl-C does: the cases that
finished are reported, marked incomplete, one line says so, and the exit code is 143 (128 + SIGTERM), where before
the process died at once and lost them — also when the run's SIGINT is ignored, as a shell script's background job
(``tracegrade run … &``) has it (asyncio then installs no Ctrl-C handler to go through). A real process, a real
SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_live_run_interrupt import CASES, FINISHING, _partial_report, _project


def _ignore_sigint() -> None:
    """What a non-interactive shell does to a job it starts with ``&``."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def sigterm_after_finishing(project: Path, sigint_ignored: bool) -> tuple[int, str]:
    """Run the project's eval set with ``tracegrade run``, send SIGTERM once its first FINISHING cases passed (the
    others wait until the run is stopped); its exit code and standard error."""
    command = [sys.executable, "-m", "tracegrade.cli.main", "run", "weather_agent.py", "--evalset", "evalset.json"]
    command += ["--config", "config.json", "--out", "out", "-v"]
    process = subprocess.Popen(
        command,
        cwd=project,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_ignore_sigint if sigint_ignored else None,
    )
    assert process.stdout is not None
    passed = 0
    for line in process.stdout:
        passed += " PASS c" in line
        if passed == FINISHING:
            process.send_signal(signal.SIGTERM)
            break
    _, stderr = process.communicate(timeout=300)
    return process.returncode, stderr


@pytest.mark.parametrize("sigint_ignored", [False, True], ids=["sigint-default", "sigint-ignored"])
def test_tracegrade_run_stopped_by_sigterm_reports_the_finished_cases_and_exits_143(
    tmp_path: Path, sigint_ignored: bool
) -> None:
    project = _project(tmp_path)
    returncode, stderr = sigterm_after_finishing(project, sigint_ignored)
    assert returncode == 143, stderr
    assert "Traceback" not in stderr and "never awaited" not in stderr, stderr
    (line,) = [s for s in stderr.splitlines() if s.strip()]
    assert line.startswith(f"terminated (SIGTERM): {FINISHING} of {CASES} cases finished; partial report (marked")
    assert str(project / "out" / "weather.json") in line
    _partial_report(project / "out")
