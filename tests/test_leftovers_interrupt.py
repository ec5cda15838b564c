"""Ctrl-C (SIGINT) in the middle of a ``run_eval`` inside a pytest test: the cases that finished before it are in
the session's report (``--tracegrade-report``, marked incomplete) and its terminal summary, from ``run_eval_sync``
in a plain test and from ``await run_eval`` in an async one. Real pytest processes, real SIGINT."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tracegrade.models import EvalCase, EvalSet, Invocation

CASES = 6
FINISHING = 3  # cases q0..q2 answer at once; from q3 on the agent waits until the run is stopped

AGENT = textwrap.dedent(
    """
    import asyncio
    from tracegrade import trace_node

    @trace_node("agent")
    async def agent(text: str) -> str:
        if int(text[1:]) >= FINISHING:
            await asyncio.Event().wait()  # never set: this case finishes only if the run is stopped
        return "answer " + text
    """
).replace("FINISHING", str(FINISHING))

SYNC_TEST = """
from agent import agent
from tracegrade import CriteriaConfig, CriterionConfig, EvalConfig
from tracegrade.testing import run_eval_sync

CONFIG = EvalConfig(criteria=CriteriaConfig(contains_keywords=CriterionConfig.contains_keywords(["answer"])))

def test_weather(tracegrade_app):
    app, collector = tracegrade_app(agent)
    run_eval_sync(app, collector, "cases.json", CONFIG, verbose=True)
"""

ASYNC_TEST = """
import pytest
from agent import agent
from tracegrade import CriteriaConfig, CriterionConfig, EvalConfig
from tracegrade.testing import run_eval

CONFIG = EvalConfig(criteria=CriteriaConfig(contains_keywords=CriterionConfig.contains_keywords(["answer"])))

@pytest.mark.asyncio
async def test_weather(tracegrade_app):
    app, collector = tracegrade_app(agent)
    await run_eval(app, collector, "cases.json", CONFIG, verbose=True)
"""


def _project(tmp_path: Path, test_file: str) -> Path:
    (tmp_path / "agent.py").write_text(AGENT, encoding="utf-8")
    (tmp_path / "test_weather.py").write_text(test_file, encoding="utf-8")
    cases = [EvalCase(eval_id=f"c{i}", conversation=[Invocation.simple(f"q{i}", None)]) for i in range(CASES)]
    EvalSet(eval_set_id="weather", eval_cases=cases, name="weather").to_file(tmp_path / "cases.json")
    return tmp_path


def _interrupted_session(project: Path) -> tuple[int, str]:
    """A pytest session on ``project``, sent SIGINT once ``FINISHING`` cases have passed; its exit code and output."""
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-s", "--tracegrade-report", "out"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "NO_COLOR": "1"}
    process = subprocess.Popen(
        command, cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    seen: list[str] = []
    assert process.stdout is not None
    for line in process.stdout:
        seen.append(line)
        if sum(" PASS c" in s for s in seen) == FINISHING:
            process.send_signal(signal.SIGINT)
            break
    out, _ = process.communicate(timeout=300)
    return process.returncode, "".join(seen) + out


@pytest.mark.parametrize("test_file", [SYNC_TEST, ASYNC_TEST], ids=["run_eval_sync", "await_run_eval"])
def test_a_run_eval_stopped_by_ctrl_c_keeps_its_finished_cases_in_the_session_report(
    tmp_path: Path, test_file: str
) -> None:
    project = _project(tmp_path, test_file)
    code, output = _interrupted_session(project)
    assert code == pytest.ExitCode.INTERRUPTED, output
    (report_file,) = (project / "out").glob("*.json")
    report = json.loads(report_file.read_text(encoding="utf-8"))
    assert [r["eval_id"] for r in report["results"]] == [f"c{i}" for i in range(FINISHING)]
    assert all(r["passed"] for r in report["results"])
    assert {r["metadata"]["pytest_test"] for r in report["results"]} == {"test_weather.py::test_weather"}
    assert report["metadata"]["incomplete"] == "the session was interrupted"
    assert report["summary"]["total_cases"] == FINISHING
    assert f"{FINISHING} case(s) graded: {FINISHING} passed" in output
    assert f"incomplete: interrupted after {FINISHING} of {FINISHING} cases" in output
