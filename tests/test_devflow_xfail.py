"""A case marked ``metadata.xfail`` is a strict expected failure everywhere it is graded: under the pytest plugin
(``parametrize_eval_cases`` marks it ``xfail(strict=True)``), in ``tracegrade run`` and in ``tracegrade grade
--evalset``. A marked case that fails (or errors) is reported with its reason (console, JSON, JUnit ``<skipped
type="pytest.xfail">`` as pytest's junitxml writes it) and does not fail the run; one that passes is reported as an
unexpected pass and fails the run. One function (:mod:`tracegrade.models.expectations`) decides for all of them."""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.support.grading_cli import read_report, run_cli, write_config
from tests.support.grading_traces import AgentRun, fill_store
from tracegrade.models import EvalCase, EvalSet, Invocation, ToolCall
from tracegrade.models.config import CriteriaConfig, CriterionConfig, EvalConfig

pytest_plugins = ["pytester"]

# Replies "hello there" to anything but a message containing "boom", on which it raises.
AGENT = """
def agent(text):
    if "boom" in text:
        raise RuntimeError("the agent blew up")
    return "hello there"
"""
REASON = "the agent only ever says hello"


def _case(eval_id: str, query: str, reply: str, xfail: object = None) -> EvalCase:
    metadata = {} if xfail is None else {"xfail": xfail}
    return EvalCase(eval_id=eval_id, conversation=[Invocation.simple(query, reply, None, None)], metadata=metadata)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(sys, "path", list(sys.path))  # run imports the agent's directory
    (tmp_path / "agent_for_xfail.py").write_text(AGENT, encoding="utf-8")
    return tmp_path


def _run(project: Path, cases: list[EvalCase]) -> tuple[int, str, Path]:
    EvalSet(eval_set_id="greet", eval_cases=cases).to_file(project / "evalset.json")
    out = project / "out"
    result = run_cli(
        "run",
        project / "agent_for_xfail.py",
        "--evalset",
        project / "evalset.json",
        "--out",
        out,
        "--format",
        "console,json,junit",
    )
    return result.exit_code, result.stdout, out


def _junit_cases(out: Path) -> tuple[ET.Element, dict[str, ET.Element]]:
    (found,) = out.glob("*_junit.xml")
    suite = ET.parse(found).getroot().find("testsuite")
    assert suite is not None
    return suite, {case.get("name", ""): case for case in suite.iter("testcase")}


def test_run_reports_a_case_that_fails_as_expected_and_exits_0(project: Path) -> None:
    code, stdout, out = _run(
        project,
        [
            _case("hi", "hi", "hello there"),
            _case("farewell", "bye", "goodbye, see you soon", xfail=REASON),
            _case("crash", "boom", "hello there", xfail="the agent cannot handle boom yet"),
        ],
    )
    assert code == 0, stdout
    assert "XFAIL" in stdout and f"expected to fail: {REASON}" in stdout
    report = read_report(out)
    by_id = {r.eval_id: r for r in report.results}
    assert [by_id[i].passed for i in ("hi", "farewell", "crash")] == [True, False, False]  # the grading is unchanged
    assert by_id["crash"].is_error  # an error of a marked case is an expected failure too, as in pytest
    data = json.loads(next(out.glob("*.json")).read_text(encoding="utf-8"))
    assert {r["eval_id"]: (r["expectation"], r["metadata"].get("xfail")) for r in data["results"]} == {
        "hi": (None, None),
        "farewell": ("xfail", REASON),
        "crash": ("xfail", "the agent cannot handle boom yet"),
    }
    suite, cases = _junit_cases(out)
    assert (suite.get("failures"), suite.get("errors"), suite.get("skipped")) == ("0", "0", "2")
    skipped = cases["farewell"].find("skipped")
    assert skipped is not None and skipped.get("type") == "pytest.xfail" and skipped.get("message") == REASON
    assert cases["farewell"].find("failure") is None
    assert cases["crash"].find("error") is None and cases["crash"].find("skipped") is not None


def test_run_fails_on_a_case_marked_xfail_that_passes(project: Path) -> None:
    code, stdout, out = _run(project, [_case("hi", "hi", "hello there", xfail=REASON)])
    assert code == 1, stdout
    assert "XPASS" in stdout and f"unexpected pass (marked xfail: {REASON})" in stdout
    assert read_report(out).results[0].expectation == "xpass"
    suite, cases = _junit_cases(out)
    assert (suite.get("failures"), suite.get("skipped")) == ("1", "0")
    failure = cases["hi"].find("failure")
    assert failure is not None and failure.get("message") == f"[XPASS(strict)] {REASON}"  # pytest's words


def test_run_still_fails_on_an_unmarked_failing_case(project: Path) -> None:
    code, stdout, _ = _run(project, [_case("bye", "bye", "goodbye"), _case("x", "bye", "goodbye", xfail=REASON)])
    assert code == 1, stdout


def test_grade_evalset_honours_the_mark_too(tmp_path: Path) -> None:
    runs = [AgentRun(1, "cancel order 5", "order 5 cancelled", [("cancel", {"order": 5})], case_id="cancel")]
    fill_store(tmp_path / "store.duckdb", runs).close()
    write_config(tmp_path / "config.json", EvalConfig(criteria=CriteriaConfig(tool_name_match=CriterionConfig())))
    expects_refund = Invocation.simple("cancel order 5", None, [ToolCall(name="refund")], None)
    cases = [
        EvalCase(eval_id="cancel", conversation=[expects_refund], metadata={"xfail": "refunds are not wired up"}),
        # no trace was ever recorded for this one: an error, and expected to fail all the same
        EvalCase(eval_id="ghost", conversation=[Invocation.simple("?", None, None, None)], metadata={"xfail": True}),
    ]
    EvalSet(eval_set_id="orders", eval_cases=cases).to_file(tmp_path / "evalset.json")

    def grade() -> int:
        args = ["--config", tmp_path / "config.json", "--out", tmp_path / "out", "--format", "json", "--no-record"]
        return run_cli("grade", "--store", tmp_path / "store.duckdb", "--evalset", tmp_path / "evalset.json", *args)

    result = grade()
    assert result.exit_code == 0, result.output
    assert [r.expectation for r in read_report(tmp_path / "out").results] == ["xfail", "xfail"]
    for path in (tmp_path / "out").glob("*.json"):
        path.unlink()
    cases[0].conversation = [Invocation.simple("cancel order 5", None, [ToolCall(name="cancel")], None)]
    EvalSet(eval_set_id="orders", eval_cases=cases).to_file(tmp_path / "evalset.json")
    result = grade()
    assert result.exit_code == 1, result.output
    assert [r.expectation for r in read_report(tmp_path / "out").results] == ["xpass", "xfail"]


def test_pytest_and_run_reach_the_same_verdicts(pytester: pytest.Pytester) -> None:
    cases = [
        _case("hi", "hi", "hello there"),
        _case("farewell", "bye", "goodbye, see you soon", xfail=REASON),
        _case("lucky", "hi", "hello there", xfail=True),  # marked without a reason, and it passes
    ]
    EvalSet(eval_set_id="greet", eval_cases=cases).to_file(pytester.path / "evalset.json")
    pytester.makepyfile(
        agent_for_xfail=AGENT,
        test_greet="""
from agent_for_xfail import agent
from tracegrade import CriteriaConfig, CriterionConfig, EvalConfig, assert_eval_passed, parametrize_eval_cases
from tracegrade.testing import run_eval_sync

CONFIG = EvalConfig(criteria=CriteriaConfig(rouge_match=CriterionConfig.rouge_match(0.8)))

@parametrize_eval_cases("evalset.json")
def test_case(eval_case, tracegrade_app):
    app, collector = tracegrade_app(agent)
    assert_eval_passed(run_eval_sync(app, collector, eval_case, CONFIG))
""",
    )
    result = pytester.runpytest("-p", "no:cacheprovider", "--tracegrade-report", "reports")
    result.assert_outcomes(passed=1, xfailed=1, failed=1)
    result.stdout.fnmatch_lines(
        ["3 case(s) graded: 2 passed, 1 failed, 0 errors (2 marked xfail: 1 failed as expected, 1 passed unexpectedly)"]
    )
    # the session's own report says what pytest said
    _, junit = _junit_cases(pytester.path / "reports")
    assert junit["farewell"].find("skipped") is not None and junit["lucky"].find("failure") is not None
    outcomes = {r.eval_id: r.expectation for r in read_report(pytester.path / "reports").results}
    assert outcomes == {"hi": None, "farewell": "xfail", "lucky": "xpass"}
