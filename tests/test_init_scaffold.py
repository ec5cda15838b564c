"""``tracegrade init``: the scaffolded project's own pytest run passes at once, offline, and shows the case
designed to fail failing, with its reason."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from tracegrade.cli.main import cli
from tracegrade.models.config import EvalConfig


def _run_pytest(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.parametrize("agent_kind", ["callable", pytest.param("langgraph", marks=pytest.mark.slow)])
def test_the_scaffold_passes_and_shows_the_failing_case(tmp_path: Path, agent_kind: str) -> None:
    project = tmp_path / "demo"
    result = CliRunner().invoke(cli, ["init", str(project), "--agent", agent_kind])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in project.iterdir()) == [
        "README.md",
        "agent.py",
        "eval_config.yaml",
        "eval_set.json",
        "pytest.ini",
        "test_agent.py",
    ]
    config = EvalConfig.from_file(project / "eval_config.yaml")
    assert config.criteria.trajectory is not None and config.criteria.trajectory.check_args  # arguments compared
    assert config.criteria.llm_judge is None and "# llm_judge:" in (project / "eval_config.yaml").read_text()

    run = _run_pytest(project, "--tracegrade-report", "reports")
    assert run.returncode == 0, run.stdout + run.stderr
    out = run.stdout
    assert "3 passed, 1 xfailed" in out
    assert "4 case(s) graded: 3 passed, 1 failed, 0 errors" in out
    assert "expected to fail (test_agent.py::test_eval_case[bergen-forecast]):" in out
    assert 'get_forecast(city="Bergen", days=3): not called' in out
    assert "XFAIL test_agent.py::test_eval_case[bergen-forecast] - the agent has no forecast step yet" in out
    assert (project / "reports" / "weather.json").is_file()


def test_without_the_xfail_mark_the_case_fails_with_its_reason(tmp_path: Path) -> None:
    project = tmp_path / "demo"
    assert CliRunner().invoke(cli, ["init", str(project)]).exit_code == 0
    cases = project / "eval_set.json"
    cases.write_text(cases.read_text().replace('"metadata": {"xfail"', '"metadata": {"note"'))
    run = _run_pytest(project)
    assert run.returncode == 1
    assert "3 passed" in run.stdout and "1 failed" in run.stdout
    assert "Failed cases: bergen-forecast" in run.stdout
    assert '- get_weather(city="Bergen")' in run.stdout


def test_init_refuses_a_directory_that_is_not_empty(tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("mine")
    result = CliRunner().invoke(cli, ["init", str(tmp_path)])
    assert result.exit_code != 0
    assert "is not an empty directory" in result.output
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]
