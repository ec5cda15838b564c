"""README: SIGTERM stops ``tracegrade run`` as Ctrl-C does (``terminated (SIGTERM): …``, exit code 143, the finished
cases reported) — also when the run's SIGINT is ignored, as a shell script's background job (``tracegrade run … &``)
has it. A real process, a real SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.test_live_run_interrupt import CASES, FINISHING, _partial_report, _project


def _ignore_sigint() -> None:
    """What a non-interactive shell does to a job it starts with ``&``."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def test_sigterm_reports_the_finished_cases_when_sigint_is_ignored(tmp_path: Path) -> None:
    project = _project(tmp_path)
    command = [sys.executable, "-m", "tracegrade.cli.main", "run", "weather_agent.py", "--evalset", "evalset.json"]
    command += ["--config", "config.json", "--out", "out", "-v"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(
        command,
        cwd=project,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_ignore_sigint,
    )
    assert process.stdout is not None
    passed = 0
    for line in process.stdout:  # the first FINISHING cases pass at once; the others wait until the run is stopped
        passed += " PASS c" in line
        if passed == FINISHING:
            process.send_signal(signal.SIGTERM)
            break
    _, stderr = process.communicate(timeout=300)
    assert process.returncode == 143, stderr
    assert "Traceback" not in stderr and "never awaited" not in stderr, stderr
    (line,) = [s for s in stderr.splitlines() if s.strip()]
    assert line.startswith(f"terminated (SIGTERM): {FINISHING} of {CASES} cases finished; partial report (marked")
    _partial_report(project / "out")
