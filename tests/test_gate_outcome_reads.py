"""``gate`` and ``diff`` read only what they compare of a run (``evaluation.run_outcomes``): the same outputs, byte
for byte, as from the full report, and the same precise error for a report they cannot compare.

Each generated pair of runs is written twice by the JSON reporter: as it is, and with a lone surrogate escape in a
message (text no comparison reads), which the outcomes' JSON parser refuses, so that copy is read by ``load_report``
as a full :class:`EvalReport`, as every report was before. Both copies sit under the same file names in two
folders, and every output of both commands is compared between them.
"""

from __future__ import annotations

import gc
import json
import math
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result
from pydantic import ValidationError

from tests.support.grading_cli import run_cli
from tracegrade.cli.report import load_report
from tracegrade.cli.run_refs import load_runs
from tracegrade.errors import FileFormatError
from tracegrade.evaluation.run_outcomes import RunOutcomes, case_outcomes, run_outcomes
from tracegrade.evaluation.run_records import load_run, load_run_outcomes, record_cases, record_report
from tracegrade.models.dataset import ToolCall
from tracegrade.models.results import NO_RESPONSE_ERROR, CriterionResult, EvalCaseResult, EvalReport, TrialStats
from tracegrade.reporters.json_reporter import JSONReporter
from tracegrade.store import TraceStore

_MARK = "lone-surrogate-goes-here"
_NAMES = ("plain", "with | pipe", "<!-- hidden", "tab\there", "ünïcödé ✓", "x" * 120, "")
_VALUES = (1, 2.5, -0.0, "a", "a" * 100, True, None, [1, "b"], {"k": {"n": 3}}, 10**20, "line\nbreak")


def _criteria(rng: random.Random, skewed: float) -> list[CriterionResult]:
    results = []
    for name in ("tool_name_match", "tenths", "continuous", "judge"):
        roll = rng.random()
        score = {"tool_name_match": float(rng.random() < skewed), "tenths": rng.randint(0, 10) / 10}.get(
            name, rng.random()
        )
        if roll < 0.03:
            results.append(CriterionResult.failure(name, "judge unavailable: 503"))
        elif roll < 0.06:
            results.append(CriterionResult.failure(name, f"{NO_RESPONSE_ERROR}: the agent said nothing"))
        elif roll < 0.12:
            results.append(CriterionResult(criterion=name, score=0.0, passed=False, skipped=True))
        elif rng.random() < 0.8 or name != "judge":  # a criterion some cases were not graded by
            results.append(CriterionResult.success(name, score, 0.5, details={"reason": rng.choice(_NAMES)}))
    return results


def _case(index: int, rng: random.Random, skewed: float) -> EvalCaseResult:
    calls = [
        ToolCall(name=rng.choice(("search", "fetch", "pay")), args={"q": rng.choice(_VALUES), "n": rng.choice(_VALUES)})
        for _ in range(rng.randint(0, 3))
    ]
    criteria = _criteria(rng, skewed)
    case = EvalCaseResult.success(
        f"case-{index}",
        criteria,
        name=rng.choice(_NAMES),
        actual_tool_calls=calls,
        node_visits=rng.sample(["router", "tools", "answer", "review"], rng.randint(0, 4)),
        actual_response=rng.choice(_NAMES),
        messages=[{"role": "user", "content": f"question {index} {_MARK}"}],
    )
    if rng.random() < 0.05:
        case.error, case.passed = "agent raised ValueError", False
    if rng.random() < 0.1:
        trials = rng.randint(2, 5)
        passed = rng.randint(0, trials)
        mean = passed / trials
        case.trial_stats = TrialStats(
            trials=trials, passed=passed, mean=mean, ci_low=0.0, ci_high=1.0, pass_at_k=1.0, pass_hat_k=mean, flaky=True
        )
    return case


def _runs(seed: int) -> tuple[EvalReport, EvalReport]:
    """A baseline and a candidate of varied cases: shared, changed, missing and new ones, errors of every kind."""
    rng = random.Random(seed)
    size = rng.choice((0, 3, 40, 150))
    base, cand = [], []
    for index in range(size):
        before = _case(index, rng, 0.8)
        base.append(before)
        roll = rng.random()
        if roll < 0.05:
            continue  # missing from the candidate
        cand.append(before if roll < 0.6 else _case(index, rng, 0.8 - 0.3 * (seed % 2)))
    cand += [_case(size + k, rng, 0.5) for k in range(rng.randint(0, 3))]
    if seed % 3 == 1:  # a candidate that changed nothing: the gate passes
        cand = list(base)
    metadata = {"incomplete": "interrupted after 40 cases"} if seed % 5 == 4 else {}
    return EvalReport.create("set", base, "the set"), EvalReport.create("set", cand, "the set", metadata=metadata)


def _write(folder: Path, reports: tuple[EvalReport, EvalReport], surrogate: bool) -> None:
    folder.mkdir()
    for report, name in zip(reports, ("base.json", "cand.json")):
        JSONReporter().save(report, folder / name)
        text = (folder / name).read_text(encoding="utf-8")
        (folder / name).write_text(text.replace(_MARK, "\\ud800" if surrogate else "fine"), encoding="utf-8")


def _outputs(folder: Path, monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int, str, str]]:
    """What every form of both commands printed and wrote, run from ``folder`` on its two report files."""
    monkeypatch.chdir(folder)
    gate = ("gate", "--baseline", "base.json", "--candidate", "cand.json", "--out", "gate")
    commands = [
        (*gate, "--max-drop", "0.05"),
        (*gate, "--format", "json", "--strict"),
        ("diff", "base.json", "cand.json", "--all"),
        ("diff", "base.json", "cand.json", "--format", "json", "--fail-on-regression"),
    ]
    seen = []
    for command in commands:
        result: Result = run_cli(*command)
        written = "".join(p.read_text(encoding="utf-8") for p in sorted(Path("gate").glob("*")))
        printed = (result.stdout + result.stderr).replace(str(folder), "FOLDER")  # "wrote FOLDER/gate/summary.md"
        seen.append((" ".join(command), result.exit_code, printed, written))
    return seen


@pytest.mark.parametrize("seed", range(12))
def test_gate_and_diff_print_and_write_what_the_full_report_gave(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    reports = _runs(seed)
    _write(tmp_path / "outcomes", reports, surrogate=False)
    _write(tmp_path / "full", reports, surrogate=True)
    if reports[0].results:  # the copy with the surrogate is read as a full report: the old way
        with pytest.raises(ValidationError):
            RunOutcomes.model_validate_json((tmp_path / "full" / "base.json").read_bytes())
    (_, read), _ = load_runs([str(tmp_path / "outcomes" / "base.json")] * 2, tmp_path / "none.duckdb", None)
    assert isinstance(read, RunOutcomes)
    new, old = _outputs(tmp_path / "outcomes", monkeypatch), _outputs(tmp_path / "full", monkeypatch)
    for (command, *got), (_, *expected) in zip(new, old):
        assert got == expected, command


def test_a_recorded_run_reads_the_outcomes_of_its_full_report(tmp_path: Path) -> None:
    """Recorded whole and case by case, a run's outcomes are those of the report ``load_run`` puts together."""
    base, cand = _runs(7)
    with TraceStore(tmp_path / "store.duckdb") as store:
        record_report(store, base, "eval_set", "run-whole")
        record_cases(store, cand, "worker", "run-casewise", {"rule": "r"})
        for run_id in ("run-whole", "run-casewise"):
            full = load_run(store, run_id)
            expected = RunOutcomes.model_validate(full.model_dump())
            assert load_run_outcomes(store, run_id) == expected
            assert load_run_outcomes(store, run_id[:7]) == expected  # a unique prefix, as load_run takes


@pytest.mark.parametrize(
    "broken",
    [
        lambda data: data["results"][1]["criterion_results"][0].update(score="high"),
        lambda data: data["results"][0].pop("passed"),
        lambda data: data["results"][2]["actual_tool_calls"].append({"args": {}}),
        lambda data: data.update(results={"case-1": {}}),
        lambda data: data.pop("eval_set_id"),
    ],
    ids=["score", "no-passed", "call-without-name", "results-not-a-list", "no-eval-set-id"],
)
def test_a_report_broken_where_gate_reads_it_gets_the_error_load_report_gives(
    tmp_path: Path, broken: Callable[[dict[str, Any]], Any]
) -> None:
    report, _ = _runs(0)
    data = json.loads(JSONReporter().render(report))
    broken(data)
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(FileFormatError) as expected:
        load_report(path)
    result = run_cli("gate", "--baseline", path, "--candidate", path, "--out", tmp_path / "gate")
    assert result.exit_code == 2
    assert str(expected.value) in result.stderr


@pytest.mark.parametrize(
    "content",
    [b"", b"[1, 2]", b'{"eval_cases": []}', b'{"results": [', b"\xff\xfe{}", b'\xef\xbb\xbf{"eval_set_id": 5}'],
    ids=["empty", "array", "eval-set", "truncated", "not-utf8", "bom-and-wrong-type"],
)
def test_a_file_that_is_no_report_is_refused_as_load_report_refuses_it(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "input.json"
    path.write_bytes(content)
    with pytest.raises(FileFormatError) as expected:
        load_report(path)
    result = run_cli("diff", path, path)
    assert result.exit_code == 2 and str(expected.value) in result.stderr


def test_a_report_with_a_byte_order_mark_and_null_scores_is_compared(tmp_path: Path) -> None:
    """What ``load_report`` reads, the outcomes read too: a UTF-8 byte-order mark, null (NaN) for a score that
    is no number (refused by the comparison itself, naming the case and criterion), trial counts."""
    report, _ = _runs(0)
    text = JSONReporter().render(report)
    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf" + text.encode())
    (_, read), _ = load_runs([str(path), str(path)], tmp_path / "none.duckdb", None)
    assert isinstance(read, RunOutcomes) and len(read.results) == len(report.results)
    data = json.loads(text)
    data["results"][1]["criterion_results"][0]["score"] = None
    path.write_text(json.dumps(data), encoding="utf-8")
    (_, read), _ = load_runs([str(path), str(path)], tmp_path / "none.duckdb", None)
    assert math.isnan(read.results[1].criterion_results[0].score)
    result = run_cli("gate", "--baseline", path, "--candidate", path, "--out", tmp_path / "gate")
    assert result.exit_code == 2 and "has score nan, which cannot be compared" in result.stderr


def test_reading_outcomes_leaves_the_garbage_collector_as_it_found_it() -> None:
    """The cyclic collector is paused while a run is validated (its objects hold no cycle), and only then."""
    text = JSONReporter().render(_runs(0)[0])
    assert gc.isenabled()
    assert len(run_outcomes(text).results) == 150 and gc.isenabled()
    with pytest.raises(ValidationError):
        case_outcomes('[{"eval_id": 1}]')
    assert gc.isenabled()
    gc.disable()
    try:
        run_outcomes(text)
        assert not gc.isenabled()  # a caller's choice is kept
    finally:
        gc.enable()
