"""``tracegrade run`` as a new user meets it: an agent file that cannot be loaded (a syntax error, a module that
raises while imported, an object that is not an agent) is bad input (exit 2, one message naming the file and line),
not a traceback and the exit code of a failing case; an agent file imports the modules beside it and a module name
is found in the current directory, as ``python agent.py`` and ``python -m agent`` find them; a report that cannot be
written fails the run (exit 2) as it fails ``grade``; ``--format`` chooses the reports as ``grade``'s does."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.support.grading_cli import read_report, run_cli
from tracegrade.models import EvalCase, EvalSet, Invocation

REPLY = "hello there"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An eval set of two cases an echoing agent passes; the run's sys.path changes are undone afterwards."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    cases = [EvalCase(eval_id=q, conversation=[Invocation.simple(q, REPLY, None, None)]) for q in ("hi", "yo")]
    EvalSet(eval_set_id="greet", eval_cases=cases).to_file(tmp_path / "evalset.json")
    return tmp_path


def _run(project: Path, agent: str | Path, *options: str | Path) -> tuple[int, str]:
    result = run_cli("run", agent, "--evalset", project / "evalset.json", *options)
    return result.exit_code, result.stderr


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("def agent(:\n", "syntax error at {file}:1: invalid syntax"),
        ("x = 1\nraise RuntimeError('no API key in the environment')\n", "importing it raised RuntimeError: no API key "
         "in the environment (at {file}:2)"),
        ("agent = 42\n", "cannot run the agent found in {arg}: cannot evaluate an agent of type int: pass a sync or "
         "async callable"),
    ],
    ids=["syntax-error", "raises-on-import", "not-an-agent"],
)  # fmt: skip
def test_an_agent_that_cannot_be_loaded_is_bad_input_named_with_its_file_and_line(
    project: Path, source: str, expected: str
) -> None:
    agent = project / "broken_agent.py"
    agent.write_text(source, encoding="utf-8")
    code, stderr = _run(project, agent, "--out", project / "out")
    assert code == 2, stderr
    assert "Traceback" not in stderr
    assert expected.format(file=agent, arg=repr(str(agent))) in stderr, stderr
    assert not (project / "out").exists()  # nothing ran, nothing written


def test_an_agent_file_imports_the_modules_beside_it_from_any_directory(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = project / "bot"
    package.mkdir()
    (package / "replies_for_run_test.py").write_text(f"def reply(text):\n    return {REPLY!r}\n", encoding="utf-8")
    (package / "agent.py").write_text(
        "from replies_for_run_test import reply\n\ndef agent(text):\n    return reply(text)\n", encoding="utf-8"
    )
    monkeypatch.chdir(project)  # not the agent's directory
    code, stderr = _run(project, "bot/agent.py", "--out", project / "out")
    assert code == 0, stderr
    assert read_report(project / "out").summary.passed_cases == 2


def test_a_module_name_is_found_in_the_current_directory(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (project / "greeter_for_run_test.py").write_text(f"def agent(text):\n    return {REPLY!r}\n", encoding="utf-8")
    monkeypatch.chdir(project)
    code, stderr = _run(project, "greeter_for_run_test", "--out", project / "out")
    assert code == 0, stderr
    assert read_report(project / "out").summary.passed_cases == 2


def test_a_missing_module_says_what_agent_may_be(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(project)
    code, stderr = _run(project, "no_such_agent_module", "--out", project / "out")
    assert code == 2
    assert "No module named 'no_such_agent_module'" in stderr
    assert "a .py file or a module importable from the current directory" in stderr


def test_a_report_that_cannot_be_written_fails_the_run_naming_it(project: Path) -> None:
    (project / "agent.py").write_text(f"def agent(text):\n    return {REPLY!r}\n", encoding="utf-8")
    (project / "taken").write_text("a file, not a directory", encoding="utf-8")
    code, stderr = _run(project, project / "agent.py", "--out", project / "taken" / "reports", "--format", "json")
    assert code == 2, stderr
    assert "not every report asked for was written" in stderr
    assert f"cannot write {project / 'taken' / 'reports'}: Not a directory" in stderr


def test_format_chooses_the_reports_and_each_file_written_is_named(project: Path) -> None:
    (project / "agent.py").write_text(f"def agent(text):\n    return {REPLY!r}\n", encoding="utf-8")
    code, stderr = _run(project, project / "agent.py", "--out", project / "out", "--format", "json,junit")
    assert code == 0, stderr
    written = sorted(p.name for p in (project / "out").iterdir())
    assert len(written) == 2 and written[0].endswith(".json") and written[1].endswith("_junit.xml"), written
    for name in written:
        assert f"wrote {project / 'out' / name}" in stderr
    assert read_report(project / "out").config_used["reporter"]["enabled"] is True  # the config given, as run
    code, stderr = _run(project, project / "agent.py", "--format", "pdf")
    assert code == 2 and "unknown format(s) pdf" in stderr
