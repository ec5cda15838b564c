"""The pytest plugin on sessions run as users run them (real pytest processes, with and without pytest-xdist): a
session that runs only part of the eval tests (``-k``, ``-m``, ``--deselect``, test ids on the command line) is
reported but neither recorded nor gated, so it never becomes the next session's baseline; a case id holding a
newline stays on one line of the summary; a store that is no store is named by pytest's option; a NaN score is no
"nan" string in the session's JUnit report. Checked: exit codes, the terminal summary, the report files and a real
DuckDB store read back."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

from tests.support.plugin_sessions import (
    baseline_report,
    make_project,
    strict_json,
    strict_json_text,
    summary_lines,
    weather_case,
)
from tracegrade.cli.main import cli
from tracegrade.evaluation.run_records import list_runs
from tracegrade.store import TraceStore

pytest_plugins = ["pytester"]

# three passing cases and one failing (the agent looks up Oslo when asked about Bergen)
CASES = [weather_case(f"paris-{i}", "Paris?") for i in range(3)] + [weather_case("bergen", "Bergen?", "Bergen")]
KEEP = ["--tracegrade-store", "runs.duckdb", "--tracegrade-baseline", "latest", "--tracegrade-report", "out"]
# marks the second Paris case `slow`, for `-m "not slow"` to deselect it, and a test that grades no case `unit`
SLOW_CONFTEST = """
import pytest

def pytest_configure(config):
    config.addinivalue_line("markers", "slow: a slow case")
    config.addinivalue_line("markers", "unit: a test that grades no case")

def pytest_collection_modifyitems(items):
    for item in items:
        if "paris-1" in item.nodeid:
            item.add_marker(pytest.mark.slow)
        if "test_helper" in item.nodeid:
            item.add_marker(pytest.mark.unit)
"""
DESELECTED = "the session deselected 1 eval test (-k, -m, --deselect, --sw)"
NAMED = "the session ran only the tests named on its command line"


def _runs(pytester: pytest.Pytester) -> list[int]:
    """The cases of each run recorded in the project's store, oldest first."""
    with TraceStore(pytester.path / "runs.duckdb") as store:
        return [run.total_cases for run in reversed(list_runs(store))]


@pytest.mark.parametrize(
    ("selection", "why", "exit_code"),
    [
        (["-k", "not paris-1"], DESELECTED, pytest.ExitCode.TESTS_FAILED),
        (["-m", "not slow"], DESELECTED, pytest.ExitCode.TESTS_FAILED),
        (
            ["test_weather.py::test_case[paris-0]", "test_weather.py::test_case[bergen]"],
            NAMED,
            pytest.ExitCode.TESTS_FAILED,
        ),
        # xdist: the workers deselect, the controller reports
        (["-n", "2", "-k", "paris"], DESELECTED, pytest.ExitCode.OK),
    ],
    ids=["-k", "-m", "test ids", "-k under xdist"],
)
def test_a_session_running_part_of_the_eval_tests_is_reported_but_neither_recorded_nor_gated(
    pytester: pytest.Pytester, selection: list[str], why: str, exit_code: int
) -> None:
    # recorded, a part of the run became the store's `latest`: the next full session gated against it compared
    # those few cases and saw the rest as missing
    make_project(pytester, {"weather": CASES})
    pytester.makeconftest(SLOW_CONFTEST)
    first = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--tracegrade-store", "runs.duckdb")
    first.assert_outcomes(passed=3, failed=1)
    assert _runs(pytester) == [4]

    part = pytester.runpytest_subprocess("-p", "no:cacheprovider", *KEEP, *selection)
    assert part.ret == exit_code
    summary = summary_lines(part)
    assert f"not gated or recorded: {why}, so these cases are only part of the run" in summary
    assert not any(line.startswith("baseline ") for line in summary)  # no gate verdict
    report = strict_json(pytester.path / "out" / "weather.json")
    assert report["metadata"]["incomplete"] == why  # type: ignore[index]
    assert _runs(pytester) == [4]  # the part did not become `latest`: the next session gates against the full run


@pytest.mark.parametrize("selection", [["-m", "not unit"], ["test_weather.py"]], ids=["-m", "a file"])
def test_a_selection_that_keeps_every_eval_test_is_a_full_run(pytester: pytest.Pytester, selection: list[str]) -> None:
    # leaving out a test that grades no case (a unit test beside the evals) leaves the eval run whole
    make_project(pytester, {"weather": CASES})
    pytester.makeconftest(SLOW_CONFTEST)
    pytester.makepyfile(test_helpers="def test_helper():\n    assert True\n")
    assert (
        pytester.runpytest_subprocess("-p", "no:cacheprovider", "--tracegrade-store", "runs.duckdb").ret
        == pytest.ExitCode.TESTS_FAILED
    )
    again = pytester.runpytest_subprocess("-p", "no:cacheprovider", *KEEP, *selection)
    again.assert_outcomes(passed=3, failed=1)
    summary = summary_lines(again)
    assert not any(line.startswith("not gated") for line in summary), summary
    assert any(line.startswith("baseline ") and "(4 paired cases" in line for line in summary)
    assert "incomplete" not in strict_json(pytester.path / "out" / "weather.json")["metadata"]  # type: ignore[operator]
    assert _runs(pytester) == [4, 4]


# A result built in code (or read from a saved report) may hold an id that an eval set refuses: a newline in it.
SAVED_RESULT_TEST = """
from tracegrade import assert_eval_passed
from tracegrade.models.results import CriterionResult, EvalCaseResult

def test_saved_result():
    failed = CriterionResult.success("tool_trajectory_avg_score", 0.0, 1.0, {"reason": "no call"})
    assert_eval_passed(EvalCaseResult.success("two\\nlines", [failed]))
"""


def test_a_case_id_holding_a_newline_stays_on_one_line(pytester: pytest.Pytester) -> None:
    cases = [
        weather_case("paris", "Paris?"),
        weather_case("bergen", "Bergen?", "Bergen"),
        weather_case("known", "Bergen?", "Bergen", xfail="looks up Oslo"),
    ]
    make_project(pytester, {"odd": cases})
    pytester.makepyfile(test_saved=SAVED_RESULT_TEST)
    # the baseline, saved by a version that took any id, holds a case this session lacks, its id split by a newline
    ids = [str(case["eval_id"]) for case in cases] + ["gone\r\nmissing"]
    baseline = baseline_report(pytester.path / "baseline.json", ids)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--tracegrade-baseline", str(baseline))
    result.assert_outcomes(passed=1, failed=2, xfailed=1)
    summary = summary_lines(result)
    assert any(r"(gone\r\nmissing)" in line for line in summary), summary  # the gate's reason lists it
    assert any(line.startswith("  bergen: pass->fail") for line in summary), summary
    # the assertion's message: the id on its line, in the header's list and as the case's title
    result.stdout.fnmatch_lines([r"E * Failed cases: two\nlines", r"E * two\nlines: FAIL"])
    # no line is the tail of a split id
    assert not any(line.lstrip("E ").startswith(("lines", "missing")) for line in result.outlines)


def _text_file(path: Path) -> None:
    path.write_text("not a database\n" * 100)


def _foreign_database(path: Path) -> None:
    duckdb.connect(str(path)).execute("CREATE TABLE orders (id INTEGER)").close()


@pytest.mark.parametrize("make_store", [_text_file, _foreign_database], ids=["not DuckDB", "not tracegrade's"])
def test_a_file_that_is_no_store_is_named_by_the_option_of_the_entry_point_used(
    pytester: pytest.Pytester, make_store: object
) -> None:
    make_project(pytester, {"weather": CASES[:1]})
    store = pytester.path / "runs.duckdb"
    make_store(store)  # type: ignore[operator]
    recorded = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--tracegrade-store", "runs.duckdb")
    assert recorded.ret == pytest.ExitCode.TESTS_FAILED
    [problem] = [line for line in summary_lines(recorded) if line.startswith("problem: ")]
    assert "point --tracegrade-store at" in problem and " --store" not in problem, problem

    gated = pytester.runpytest_subprocess(*KEEP[:4])
    assert gated.ret == pytest.ExitCode.USAGE_ERROR
    assert "point --tracegrade-store at" in gated.stderr.str() and " --store" not in gated.stderr.str()

    # the command line's option is --store
    listed = CliRunner().invoke(cli, ["runs", "--store", str(store)])
    assert listed.exit_code == 2
    assert "point --store at" in listed.output


# A criterion whose score is no number (NaN), as a custom criterion may give.
NAN_TEST_FILE = """
import math
from agent import agent
from tracegrade import CriteriaConfig, CriterionConfig, EvalConfig, SyncCriterion, parametrize_eval_cases
from tracegrade.models.results import CriterionResult
from tracegrade.testing import run_eval_sync

CONFIG = EvalConfig(criteria=CriteriaConfig(trajectory=CriterionConfig.trajectory(check_args=True)))

class Steadiness(SyncCriterion):
    name = "steadiness"
    requires_reference = False

    def evaluate_sync(self, actual, expected):
        return CriterionResult(criterion=self.name, score=math.nan, passed=True, threshold=self.threshold)

@parametrize_eval_cases("cases.json")
def test_case(eval_case, tracegrade_app):
    app, collector = tracegrade_app(agent)
    run_eval_sync(app, collector, eval_case, CONFIG, extra_criteria=[Steadiness()])
"""


def test_junit_properties_write_a_nan_score_as_the_json_report_does(pytester: pytest.Pytester) -> None:
    make_project(pytester, {})
    pytester.makepyfile(test_nan=NAN_TEST_FILE)
    pytester.path.joinpath("cases.json").write_text(json.dumps({"eval_set_id": "weather", "eval_cases": CASES[:2]}))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--tracegrade-report", "out")
    result.assert_outcomes(passed=2)
    report = strict_json(pytester.path / "out" / "weather.json")
    assert report["summary"]["criterion_stats"]["steadiness"]["avg_score"] is None  # type: ignore[index]
    properties = {
        p.get("name"): p.get("value") for p in ET.parse(pytester.path / "out" / "weather_junit.xml").iter("property")
    }
    assert strict_json_text(properties["criterion.steadiness"])["avg_score"] is None
    assert not [name for name, value in properties.items() if "nan" in str(value).lower()], properties
