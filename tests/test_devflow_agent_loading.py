"""``tracegrade run`` on an agent laid out as a Google ADK project lays it out: a package directory
``my_agent/`` whose ``agent.py`` defines ``root_agent`` and imports its tools relatively, and whose
``__init__.py`` does ``from . import agent``. The directory (as ``adk run my_agent`` takes it) and the module name
``my_agent.agent`` both run it; the file ``my_agent/agent.py`` is refused with how to name it instead, and a
directory that is no agent package is refused saying why. The agent here is a plain callable (ADK itself is not
installed in the main venv): what is under test is finding it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.support.grading_cli import read_report, run_cli
from tracegrade.models import EvalCase, EvalSet, Invocation

REPLY = "it is rainy in Bergen"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> tuple[Path, str]:
    """An ADK-style agent package (named after the test) and an eval set its agent passes; the working directory
    is the project; sys.path is restored and the modules imported from the project forgotten afterwards."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    name = f"adk_style_{request.node.name.split('[')[0].removeprefix('test_')}"[:60]
    request.addfinalizer(lambda: _forget_modules_under(tmp_path))
    package = tmp_path / name
    package.mkdir()
    (package / "__init__.py").write_text("from . import agent\n", encoding="utf-8")
    (package / "tools.py").write_text(f"def weather(city):\n    return {REPLY!r}\n", encoding="utf-8")
    (package / "agent.py").write_text(
        "from .tools import weather\n\n\ndef root_agent(text):\n    return weather('Bergen')\n", encoding="utf-8"
    )
    case = EvalCase(eval_id="bergen", conversation=[Invocation.simple("weather in Bergen?", REPLY, None, None)])
    EvalSet(eval_set_id="weather", eval_cases=[case]).to_file(tmp_path / "evalset.json")
    monkeypatch.chdir(tmp_path)
    return tmp_path, name


def _forget_modules_under(directory: Path) -> None:
    for name, module in list(sys.modules.items()):
        if str(getattr(module, "__file__", None) or "").startswith(str(directory)):
            del sys.modules[name]


def _run(project: Path, agent: str) -> tuple[int, str]:
    result = run_cli("run", agent, "--evalset", project / "evalset.json", "--out", project / "out", "--format", "json")
    return result.exit_code, result.stderr


def test_the_package_directory_runs_its_root_agent(project: tuple[Path, str]) -> None:
    path, name = project
    code, stderr = _run(path, name)
    assert code == 0, stderr
    assert read_report(path / "out").results[0].actual_response == REPLY


def test_the_module_name_finds_root_agent(project: tuple[Path, str]) -> None:
    path, name = project
    code, stderr = _run(path, f"{name}.agent")
    assert code == 0, stderr
    assert read_report(path / "out").summary.passed_cases == 1


def test_the_agent_file_of_a_package_is_refused_with_what_to_pass(project: tuple[Path, str]) -> None:
    path, name = project
    code, stderr = _run(path, f"{name}/agent.py")
    assert code == 2
    assert f"{name}/agent.py uses relative imports: it is a module of the package {name}" in stderr, stderr
    assert f"pass the package directory ({name})" in stderr and f"its module name {name}.agent" in stderr
    assert "Traceback" not in stderr


def test_a_directory_that_is_no_agent_package_says_why(project: tuple[Path, str]) -> None:
    path, _ = project
    (path / "notes").mkdir()
    code, stderr = _run(path, "notes")
    assert code == 2
    assert "notes is a directory with neither __init__.py nor agent.py" in stderr, stderr
    (path / "empty_pkg_for_run").mkdir()
    (path / "empty_pkg_for_run" / "__init__.py").write_text("", encoding="utf-8")
    (path / "empty_pkg_for_run" / "agent.py").write_text("x = 1\n", encoding="utf-8")
    code, stderr = _run(path, "empty_pkg_for_run")
    assert code == 2
    assert "neither empty_pkg_for_run nor empty_pkg_for_run.agent defines any of graph," in stderr, stderr
    assert "root_agent" in stderr


def test_a_directory_named_like_an_imported_module_is_not_mistaken_for_it(project: tuple[Path, str]) -> None:
    path, _ = project
    (path / "json").mkdir()
    (path / "json" / "__init__.py").write_text("root_agent = print\n", encoding="utf-8")
    code, stderr = _run(path, "json")
    assert code == 2
    assert "cannot be imported as the package json: a different module of that name" in stderr, stderr
