"""The README's code runs as written: the "Grading a live agent" example against the LangGraph example agent."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _python_block_after(heading: str) -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split(f"\n{heading}\n", 1)[1]
    return section.split("```python\n", 1)[1].split("\n```", 1)[0]


def test_the_live_grading_example_passes_against_the_example_agent(tmp_path: Path) -> None:
    code = _python_block_after("## Grading a live agent")
    shutil.copyfile(ROOT / "examples" / "langgraph_weather" / "agent.py", tmp_path / "agent.py")
    finished = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,  # the reports it writes (eval_reports/) land here
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert finished.returncode == 0, finished.stderr[-3000:]
    assert "Total Cases: 1" in finished.stdout and "Passed:      1 (100.0%)" in finished.stdout, finished.stdout
