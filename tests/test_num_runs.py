"""Repeated trials: ``EvalConfig.num_runs`` live (each case run k times), offline (several matching traces are
trials), and how they combine: mean scores, Wilson intervals, pass@k, pass^k, flaky."""

from __future__ import annotations

import io
import json
import random
from pathlib import Path

import pytest

from tests.support.grading_traces import AgentRun, fill_store
from tracegrade import AgentEvaluator, CriteriaConfig, CriterionConfig, EvalConfig, ReporterConfig, ToolCall
from tracegrade import trace_tool as tool
from tracegrade.evaluation.offline import TraceGrader
from tracegrade.evaluation.statistics import wilson_interval
from tracegrade.evaluation.trials import combine_trials
from tracegrade.models import EvalCase, EvalSet, Invocation
from tracegrade.models.results import CriterionResult, EvalCaseResult, EvalReport

CONFIG = EvalConfig(
    criteria=CriteriaConfig(tool_name_match=CriterionConfig.tool_name_match()), reporter=ReporterConfig(enabled=False)
)


def _eval_set() -> EvalSet:
    def case(eval_id: str, query: str, tool_name: str) -> EvalCase:
        return EvalCase(eval_id=eval_id, conversation=[Invocation.simple(query, None, [ToolCall(name=tool_name)])])

    cases = [case("steady", "cancel order", "cancel"), case("flaky", "track", "track")]
    return EvalSet(eval_set_id="trials", eval_cases=cases)


def _noisy_agent(seed: int):
    """Always cancels right; tracks with the wrong tool on some calls (seeded)."""
    rng = random.Random(seed)

    @tool("cancel")
    def cancel() -> str:
        return "cancelled"

    @tool("track")
    def track() -> str:
        return "on its way"

    @tool("search")
    def search() -> str:
        return "found"

    def agent(message: str) -> str:
        if message.startswith("cancel"):
            return cancel()
        return track() if rng.random() < 0.5 else search()

    return agent


async def test_live_num_runs_runs_each_case_k_times_and_reports_trial_statistics() -> None:
    calls: list[str] = []
    noisy = _noisy_agent(seed=3)

    def agent(message: str) -> str:
        calls.append(message)
        return noisy(message)

    report = await AgentEvaluator(agent, config=CONFIG.model_copy(update={"num_runs": 6})).evaluate(_eval_set())
    assert len(calls) == 12  # 2 cases x 6 trials
    steady, flaky = report.results
    assert steady.passed and steady.trial_stats.trials == 6 and not steady.trial_stats.flaky
    assert (steady.trial_stats.pass_at_k, steady.trial_stats.pass_hat_k) == (1.0, 1.0)
    assert len(steady.trace_ids) == 6  # one trace per trial, all kept
    criterion = flaky.get_criterion_result("tool_name_match_score")
    stats = criterion.trial_stats
    assert stats.trials == 6 and 0 < stats.passed < 6 and stats.flaky
    assert criterion.score == pytest.approx(stats.passed / 6)
    assert (stats.ci_low, stats.ci_high) == pytest.approx(wilson_interval(stats.passed, 6))
    assert stats.pass_at_k == 1.0 and stats.pass_hat_k == 0.0
    assert not flaky.passed and flaky.trial_stats.flaky
    assert report.summary.num_runs == 6 and report.summary.flaky_cases == 1
    assert report.summary.pass_rate_ci == pytest.approx(wilson_interval(1, 2))
    again = EvalReport.model_validate_json(report.model_dump_json())  # the report's JSON carries them
    assert again.results[1].get_criterion_result("tool_name_match_score").trial_stats == stats


async def test_num_runs_1_leaves_the_report_as_it_was() -> None:
    report = await AgentEvaluator(_noisy_agent(seed=3), config=CONFIG).evaluate(_eval_set())
    assert all(r.trial_stats is None for r in report.results)
    assert all(c.trial_stats is None for r in report.results for c in r.criterion_results)
    s = report.summary
    assert (s.num_runs, s.pass_rate_ci, s.flaky_cases) == (1, None, 0)
    assert "pass_rate_ci" not in report.format_summary()


def test_offline_grades_every_matching_trace_as_a_trial(tmp_path: Path) -> None:
    runs = [
        AgentRun(1, "cancel order", "done", [("cancel", {})], start_offset_s=0),
        AgentRun(2, "cancel order", "done", [("refund", {})], start_offset_s=1),
        AgentRun(3, "cancel order", "done", [("cancel", {})], start_offset_s=2),
    ]
    store = fill_store(tmp_path / "store.duckdb", runs)
    try:
        case = EvalCase(eval_id="c", conversation=[Invocation.simple("cancel order", None, [ToolCall(name="cancel")])])
        eval_set = EvalSet(eval_set_id="offline", eval_cases=[case])
        once = TraceGrader(store, CONFIG).grade_eval_set_sync(eval_set)
        assert once.results[0].is_error and "ambiguous: 3 traces" in once.results[0].error
        report = TraceGrader(store, CONFIG.model_copy(update={"num_runs": 3})).grade_eval_set_sync(eval_set)
    finally:
        store.close()
    (result,) = report.results
    assert not result.is_error and result.trace_ids == [r.trace_id for r in runs]
    stats = result.get_criterion_result("tool_name_match_score").trial_stats
    assert (stats.trials, stats.passed, stats.flaky) == (3, 2, True)
    assert result.trial_stats.pass_at_k == 1.0 and result.trial_stats.pass_hat_k == 0.0


def test_a_trial_that_errored_counts_as_a_failed_trial() -> None:
    ok = EvalCaseResult.success("c", [CriterionResult.success("m", 1.0, 0.5)], trace_ids=["t1"])
    broken = EvalCaseResult.failure("c", "timed out after 5s", trace_ids=["t2"])
    combined = combine_trials([ok, broken, ok])
    assert not combined.passed and combined.error is None
    assert combined.metadata["trial_errors"] == ["timed out after 5s"]
    (m,) = combined.criterion_results
    assert m.score == pytest.approx(2 / 3) and m.trial_stats.trials == 3 and m.passed  # mean 0.67 >= 0.5
    assert combined.trial_stats.passed == 2 and combined.trace_ids == ["t1", "t2", "t1"]
    all_broken = combine_trials([broken, broken])
    assert all_broken.is_error and all_broken.trial_stats.passed == 0
    assert combine_trials([ok]) is ok


def _trial_report() -> EvalReport:
    ok = EvalCaseResult.success("c", [CriterionResult.success("m", 1.0, 0.5)])
    bad = EvalCaseResult.success("c", [CriterionResult.success("m", 0.0, 0.5)])
    return EvalReport.create("trials", [combine_trials([ok, bad, ok, ok])])


def _console(report: EvalReport) -> str:
    from tracegrade.reporters import ConsoleReporter

    buffer = io.StringIO()
    ConsoleReporter(use_color=False, verbose=True, output=buffer).report(report)
    return buffer.getvalue()


def test_every_reporter_shows_the_trials_and_a_single_run_shows_none() -> None:
    from tracegrade.reporters import HTMLReporter, JSONReporter, JUnitXMLReporter

    expected = "3/4 trials passed, mean 0.75 (95% "
    repeated, single = _trial_report(), EvalReport.create("one", [EvalCaseResult.success("c", [])])
    for render in (_console, HTMLReporter().render, JUnitXMLReporter().render):
        assert expected in render(repeated) and "flaky" in render(repeated)
        assert "trials" not in render(single).lower()
    assert "4 per case, pass rate 95% interval" in _console(repeated)
    # offline, cases match different numbers of recorded traces: the range, not the largest
    ok = EvalCaseResult.success("d", [CriterionResult.success("m", 1.0, 0.5)])
    uneven = EvalReport.create("trials", [*repeated.results, ok])
    assert "1-4 per case, pass rate 95% interval" in _console(uneven)
    assert json.loads(JSONReporter().render(repeated))["results"][0]["trial_stats"]["pass_hat_k"] == 0.0
    assert 'name="num_runs" value="4"' in JUnitXMLReporter().render(repeated)
