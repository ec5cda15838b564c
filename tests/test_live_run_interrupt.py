"""Ctrl-C (SIGINT) during a live run: ``tracegrade run`` stops with one line and exit code 130, no traceback,
and the reports hold the cases that finished, marked ``metadata.incomplete``; through the Python API,
``evaluate_sync`` raises ``RunInterrupted`` carrying that partial report. Real processes, real SIGINT."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from tracegrade.models import EvalCase, EvalSet, Invocation, ToolCall

CASES = 6
FINISHING = 3  # cases q0..q2 answer at once; from q3 on the agent waits until it is stopped

AGENT = textwrap.dedent(
    """
    import asyncio
    from tracegrade import trace_node, trace_tool

    @trace_tool
    def get_weather(city: str) -> str:
        return f"{city}: sunny"

    @trace_node("agent")
    async def agent(text: str) -> str:
        if int(text[1:]) >= FINISHING:
            await asyncio.Event().wait()  # never set: this case finishes only if the run is stopped
        return get_weather("Paris") + "."
    """
).replace("FINISHING", str(FINISHING))


def _project(tmp_path: Path) -> Path:
    (tmp_path / "weather_agent.py").write_text(AGENT, encoding="utf-8")
    cases = [
        EvalCase(eval_id=f"c{i}", conversation=[Invocation.simple(f"q{i}", None, [ToolCall(name="get_weather")], None)])
        for i in range(CASES)
    ]
    EvalSet(eval_set_id="weather", eval_cases=cases).to_file(tmp_path / "evalset.json")
    config = {
        "criteria": {"trajectory": {"threshold": 1.0}},
        "timeout": 3600,
        "reporter": {"console": False, "junit_xml": True, "timestamp_files": False},
    }
    (tmp_path / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return tmp_path


def _interrupt_after(command: list[str], cwd: Path, finished_marker: str) -> tuple[int, str, str]:
    """Start ``command``, send it SIGINT once ``FINISHING`` stdout lines contain ``finished_marker``."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen: list[str] = []
    assert process.stdout is not None
    for line in process.stdout:
        seen.append(line)
        if sum(finished_marker in s for s in seen) == FINISHING:
            process.send_signal(signal.SIGINT)
            break
    out, err = process.communicate(timeout=300)
    return process.returncode, "".join(seen) + out, err


def _partial_report(out: Path) -> dict:
    report = json.loads((out / "weather.json").read_text(encoding="utf-8"))
    assert report["metadata"]["incomplete"] == f"the run was interrupted after {FINISHING} of {CASES} cases"
    assert [r["eval_id"] for r in report["results"]] == [f"c{i}" for i in range(FINISHING)]
    assert report["summary"]["total_cases"] == FINISHING
    assert "incomplete" in (out / "weather_junit.xml").read_text(encoding="utf-8")
    return report


def test_tracegrade_run_stopped_by_ctrl_c_says_so_in_one_line_and_exits_130(tmp_path: Path) -> None:
    project = _project(tmp_path)
    command = [sys.executable, "-m", "tracegrade.cli.main", "run", "weather_agent.py", "--evalset", "evalset.json"]
    command += ["--config", "config.json", "--out", "out", "-v"]
    code, _, stderr = _interrupt_after(command, project, " PASS c")
    assert code == 130, stderr
    assert "Traceback" not in stderr and "Aborted" not in stderr
    (line,) = [s for s in stderr.splitlines() if s.strip()]
    assert line.startswith(f"interrupted: {FINISHING} of {CASES} cases finished; partial report (marked incomplete):")
    assert str(project / "out" / "weather.json") in line
    _partial_report(project / "out")


def test_evaluate_sync_stopped_by_ctrl_c_raises_run_interrupted_with_the_partial_report(tmp_path: Path) -> None:
    project = _project(tmp_path)
    script = textwrap.dedent(
        """
        from tracegrade import AgentEvaluator, EvalConfig, create_eval_app
        from tracegrade.errors import RunInterrupted
        import weather_agent

        app, collector = create_eval_app(weather_agent.agent)
        evaluator = AgentEvaluator(app, collector, EvalConfig.from_file("config.json"))
        try:
            evaluator.evaluate_sync("evalset.json", verbose=True, output_dir="out")
        except RunInterrupted as stopped:
            assert isinstance(stopped, KeyboardInterrupt)
            print("stopped", stopped.finished, stopped.total, stopped.report.metadata["incomplete"])
            raise SystemExit(3)
        raise SystemExit("the run was not interrupted")
        """
    )
    code, stdout, stderr = _interrupt_after([sys.executable, "-c", script], project, " PASS c")
    assert code == 3, stderr
    assert f"stopped {FINISHING} {CASES} the run was interrupted after {FINISHING} of {CASES} cases" in stdout
    _partial_report(project / "out")
