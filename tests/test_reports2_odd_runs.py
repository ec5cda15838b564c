"""``diff`` and ``gate`` on odd runs: an empty run is named as such (not taken for a run of another eval set), a case
whose trial mean was saved as null is compared by its trial counts (no traceback), and ``--format json`` output is
strict JSON even when a case only one run has holds a score that is no number."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import orjson

from tracegrade.models.results import CriterionResult, EvalCaseResult, EvalReport, TrialStats
from tracegrade.reporters import JSONReporter


def _cli(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "tracegrade.cli.main", *map(str, args)]
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=120, check=False)


def _case(eval_id: str, passed: bool = True, score: float | None = None, **fields: object) -> EvalCaseResult:
    value = (1.0 if passed else 0.0) if score is None else score
    criterion = CriterionResult(criterion="quality", score=value, passed=passed, threshold=0.5)
    return EvalCaseResult(eval_id=eval_id, passed=passed, criterion_results=[criterion], **fields)  # type: ignore[arg-type]


def _save(tmp_path: Path, name: str, cases: list[EvalCaseResult]) -> None:
    JSONReporter().save(EvalReport.create("s", cases), tmp_path / name)


def test_gate_names_a_run_without_case_results(tmp_path: Path) -> None:
    _save(tmp_path, "base.json", [_case(f"c{i}") for i in range(20)])
    _save(tmp_path, "empty.json", [])
    done = _cli("gate", "--baseline", "base.json", "--candidate", "empty.json", "--out", "g", cwd=tmp_path)
    assert done.returncode == 2
    assert "Error: empty.json has no case results: nothing was compared" in done.stderr
    assert "the empty.json run has no case results (did its grading fail?)" in done.stdout
    both = _cli("gate", "--baseline", "empty.json", "--candidate", "empty.json", "--out", "g", cwd=tmp_path)
    assert both.returncode == 2 and "Error: empty.json and empty.json have no case results" in both.stderr


def test_gate_and_diff_compare_a_case_whose_trial_mean_was_saved_as_null(tmp_path: Path) -> None:
    def trials(mean: float) -> TrialStats:
        return TrialStats(trials=4, passed=1, mean=mean, ci_low=0, ci_high=1, pass_at_k=1, pass_hat_k=0, flaky=True)

    _save(tmp_path, "base.json", [_case(f"c{i}") for i in range(20)])
    _save(
        tmp_path,
        "cand.json",
        [_case("c0", passed=False, trial_stats=trials(float("nan")))] + [_case(f"c{i}") for i in range(1, 20)],
    )
    assert json.loads((tmp_path / "cand.json").read_text())["results"][0]["trial_stats"]["mean"] is None
    gate = _cli(
        "gate", "--baseline", "base.json", "--candidate", "cand.json", "--format", "json", "--out", "g", cwd=tmp_path
    )
    assert gate.returncode == 0, gate.stderr
    cases = orjson.loads(gate.stdout)["metrics"][0]
    assert cases["mean_candidate"] == (0.25 + 19) / 20  # c0 passed 1 of its 4 trials
    diff = _cli("diff", "base.json", "cand.json", cwd=tmp_path)
    assert diff.returncode == 0 and "Traceback" not in diff.stderr, diff.stderr


def test_diff_json_is_strict_when_a_case_of_one_run_scored_no_number(tmp_path: Path) -> None:
    _save(tmp_path, "a.json", [_case("c0"), _case("gone", passed=False, score=float("nan"))])
    _save(tmp_path, "b.json", [_case("c0")])
    done = _cli("diff", "a.json", "b.json", "--format", "json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    gone = next(c for c in orjson.loads(done.stdout)["cases"] if c["eval_id"] == "gone")
    assert gone["kind"] == "removed" and gone["criteria"][0]["score_a"] is None


def test_gate_markdown_keeps_case_names_literal_on_one_table_row(tmp_path: Path) -> None:
    # GitHub renders HTML in a pull-request comment: "<!--" in a case name hid the rest of the summary; a line
    # break or a "|" in it broke the table of flipped cases
    name = "Refund <!-- hidden\n| x"
    _save(tmp_path, "base.json", [_case("c0", name=name)] + [_case(f"c{i}") for i in range(1, 20)])
    _save(tmp_path, "cand.json", [_case("c0", passed=False, name=name)] + [_case(f"c{i}") for i in range(1, 20)])
    done = _cli("gate", "--baseline", "base.json", "--candidate", "cand.json", "--strict", "--out", "g", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    summary = (tmp_path / "g" / "summary.md").read_text(encoding="utf-8")
    assert "<!--" not in summary
    (row,) = [line for line in summary.splitlines() if line.startswith("| Refund")]
    assert row == "| Refund &lt;!-- hidden \\| x | pass->fail | quality | same trajectory |"
    assert "- strict: 1 case(s) went from pass to fail (c0)" in summary


def test_report_of_a_file_without_a_summary_summarises_its_results(tmp_path: Path) -> None:
    # a report written by hand or by another tool, results only: it showed "ALL FAILED" with 0 cases
    results = [json.loads(_case(f"c{i}", passed=i != 0).model_dump_json()) for i in range(3)]
    (tmp_path / "bare.json").write_text(json.dumps({"eval_set_id": "s", "results": results}), encoding="utf-8")
    done = _cli("report", "bare.json", "-f", "json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    summary = orjson.loads(done.stdout)["summary"]
    assert (summary["total_cases"], summary["passed_cases"], summary["failed_cases"]) == (3, 2, 1)
    console = _cli("report", "bare.json", "--no-color", cwd=tmp_path)
    assert "ALL FAILED" not in console.stdout and "2 (66.7%)" in console.stdout


def test_gate_junit_is_well_formed_xml_when_names_hold_control_characters(tmp_path: Path) -> None:
    # XML 1.0 forbids control characters: the gate's junit.xml held them raw and no CI could read it
    eval_id = "c0\x01\x1b[31m"
    _save(tmp_path, "base.json", [_case(eval_id)] + [_case(f"c{i}") for i in range(1, 20)])
    _save(tmp_path, "cand.json", [_case(eval_id, passed=False)] + [_case(f"c{i}") for i in range(1, 20)])
    done = _cli("gate", "--baseline", "base.json", "--candidate", "cand.json", "--strict", "--out", "g", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    suite = ET.parse(tmp_path / "g" / "junit.xml").getroot()
    assert "c0\\x01\\x1b[31m" in [case.get("name") for case in suite.iter("testcase")]
    assert "\x1b" not in done.stdout  # the Markdown printed to the terminal shows the escape, not its effect
