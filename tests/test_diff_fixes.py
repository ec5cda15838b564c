"""``tracegrade diff`` in words: a case missing from one run is said to be added or removed (not ``None``), and
tool calls are counted from 1 everywhere in its output."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from tracegrade.cli.main import cli
from tracegrade.models import ToolCall
from tracegrade.models.results import CriterionResult, EvalCaseResult, EvalReport


def _report(path: Path, cities: dict[str, str]) -> Path:
    """A report whose case ``eval_id`` called ``get_weather(city)``, passing when the city is Paris."""
    results = [
        EvalCaseResult.success(
            eval_id,
            [CriterionResult.success("m", 1.0 if city == "Paris" else 0.0, 0.5)],
            actual_tool_calls=[ToolCall(name="get_weather", args={"city": city})],
        )
        for eval_id, city in cities.items()
    ]
    path.write_text(EvalReport.create("weather", results).model_dump_json(), encoding="utf-8")
    return path


def _diff(tmp_path: Path, *options: str) -> str:
    a = _report(tmp_path / "a.json", {"gone": "Paris", "kept": "Paris"})
    b = _report(tmp_path / "b.json", {"kept": "London", "new": "Paris"})
    result = CliRunner(env={"COLUMNS": "250"}).invoke(cli, ["diff", str(a), str(b), *options], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.stdout


def test_added_and_removed_cases_are_named_so(tmp_path: Path) -> None:
    table = _diff(tmp_path)
    assert "pass -> (removed)" in table and "(added) -> pass" in table and "None" not in table
    assert json.loads(_diff(tmp_path, "--format", "json"))["cases"][0]["status_b"] is None  # JSON keeps null


def test_tool_calls_are_counted_from_1_in_the_table_and_the_flips(tmp_path: Path) -> None:
    out = _diff(tmp_path)
    assert "tool call 1 (get_weather) arguments: {'city': 'Paris'} -> {'city': 'London'}" in out
    assert "call 1: get_weather(city=Paris) became get_weather(city=London)" in out
    assert "tool call 0" not in out
