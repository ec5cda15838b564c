"""A small traced weather agent and pytest projects grading it, for tests that run real pytest sessions with the
tracegrade plugin (``pytester``), and readers of what those sessions print and write."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tracegrade.models.results import CriterionResult, EvalCaseResult, EvalReport
from tracegrade.reporters import JSONReporter

__all__ = [
    "AGENT",
    "TEST_FILE",
    "baseline_report",
    "make_project",
    "strict_json",
    "strict_json_text",
    "summary_lines",
    "weather_case",
]

# Asked about Bergen it looks up Oslo (a failing case); a query saying "crash" raises with an ESC sequence in its
# message, one saying "interrupt" raises KeyboardInterrupt, as Ctrl-C does in the middle of a run.
AGENT = """
import re
from tracegrade import trace_node, trace_tool

WEATHER = {"Paris": "sunny", "Oslo": "snowy", "Bergen": "rainy"}

@trace_tool
def get_weather(city: str) -> str:
    return f"{city} is {WEATHER.get(city, 'unknown')}"

@trace_node("agent")
def agent(text: str) -> str:
    if "crash" in text:
        raise ValueError("model said \\x1b[31mred\\x1b[0m")
    if "interrupt" in text:
        raise KeyboardInterrupt
    cities = [c for c in re.findall(r"[A-Z][a-z]+", text) if c in WEATHER]
    if "Bergen" in cities:
        cities = ["Oslo"]
    return " ".join(get_weather(c) + "." for c in cities)
"""

TEST_FILE = """
from agent import agent
from tracegrade import CriteriaConfig, CriterionConfig, EvalConfig, assert_eval_passed, parametrize_eval_cases
from tracegrade.testing import run_eval_sync

CONFIG = EvalConfig(criteria=CriteriaConfig(trajectory=CriterionConfig.trajectory(check_args=True)))

@parametrize_eval_cases("{cases}")
def test_case(eval_case, tracegrade_app):
    app, collector = tracegrade_app(agent)
    assert_eval_passed(run_eval_sync(app, collector, eval_case, CONFIG))
"""


def weather_case(eval_id: str, query: str, city: str = "Paris", **metadata: str) -> dict[str, object]:
    """An eval case (as JSON) expecting one weather lookup of ``city``."""
    return {
        "eval_id": eval_id,
        "metadata": metadata,
        "conversation": [
            {
                "user_content": {"role": "user", "content": query},
                "expected_tool_trajectory": [{"name": "get_weather", "args": {"city": city}}],
            }
        ],
    }


def make_project(pytester: pytest.Pytester, files: dict[str, list[dict[str, object]]]) -> None:
    """The agent and, per ``test_<name>.py``, a parametrized test over the cases of ``<name>.json``."""
    pytester.makepyfile(agent=AGENT)
    for name, cases in files.items():
        pytester.makepyfile(**{f"test_{name}": TEST_FILE.format(cases=f"{name}.json")})
        data = {"eval_set_id": "weather", "eval_cases": cases}
        pytester.path.joinpath(f"{name}.json").write_text(json.dumps(data), encoding="utf-8")


def strict_json_text(text: str) -> Any:
    """JSON text read by a parser that refuses NaN and Infinity, which JSON does not have."""

    def refuse(constant: str) -> object:
        raise AssertionError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)


def strict_json(path: Path) -> dict[str, object]:
    """A JSON file read as :func:`strict_json_text` reads it."""
    return strict_json_text(path.read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def summary_lines(result: pytest.RunResult) -> list[str]:
    """The session's output from the plugin's ``tracegrade`` section on."""
    lines = result.outlines
    return lines[next(i for i, line in enumerate(lines) if "= tracegrade =" in line) :]


def baseline_report(path: Path, eval_ids: list[str]) -> Path:
    """A saved report in which every case of ``eval_ids`` passed."""
    passed = [CriterionResult.success("tool_trajectory_avg_score", 1.0, 1.0, {"reason": "matched"})]
    cases = [EvalCaseResult.success(eval_id, passed) for eval_id in eval_ids]
    return Path(JSONReporter().save(EvalReport.create("weather", cases), path))
