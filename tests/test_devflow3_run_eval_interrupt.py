"""Ctrl-C (a real SIGINT) during ``run_eval_sync`` raises ``RunInterrupted`` carrying the cases that finished,
as ``evaluate_sync`` does, not a bare ``KeyboardInterrupt``; inside a running event loop it is an
``EventLoopError``, as ``evaluate_sync``'s is. The agent and project are test_live_run_interrupt's."""

from __future__ import annotations

import asyncio
import sys
import textwrap
from pathlib import Path

import pytest

from tests.test_live_run_interrupt import CASES, FINISHING, _interrupt_after, _project
from tracegrade.errors import EventLoopError
from tracegrade.testing import run_eval_sync


def test_run_eval_sync_stopped_by_ctrl_c_raises_run_interrupted_with_the_finished_cases(tmp_path: Path) -> None:
    project = _project(tmp_path)
    script = textwrap.dedent(
        """
        from tracegrade import EvalConfig, create_eval_app
        from tracegrade.errors import RunInterrupted
        from tracegrade.testing import run_eval_sync
        import weather_agent

        app, collector = create_eval_app(weather_agent.agent)
        try:
            run_eval_sync(app, collector, "evalset.json", EvalConfig.from_file("config.json"), verbose=True)
        except RunInterrupted as stopped:
            print("stopped", stopped.finished, stopped.total, stopped.report.metadata["incomplete"])
            print("finished", " ".join(r.eval_id for r in stopped.report.results))
            raise SystemExit(3)
        except KeyboardInterrupt as other:
            raise SystemExit(f"a bare {type(other).__name__}, not RunInterrupted")
        raise SystemExit("the run was not interrupted")
        """
    )
    code, stdout, stderr = _interrupt_after([sys.executable, "-c", script], project, " PASS c")
    assert code == 3, stderr
    assert f"stopped {FINISHING} {CASES} the run was interrupted after {FINISHING} of {CASES} cases" in stdout
    assert "finished " + " ".join(f"c{i}" for i in range(FINISHING)) in stdout


def test_run_eval_sync_inside_an_event_loop_is_an_event_loop_error() -> None:
    async def inside() -> None:
        run_eval_sync(lambda text: text, None, "never-read.evalset.json")

    with pytest.raises(
        EventLoopError, match=r"run_eval_sync cannot run inside a running event loop; use `await run_eval"
    ):
        asyncio.run(inside())
