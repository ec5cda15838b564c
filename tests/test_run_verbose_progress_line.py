"""`tracegrade run -v` prints one line per finished case; an agent's error on it is the agent's own text, which may
hold a newline, terminal escapes or a bidi override: the line shows them as visible escapes and stays one line."""

from __future__ import annotations

from pathlib import Path

from tests.support.grading_cli import run_cli
from tracegrade.models import EvalCase, EvalSet, Invocation

AGENT = 'def agent(query):\n    raise ValueError("\\x1b[2J\\x1b[31mred\\nsecond line \\u202e end")\n'


def test_an_agent_error_with_escapes_and_a_newline_stays_on_its_progress_line(tmp_path: Path) -> None:
    (tmp_path / "agent.py").write_text(AGENT, encoding="utf-8")
    case = EvalCase(eval_id="c1", conversation=[Invocation.simple("hello", "hi")])
    EvalSet(eval_set_id="escapes", eval_cases=[case]).to_file(tmp_path / "cases.json")
    ran = run_cli("run", tmp_path / "agent.py", "--evalset", tmp_path / "cases.json", "--out", tmp_path / "out", "-v")
    assert ran.exit_code == 1, ran.output  # the case is an error
    (line,) = [line for line in ran.stdout.splitlines() if line.startswith("[1/1] ERROR c1 (")]
    place = f"(at {tmp_path / 'agent.py'}:2, in agent)"
    assert f" - Agent error on turn 0: ValueError: \\x1b[2J\\x1b[31mred {place}" in line, line
    assert line.endswith("\\nsecond line \\u202e end"), line
    assert "\x1b" not in ran.output and "\u202e" not in ran.output
