"""The developer workflow, second pass: what a developer sees from ``tracegrade run`` and from pytest (the plugin,
``eval_test``, ``parametrize_eval_cases``) when an agent raises, when a call's arguments differ, when cases are
marked ``metadata.xfail``, when an eval file holds what JSON does not allow, and when a session is stopped.
Real processes: ``tracegrade run`` in a subprocess, pytest sessions through ``pytester`` (in a subprocess where
a Ctrl-C must not end this session too)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import tracegrade.capture.helpers
import tracegrade.evaluation.evaluator
import tracegrade.reporters
import tracegrade.testing.running  # noqa: F401  (one copy of tracegrade's modules for in-process sessions)
from tracegrade.criteria.trajectory_match import TrajectoryMatchCriterion
from tracegrade.errors import EvalSetError
from tracegrade.models import EvalCase, EvalSet, ExecutionResult, ToolCall
from tracegrade.models.config import CriterionConfig

pytest_plugins = ["pytester"]

# The agent's helper module: the frame a developer wants named when the agent fails (not tracegrade's, not json's).
HELPERS = textwrap.dedent(
    """
    import json

    WEATHER = {"Paris": "sunny", "Oslo": "snowy", "Bergen": "rainy"}

    def lookup(city):
        return WEATHER[city]

    def parse(text):
        return json.loads(text)
    """
)

# Asked about Bergen it looks up Oslo (the names match, an argument differs); Atlantis raises KeyError in helpers.
AGENT = textwrap.dedent(
    """
    import re
    from tracegrade import trace_node, trace_tool
    from helpers import lookup, parse

    @trace_tool
    def get_weather(city: str) -> str:
        return f"{city} is {lookup(city)}"

    @trace_node("agent")
    def agent(text: str) -> str:
        if "JSON" in text:
            parse("{not json")
        city = re.findall(r"[A-Z][a-z]+", text)[-1]
        return get_weather("Oslo" if city == "Bergen" else city) + "."
    """
)

LOOKUP_LINE = HELPERS.splitlines().index("    return WEATHER[city]") + 1
PARSE_LINE = HELPERS.splitlines().index("    return json.loads(text)") + 1

CONFIG = {"criteria": {"trajectory": {"threshold": 1.0, "check_args": True}}}


def _case(eval_id: str, question: str, city: str, **metadata: object) -> dict:
    return {
        "eval_id": eval_id,
        "metadata": metadata,
        "conversation": [
            {
                "user_content": {"role": "user", "content": question},
                "expected_tool_trajectory": [{"name": "get_weather", "args": {"city": city}}],
            }
        ],
    }


def _cases(**marks: object) -> dict:
    """Paris (passes), Bergen (Oslo looked up instead), Atlantis (the agent raises); ``marks``: xfail by case."""
    cases = [
        _case("paris", "Weather in Paris?", "Paris"),
        _case("bergen", "Weather in Bergen?", "Bergen"),
        _case("atlantis", "Weather in Atlantis?", "Atlantis"),
    ]
    for case in cases:
        if case["eval_id"] in marks:
            case["metadata"]["xfail"] = marks[case["eval_id"]]
    return {"eval_set_id": "weather", "eval_cases": cases}


def _write_project(path: Path, cases: dict) -> Path:
    (path / "helpers.py").write_text(HELPERS, encoding="utf-8")
    (path / "weather_agent.py").write_text(AGENT, encoding="utf-8")
    (path / "cases.json").write_text(json.dumps(cases), encoding="utf-8")
    (path / "config.json").write_text(json.dumps(CONFIG), encoding="utf-8")
    return path


def _tracegrade(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "NO_COLOR": "1"}
    command = [sys.executable, "-m", "tracegrade.cli.main", *args]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def _traceback_files(text: str) -> list[str]:
    return re.findall(r'File "([^"]+)", line \d+', text)


# ---- 1. an agent that raises: what, where in the user's code, and the traceback without tracegrade ----


def test_tracegrade_run_names_the_exception_and_the_users_frame_and_keeps_the_traceback(tmp_path: Path) -> None:
    cases = _cases()
    cases["eval_cases"].append(_case("garbled", "JSON for Paris?", "Paris"))
    project = _write_project(tmp_path, cases)
    run = _tracegrade(
        project, "run", "weather_agent.py", "--evalset", "cases.json", "--config", "config.json",
        "--out", "out", "--format", "console,json,junit", "-v",
    )  # fmt: skip
    assert run.returncode == 1, run.stderr
    (json_file,) = (project / "out").glob("*.json")
    results = {r["eval_id"]: r for r in json.loads(json_file.read_text(encoding="utf-8"))["results"]}
    atlantis = results["atlantis"]
    # the innermost frame of the user's code, relative to where the run started, not tracegrade's trace_tool
    assert atlantis["error"] == f"Agent error on turn 0: KeyError: 'Atlantis' (at helpers.py:{LOOKUP_LINE}, in lookup)"
    # raised inside the json module: the helper that called it is named
    assert results["garbled"]["error"].startswith("Agent error on turn 0: JSONDecodeError: Expecting property name")
    assert results["garbled"]["error"].endswith(f"(at helpers.py:{PARSE_LINE}, in parse)")
    trace = atlantis["error_traceback"]
    files = _traceback_files(trace)
    # from the agent's entry point down; none of tracegrade's frames (the turn, trace_node, trace_tool), nor
    # the thread or event loop that called the agent
    assert [Path(f).name for f in files] == ["weather_agent.py", "weather_agent.py", "helpers.py"], trace
    assert trace.rstrip().endswith("KeyError: 'Atlantis'")
    assert results["paris"]["error_traceback"] is None
    # JUnit: the <error> body is the message and then that traceback, as pytest's junitxml writes an error
    (junit_file,) = (project / "out").glob("*_junit.xml")
    error = ET.parse(junit_file).getroot().find(".//testcase[@name='atlantis']/error")
    assert error is not None and error.get("message") == atlantis["error"]
    assert error.text is not None and trace.strip() in error.text
    # the console, with -v: the error line with its place, then the traceback
    assert f"KeyError: 'Atlantis' (at helpers.py:{LOOKUP_LINE}, in lookup)" in run.stdout
    assert "Traceback (most recent call last):" in run.stdout
    assert f'helpers.py", line {LOOKUP_LINE}, in lookup' in run.stdout


def test_pytest_shows_where_the_agent_raised_in_the_failure(pytester: pytest.Pytester) -> None:
    _write_project(pytester.path, _cases())
    pytester.makepyfile(
        test_weather="""
        from weather_agent import agent
        from tracegrade import EvalConfig, assert_eval_passed, parametrize_eval_cases
        from tracegrade.testing import run_eval_sync

        @parametrize_eval_cases("cases.json")
        def test_case(eval_case, tracegrade_app):
            app, collector = tracegrade_app(agent)
            assert_eval_passed(run_eval_sync(app, collector, eval_case, EvalConfig.from_file("config.json")))
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider", "-k", "atlantis")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            f"*error: Agent error on turn 0: KeyError: 'Atlantis' (at helpers.py:{LOOKUP_LINE}, in lookup)",
            "*Traceback (most recent call last):",
            f"*helpers.py*, line {LOOKUP_LINE}, in lookup",
        ]
    )
    assert not any("tracegrade" in Path(f).parts for f in _traceback_files(result.stdout.str()))


def test_an_agent_that_raises_while_imported_is_named_at_its_own_line(tmp_path: Path) -> None:
    _write_project(tmp_path, _cases())
    # os.environ[...] raises inside the os module: the line to fix is the agent's
    (tmp_path / "keyed_agent.py").write_text(
        "import os\nKEY = os.environ['DEVFLOW2_NO_SUCH_KEY']\nagent = print\n", encoding="utf-8"
    )
    run = _tracegrade(tmp_path, "run", "keyed_agent.py", "--evalset", "cases.json", "--out", "out")
    assert run.returncode == 2
    assert f"importing it raised KeyError: 'DEVFLOW2_NO_SUCH_KEY' (at {tmp_path / 'keyed_agent.py'}:2)" in run.stderr


# ---- 2. same tool name, other arguments: the reason says which call and which argument ----


def test_the_trajectory_reason_names_the_call_and_the_argument_that_differ(pytester: pytest.Pytester) -> None:
    _write_project(pytester.path, _cases())
    result = _tracegrade(pytester.path, "run", "weather_agent.py", "--evalset", "cases.json", "--config",
                         "config.json", "--out", "out", "--format", "json")  # fmt: skip
    assert result.returncode == 1, result.stderr
    (report,) = (pytester.path / "out").glob("*.json")
    bergen = next(r for r in json.loads(report.read_text())["results"] if r["eval_id"] == "bergen")
    reason = bergen["criterion_results"][0]["details"]["reason"]
    assert reason == (
        "Matched 0% of expected tools. Expected ['get_weather'], got ['get_weather']. 1 of the expected calls had "
        "different arguments: get_weather (expected #0): key 'city': expected 'Bergen', got 'Oslo'."
    )


def test_the_reason_follows_nested_arguments_into_lists_and_cuts_long_values() -> None:
    long = "x" * 500
    expected = [
        ToolCall(name="search", args={"query": {"terms": ["rain", "Bergen"], "limit": 5}}),
        ToolCall(name="search", args={"query": {"terms": ["sun"], "limit": 5}, "note": long}),
        ToolCall(name="book", args={"day": 1}),
        ToolCall(name="book", args={"day": 2}),
    ]
    actual = [
        ToolCall(name="search", args={"query": {"terms": ["rain", "Oslo"], "limit": 5}}),
        ToolCall(name="search", args={"query": {"terms": ["sun"], "limit": 5}, "note": long + "y"}),
        ToolCall(name="book", args={"day": 3}),
        ToolCall(name="book", args={"day": 4}),
    ]
    case = EvalCase.single_turn("c", "q", expected_tools=expected)
    criterion = TrajectoryMatchCriterion(CriterionConfig.trajectory(check_args=True))
    reason = criterion.evaluate_sync(ExecutionResult(tool_calls=actual), case).details["reason"]
    assert "search (expected #0): key 'query.terms[1]': expected 'Bergen', got 'Oslo'" in reason
    assert "search (expected #1): key 'note': expected 'xxx" in reason
    assert "; and 2 more call(s)." in reason  # the two book calls: in the details' missing entries
    assert len(reason) < 600  # the 500-character values are cut


def test_swapped_calls_of_one_tool_are_explained_position_by_position() -> None:
    expected = [
        ToolCall(name="get_weather", args={"city": "Paris"}),
        ToolCall(name="get_weather", args={"city": "Oslo"}),
    ]
    case = EvalCase.single_turn("c", "q", expected_tools=expected)
    criterion = TrajectoryMatchCriterion(CriterionConfig.trajectory(check_args=True))  # EXACT
    reason = criterion.evaluate_sync(ExecutionResult(tool_calls=expected[::-1]), case).details["reason"]
    assert reason == (
        "Matched 0% of expected tools. Expected ['get_weather', 'get_weather'], got ['get_weather', 'get_weather']. "
        "2 of the expected calls had different arguments: get_weather (expected #0): key 'city': expected 'Paris', "
        "got 'Oslo'; get_weather (expected #1): key 'city': expected 'Oslo', got 'Paris'."
    )


# ---- 3. eval_test and cases marked metadata.xfail: the test agrees with the session report ----

EVAL_TESTS = """
from weather_agent import agent
from tracegrade import EvalConfig
from tracegrade.testing import eval_test

CONFIG = EvalConfig.from_file("config.json")

@eval_test("cases.json", config=CONFIG)
def test_weather(tracegrade_app):
    return tracegrade_app(agent)
"""


def test_eval_test_over_cases_failing_as_marked_is_xfailed(pytester: pytest.Pytester) -> None:
    _write_project(pytester.path, _cases(bergen="looks up Oslo (bug 12)", atlantis=True))
    pytester.makepyfile(test_eval=EVAL_TESTS)
    result = pytester.runpytest("-p", "no:cacheprovider", "-rx")
    result.assert_outcomes(xfailed=1)
    # the session's summary explains both cases under the test, as pytest does not print an xfailed test's failure
    result.stdout.fnmatch_lines(
        [
            "3 case(s) graded: 1 passed, 1 failed, 1 errors (2 marked xfail: 2 failed as expected, 0 passed *)",
            "expected to fail (test_eval.py::test_weather):",
            "  bergen: FAIL",
            "*get_weather (expected #0): key 'city': expected 'Bergen', got 'Oslo'*",
            "  atlantis: ERROR",
        ]
    )
    result.stdout.fnmatch_lines(["XFAIL test_eval.py::test_weather - bergen: looks up Oslo (bug 12); atlantis: *"])
    assert result.ret == 0


def test_eval_test_with_a_marked_case_that_passes_fails_as_a_strict_xpass(pytester: pytest.Pytester) -> None:
    _write_project(pytester.path, _cases(paris="flaky upstream", bergen="bug 12", atlantis="no such city"))
    pytester.makepyfile(test_eval=EVAL_TESTS)
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*[[]XPASS(strict)[]] 1 case(s) marked metadata.xfail passed*", "*  paris: flaky upstream"]
    )


def test_eval_test_still_fails_on_an_unmarked_case_that_fails(pytester: pytest.Pytester) -> None:
    _write_project(pytester.path, _cases(atlantis="no such city"))
    pytester.makepyfile(test_eval=EVAL_TESTS)
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*Evaluation pass rate 50.0% below threshold 100.0%. Failed cases: bergen"])


# ---- 4. metadata.xfail must be a reason, true, false or null ----


@pytest.mark.parametrize("value", [["bug 12"], 0, 1.5, {"reason": "bug"}], ids=["list", "zero", "number", "object"])
def test_an_xfail_mark_of_another_type_is_refused_naming_the_case(tmp_path: Path, value: object) -> None:
    _write_project(tmp_path, _cases(bergen=value))
    with pytest.raises(EvalSetError) as refused:
        EvalSet.from_file(tmp_path / "cases.json")
    (problem,) = refused.value.problems
    assert problem[0] == "$.eval_cases[1].metadata"
    assert "case 'bergen': metadata.xfail must be a reason (a string), true, false or null" in problem[1]


def test_parametrize_over_a_file_with_a_bad_xfail_mark_fails_collection_saying_why(pytester: pytest.Pytester) -> None:
    _write_project(pytester.path, _cases(bergen=["bug 12"]))
    pytester.makepyfile(
        test_cases="""
        from tracegrade import parametrize_eval_cases

        @parametrize_eval_cases("cases.json")
        def test_case(eval_case):
            pass
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.INTERRUPTED  # a collection error
    result.stdout.fnmatch_lines(["*case 'bergen': metadata.xfail must be a reason (a string), true, false or null*"])


# ---- 5. NaN and Infinity are not JSON ----


def test_nan_and_infinity_in_an_eval_file_are_refused_with_line_and_column(tmp_path: Path) -> None:
    _write_project(tmp_path, _cases())
    text = json.dumps(_cases(), indent=1).replace('"metadata": {}', '"metadata": {"weight": NaN}', 1)
    text = text.replace('"metadata": {}', '"metadata": {"weight": -Infinity, "note": "NaN or Infinity"}', 1)
    (tmp_path / "cases.json").write_text(text, encoding="utf-8")
    lines = text.splitlines()
    nan_line = next(i for i, line in enumerate(lines, 1) if "NaN}" in line)
    inf_line = next(i for i, line in enumerate(lines, 1) if "-Infinity" in line)
    run = _tracegrade(tmp_path, "validate", "cases.json")
    assert run.returncode == 2
    nan_column = lines[nan_line - 1].index("NaN}") + 1
    inf_column = lines[inf_line - 1].index("-Infinity") + 1
    assert f"NaN at line {nan_line}, column {nan_column} is not a JSON value" in run.stdout + run.stderr
    assert f"-Infinity at line {inf_line}, column {inf_column} is not a JSON value" in run.stdout + run.stderr
    assert "cases.json" in run.stdout + run.stderr
    # the same words in a string are text
    (tmp_path / "cases.json").write_text(text.replace("NaN}", "1}").replace("-Infinity,", "2,"), encoding="utf-8")
    assert len(EvalSet.from_file(tmp_path / "cases.json").eval_cases) == 3


# ---- 6. a stopped session says it is incomplete, gate or no gate ----


@pytest.mark.parametrize(("stop_at", "graded"), [("paris", 0), ("atlantis", 2)])
def test_an_interrupted_session_says_how_many_cases_it_graded_of_how_many(
    pytester: pytest.Pytester, stop_at: str, graded: int
) -> None:
    _write_project(pytester.path, _cases())
    pytester.makepyfile(
        test_a_cases="""
        from weather_agent import agent
        from tracegrade import EvalConfig, parametrize_eval_cases
        from tracegrade.testing import run_eval_sync

        @parametrize_eval_cases("cases.json")
        def test_case(eval_case, tracegrade_app):
            app, collector = tracegrade_app(agent)
            run_eval_sync(app, collector, eval_case, EvalConfig.from_file("config.json"))
        """,
        test_b_file=EVAL_TESTS,  # three more cases, in one test that never runs
    )
    # Ctrl-C as the case is about to run
    pytester.makeconftest(
        f"def pytest_runtest_call(item):\n    if '[{stop_at}]' in item.nodeid:\n        raise KeyboardInterrupt\n"
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")  # a Ctrl-C here would end this session
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines([f"incomplete: interrupted after {graded} of 6 cases"])
