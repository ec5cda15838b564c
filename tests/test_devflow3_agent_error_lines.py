"""An agent error of several lines names its place on the first line, the one the console's case table shows:
``ValueError: line one (at agent.py:N, in agent)``, the other lines after it. A real ``tracegrade run`` process
on an agent that raises, its console report read as the user reads it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from tracegrade.models import EvalCase, EvalSet, Invocation

AGENT = textwrap.dedent(
    """
    from tracegrade import trace_node

    @trace_node("agent")
    def agent(text: str) -> str:
        raise ValueError("line one\\nline two")
    """
)
RAISE_LINE = AGENT.splitlines().index('    raise ValueError("line one\\nline two")') + 1
PLACE = f"(at two_line_agent.py:{RAISE_LINE}, in agent)"


def _run(tmp_path: Path) -> tuple[subprocess.CompletedProcess[str], dict]:
    (tmp_path / "two_line_agent.py").write_text(AGENT, encoding="utf-8")
    case = EvalCase(eval_id="c1", conversation=[Invocation.simple("hello", "hi")])
    EvalSet(eval_set_id="lines", eval_cases=[case]).to_file(tmp_path / "cases.json")
    config = {"criteria": {"contains_keywords": {"threshold": 1.0, "keywords": ["hi"]}}}
    (tmp_path / "config.json").write_text(json.dumps(config), encoding="utf-8")
    command = [sys.executable, "-m", "tracegrade.cli.main", "run", "two_line_agent.py", "--evalset", "cases.json"]
    command += ["--config", "config.json", "--out", "out", "--format", "console,json"]
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200"}
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False)
    (report_file,) = (tmp_path / "out").glob("*.json")
    return done, json.loads(report_file.read_text(encoding="utf-8"))


def test_the_place_of_a_multi_line_agent_error_is_on_its_first_line(tmp_path: Path) -> None:
    done, report = _run(tmp_path)
    assert done.returncode == 1, done.stderr  # the case is an error: the run fails
    (result,) = report["results"]
    assert result["error"] == f"Agent error on turn 0: ValueError: line one {PLACE}\nline two"
    # the console's case table shows an error's first line: it names the place
    assert f"error: Agent error on turn 0: ValueError: line one {PLACE}" in _table_row(done.stdout, "c1")
    assert "line two" not in _table_row(done.stdout, "c1")


def _table_row(console: str, eval_id: str) -> str:
    """The case table's row of ``eval_id``, its wrapped cells joined back (rich wraps a long cell in place)."""
    lines = console.splitlines()
    start = next(i for i, line in enumerate(lines) if f"ERROR   {eval_id} " in line)
    end = next(i for i in range(start + 1, len(lines)) if not lines[i].strip())
    return " ".join(" ".join(line.split()) for line in lines[start:end])
