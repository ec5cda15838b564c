"""``tracegrade gate`` and the statistics of ``tracegrade diff``: report files and runs recorded in a real store."""

from __future__ import annotations

import json
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.support.grading_cli import run_cli
from tests.test_compare_runs import _truth, noisy_agent_run
from tracegrade.evaluation.run_records import record_report
from tracegrade.models.results import EvalReport
from tracegrade.store import TraceStore


def _save(path: Path, report: EvalReport) -> Path:
    report.to_file(path)
    return path


@pytest.fixture
def runs(tmp_path: Path) -> dict[str, Path]:
    truth = _truth()
    return {
        "base": _save(tmp_path / "base.json", noisy_agent_run(1, truth)),
        "noise": _save(tmp_path / "noise.json", noisy_agent_run(2, truth)),
        "worse": _save(tmp_path / "worse.json", noisy_agent_run(3, truth, tool_drop=0.35, quality_drop=0.2)),
        "tiny_a": _save(tmp_path / "tiny_a.json", noisy_agent_run(1, truth[:3])),
        "tiny_b": _save(tmp_path / "tiny_b.json", noisy_agent_run(2, truth[:3], tool_drop=0.9)),
    }


def _testcases(tmp_path: Path) -> list[ET.Element]:
    return list(ET.parse(tmp_path / "gate" / "junit.xml").getroot().iter("testcase"))


def _gate(tmp_path: Path, baseline: Path | str, candidate: Path | str, *extra: str):
    return run_cli("gate", "--baseline", baseline, "--candidate", candidate, "--out", tmp_path / "gate", *extra)


def test_a_regression_exits_1_and_writes_markdown_and_junit(tmp_path: Path, runs: dict[str, Path]) -> None:
    result = _gate(tmp_path, runs["base"], runs["worse"])
    assert result.exit_code == 1, result.output
    assert "tracegrade gate: fail" in result.stdout
    summary = (tmp_path / "gate" / "summary.md").read_text(encoding="utf-8")
    assert summary == result.stdout and "| tool_name_match |" in summary
    suite = ET.parse(tmp_path / "gate" / "junit.xml").getroot()
    assert suite.get("name") == "tracegrade gate" and int(suite.get("failures")) >= 1
    failed = {c.get("name") for c in suite.iter("testcase") if c.find("failure") is not None}
    assert "cases" in failed
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props["verdict"] == "fail" and props["paired_cases"] == "40"


def test_noise_passes_and_strict_fails_on_a_flip(tmp_path: Path, runs: dict[str, Path]) -> None:
    result = _gate(tmp_path, runs["base"], runs["noise"])
    assert result.exit_code == 0, result.output
    assert "tracegrade gate: pass" in result.stdout
    strict = _gate(tmp_path, runs["base"], runs["noise"], "--strict")
    assert strict.exit_code == 1 and "strict:" in strict.stdout
    flips = [c for c in _testcases(tmp_path) if "flips" in c.get("classname")]
    assert flips and all(c.find("failure") is not None for c in flips)


def test_too_few_cases_is_inconclusive_exit_0_and_skipped_in_junit(tmp_path: Path, runs: dict[str, Path]) -> None:
    result = _gate(tmp_path, runs["tiny_a"], runs["tiny_b"], "--format", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["verdict"] == "inconclusive" and "only 3 case(s)" in data["reasons"][0]
    (cases,) = [c for c in _testcases(tmp_path) if c.get("name") == "cases"]
    assert "only 3 case(s)" in cases.find("skipped").get("message")


def test_runs_that_share_no_case_are_a_usage_error(tmp_path: Path, runs: dict[str, Path]) -> None:
    other = EvalReport.from_file(runs["tiny_b"])
    for result in other.results:
        result.eval_id = f"other-{result.eval_id}"
    unrelated = _save(tmp_path / "unrelated.json", other)
    result = _gate(tmp_path, runs["tiny_a"], unrelated)
    assert result.exit_code == 2, result.output
    assert "share no case (no eval id graded in both): nothing was compared" in result.stderr
    assert "tracegrade gate: inconclusive" in result.stdout  # the summary is still written, and says why


def test_max_drop_turns_a_drop_into_a_failure(tmp_path: Path, runs: dict[str, Path]) -> None:
    assert _gate(tmp_path, runs["tiny_a"], runs["tiny_b"], "--max-drop", "0.1").exit_code == 1


def test_runs_from_the_store_latest_and_ids(tmp_path: Path, runs: dict[str, Path], monkeypatch) -> None:
    store_path = tmp_path / "store.duckdb"
    with TraceStore(store_path) as store:
        base_id = record_report(store, EvalReport.from_file(runs["base"]), "eval_set", "run-1-base")
        time.sleep(0.01)  # `latest` orders by the time a run was recorded
        record_report(store, EvalReport.from_file(runs["worse"]), "eval_set", "run-2-worse")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "step-summary.md"))
    result = _gate(tmp_path, "latest~1", "latest", "--store", str(store_path))
    assert result.exit_code == 1, result.output
    assert f"Baseline `{base_id}` → candidate `run-2-worse`" in result.stdout
    assert (tmp_path / "step-summary.md").read_text(encoding="utf-8") == result.stdout
    mixed = _gate(tmp_path, "run-1", runs["noise"], "--store", str(store_path))
    assert mixed.exit_code == 0, mixed.output


def test_unknown_runs_are_usage_errors(tmp_path: Path, runs: dict[str, Path]) -> None:
    store_path = tmp_path / "store.duckdb"
    with TraceStore(store_path) as store:
        record_report(store, EvalReport.from_file(runs["base"]), "eval_set", "run-1")
    missing = _gate(tmp_path, "run-9", runs["base"], "--store", str(store_path))
    assert missing.exit_code == 2 and "no grading run 'run-9'" in missing.output
    too_far = _gate(tmp_path, "latest~3", "latest", "--store", str(store_path))
    assert too_far.exit_code == 2 and "needs at least 4 recorded run(s), the store has 1" in too_far.output
    not_report = tmp_path / "evalset.json"
    not_report.write_text(json.dumps({"eval_set_id": "x", "eval_cases": []}), encoding="utf-8")
    refused = _gate(tmp_path, not_report, runs["base"])
    assert refused.exit_code == 2 and "not a tracegrade report" in refused.output


def test_diff_adds_paired_statistics_and_flips(tmp_path: Path, runs: dict[str, Path]) -> None:
    table = run_cli("diff", runs["base"], runs["worse"])
    assert table.exit_code == 0, table.output
    assert "Paired statistics" in table.stdout and "verdict at alpha 0.05: fail" in table.stdout
    assert "pass->fail" in table.stdout and "search(q=a) became search(q=b)" in table.stdout
    data = json.loads(run_cli("diff", runs["base"], runs["worse"], "--format", "json", "--alpha", "0.1").stdout)
    stats = data["statistics"]
    assert stats["alpha"] == 0.1 and stats["verdict"] == "fail"
    assert [m["name"] for m in stats["metrics"]] == ["cases", "tool_name_match", "response_quality"]
    assert data["summary"]["regressed"] >= 1  # the per-case diff is still there


@pytest.mark.parametrize("where", ["a directory", "a missing directory"])
def test_an_unwritable_step_summary_is_a_warning_and_the_verdict_stands(
    tmp_path: Path, runs: dict[str, Path], monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    step_summary = tmp_path if where == "a directory" else tmp_path / "nosuch" / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step_summary))
    inconclusive = _gate(tmp_path, runs["tiny_a"], runs["tiny_a"])
    assert inconclusive.exit_code == 0, inconclusive.output
    assert "tracegrade gate: inconclusive" in inconclusive.stdout
    reason = "Is a directory" if where == "a directory" else "No such file or directory"
    (warning,) = [line for line in inconclusive.stderr.splitlines() if line.startswith("warning:")]
    assert f"GITHUB_STEP_SUMMARY={step_summary}: {reason};" in warning
    assert (tmp_path / "gate" / "summary.md").read_text(encoding="utf-8") == inconclusive.stdout
    assert _gate(tmp_path, runs["base"], runs["worse"]).exit_code == 1  # a regression still exits 1
