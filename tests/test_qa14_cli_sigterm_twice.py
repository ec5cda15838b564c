"""A second SIGTERM while ``tracegrade run`` is already stopping for the first (a CI runner or a user repeating
``kill``) leaves the stop as the first one began it: the finished cases reported, one line, exit code 143. Before,
with SIGINT at its default, the second went through asyncio.run's Ctrl-C handler, which forces a stop on its
second call: a KeyboardInterrupt in the middle of the stopping, no report, exit code 130.

A real process and real signals: the agent's waiting cases send the second SIGTERM themselves while they are being
cancelled, so it arrives during the stop whatever the machine's speed."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.test_live_run_interrupt import CASES, FINISHING, _partial_report, _project
from tests.test_run_command_sigterm import sigterm_after_finishing

_WAIT = "        await asyncio.Event().wait()"
# the waiting cases, cancelled by the first SIGTERM, send the process another one before they stop
_WAIT_THEN_SIGTERM_AGAIN = """        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            import os, signal
            os.kill(os.getpid(), signal.SIGTERM)
            raise"""


@pytest.mark.parametrize("sigint_ignored", [False, True], ids=["sigint-default", "sigint-ignored"])
def test_a_second_sigterm_during_the_stop_keeps_the_partial_report(tmp_path: Path, sigint_ignored: bool) -> None:
    project = _project(tmp_path)
    agent = project / "weather_agent.py"
    source = agent.read_text(encoding="utf-8")
    assert _WAIT in source
    agent.write_text(source.replace(_WAIT, _WAIT_THEN_SIGTERM_AGAIN), encoding="utf-8")
    returncode, stderr = sigterm_after_finishing(project, sigint_ignored)
    assert returncode == 143, stderr
    assert "Traceback" not in stderr, stderr
    (line,) = [s for s in stderr.splitlines() if s.strip()]
    assert line.startswith(f"terminated (SIGTERM): {FINISHING} of {CASES} cases finished; partial report (marked")
    _partial_report(project / "out")
