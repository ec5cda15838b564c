"""Cases keep their identity in reports and comparisons: JUnit test cases are named uniquely and stably (CI systems
merge test cases that share a name), a run holding one eval id twice is refused by ``diff`` and ``gate`` (naming the
ids) rather than compared with one of its results dropped, and trial statistics of no trials are refused."""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tracegrade.errors import InvalidValueError
from tracegrade.evaluation.compare import compare_runs
from tracegrade.evaluation.run_diff import diff_reports
from tracegrade.evaluation.trials import trial_stats
from tracegrade.models.results import CriterionResult, EvalCaseResult, EvalReport
from tracegrade.reporters import JSONReporter, JUnitXMLReporter


def _cli(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "tracegrade.cli.main", *map(str, args)]
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=120, check=False)


def _case(eval_id: str, name: str = "", passed: bool = True) -> EvalCaseResult:
    criterion = CriterionResult(criterion="quality", score=1.0 if passed else 0.0, passed=passed, threshold=0.5)
    return EvalCaseResult(eval_id=eval_id, name=name, passed=passed, criterion_results=[criterion])


def _testcase_names(xml: str) -> list[str]:
    root = ET.fromstring(xml.split("\n", 1)[1])
    return [case.get("name", "") for case in root.iter("testcase")]


def test_junit_names_cases_that_share_a_name_by_their_eval_id(tmp_path: Path) -> None:
    report = EvalReport.create(
        "s",
        [
            _case("greet-en", "Greeting"),
            _case("refund", "Refund"),
            _case("greet-fr", "Greeting", passed=False),
            _case("Refund"),  # no name: shown by its eval id, which is another case's name
        ],
    )
    JSONReporter().save(report, tmp_path / "report.json")
    done = _cli("report", "report.json", "-f", "junit", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    names = _testcase_names(done.stdout)
    assert names == ["Greeting [greet-en]", "Refund [refund]", "Greeting [greet-fr]", "Refund [Refund]"]
    # stable: the names do not depend on the order of the cases
    reordered = EvalReport.create("s", list(reversed(report.results)))
    assert _testcase_names(JUnitXMLReporter().render(reordered)) == list(reversed(names))


def test_junit_keeps_a_name_no_other_case_has_and_numbers_a_repeated_eval_id() -> None:
    report = EvalReport.create("s", [_case("a", "Alone"), _case("x", "Twice"), _case("x", "Twice"), _case("b")])
    names = _testcase_names(JUnitXMLReporter().render(report))
    assert names == ["Alone", "Twice [x]", "Twice [x] #2", "b"]
    assert len(set(names)) == len(names)


def test_trial_stats_of_no_trials_is_refused() -> None:
    with pytest.raises(InvalidValueError, match=r"at least one trial: got 0 score\(s\) and 0 verdict\(s\)"):
        trial_stats([], [])
    with pytest.raises(InvalidValueError, match=r"got 2 score\(s\) and 1 verdict\(s\)"):
        trial_stats([1.0, 0.0], [True])
    assert trial_stats([1.0, 0.0], [True, False]).mean == 0.5


def _runs(tmp_path: Path) -> None:
    baseline = EvalReport.create("s", [_case(f"c{i}") for i in range(4)])
    # c1 and c3 twice, as in two reports merged by hand: which result stands for the case?
    candidate = EvalReport.create(
        "s", [_case("c0"), _case("c1"), _case("c1", passed=False), _case("c2"), _case("c3", passed=False), _case("c3")]
    )
    JSONReporter().save(baseline, tmp_path / "base.json")
    JSONReporter().save(candidate, tmp_path / "cand.json")


def test_diff_and_gate_refuse_a_run_holding_an_eval_id_twice(tmp_path: Path) -> None:
    _runs(tmp_path)
    expected = (
        "cand.json has more than one result for 2 eval id(s): 'c1' (2 results), 'c3' (2 results); cases are paired "
        "by eval id, so each must appear once"
    )
    diff = _cli("diff", "base.json", "cand.json", cwd=tmp_path)
    assert diff.returncode == 2 and expected in diff.stderr, diff.stderr
    gate = _cli("gate", "--baseline", "base.json", "--candidate", "cand.json", "--out", "g", cwd=tmp_path)
    assert gate.returncode == 2 and expected in gate.stderr, gate.stderr
    reversed_diff = _cli("diff", "cand.json", "base.json", cwd=tmp_path)  # as the first run too
    assert reversed_diff.returncode == 2 and expected in reversed_diff.stderr


def test_the_python_api_refuses_a_run_holding_an_eval_id_twice(tmp_path: Path) -> None:
    _runs(tmp_path)
    base, cand = (EvalReport.from_file(tmp_path / name) for name in ("base.json", "cand.json"))
    with pytest.raises(InvalidValueError, match=r"^candidate has more than one result for 2 eval id\(s\)"):
        compare_runs(base, cand)
    with pytest.raises(InvalidValueError, match=r"^B has more than one result"):
        diff_reports(base, cand)
