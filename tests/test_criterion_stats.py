"""Per-criterion statistics count each graded result once, as passed, failed or errored (as the case summary does),
and the reporters show those counts."""

from __future__ import annotations

import io
import json

from tracegrade.models.results import CriterionResult, EvalCaseResult, EvalReport, EvalSummary
from tracegrade.reporters import ConsoleReporter
from tracegrade.reporters.json_reporter import JSONReporter


def _report() -> EvalReport:
    results = [
        CriterionResult.success("schema", 1.0, 0.5),
        CriterionResult.success("schema", 0.0, 0.5),
        CriterionResult.failure("schema", "no schema for tool 'x'", 0.5),
        CriterionResult.failure("schema", "no schema for tool 'y'", 0.5),
        CriterionResult(criterion="schema", score=0.0, passed=False, skipped=True),
    ]
    cases = [EvalCaseResult.success(f"case-{n}", [result]) for n, result in enumerate(results)]
    return EvalReport.create("stats", cases)


def test_errored_results_are_errors_not_failures() -> None:
    stats = _report().summary.criterion_stats["schema"]
    assert (stats.total, stats.passed, stats.failed, stats.errors, stats.skipped) == (4, 1, 1, 2, 1)
    assert stats.total == stats.passed + stats.failed + stats.errors
    assert stats.pass_rate == 0.25  # errored results count against the pass rate, as errored cases do


def test_all_errored_criterion_has_no_failures() -> None:
    cases = [EvalCaseResult.success(f"c{n}", [CriterionResult.failure("tool_schema", "boom")]) for n in range(6)]
    stats = EvalSummary.from_results(cases).criterion_stats["tool_schema"]
    assert (stats.total, stats.passed, stats.failed, stats.errors, stats.pass_rate) == (6, 0, 0, 6, 0.0)


def test_reporters_show_the_counts() -> None:
    report = _report()
    buffer = io.StringIO()
    ConsoleReporter(output=buffer, use_color=False).report(report)
    (row,) = [line.split() for line in buffer.getvalue().splitlines() if line.strip().startswith("schema ")]
    assert row[1:5] == ["1/4", "1", "1", "2"]  # passed/total, failed, skipped, errors
    stats = json.loads(JSONReporter().render(report))["summary"]["criterion_stats"]["schema"]
    assert (stats["failed"], stats["errors"]) == (1, 2)
