"""A run that gave no response is the agent's failure, not a grading error: ``tracegrade gate`` on a candidate whose
agent crashed (graded from its stored traces, as CI grades a receiver's store) or returned nothing in 12 of 30
cases, where the baseline answered all 30.

A criterion that errors on a run without a response ("response not captured") was left out of the comparison like a
judge outage, so the gate said "inconclusive" and exited 0 over 12 crashed cases, while the same run graded live
(where the crash is the case's error) failed the gate.
"""

from __future__ import annotations

from pathlib import Path

from tests.support.grading_cli import run_cli
from tests.support.judges_setup import fresh_server, judge_config, scripted_server  # noqa: F401
from tests.support.live_and_stored import grade_live_and_stored
from tests.support.llm_server import LLMServer, Reply
from tests.support.order_cases import ORDER_CASES, ORDERS, answer_order, order_of
from tracegrade import AgentEvaluator
from tracegrade.evaluation.compare import compare_runs
from tracegrade.evaluation.run_diff import diff_reports
from tracegrade.models import CriteriaConfig, CriterionConfig, EvalConfig, ReporterConfig
from tracegrade.models.results import NO_RESPONSE_ERROR, CriterionResult, EvalCaseResult, EvalReport

BROKEN = 12  # the candidate fails orders below this one


def _crashes(message: str) -> str:
    if order_of(message) < BROKEN:
        raise RuntimeError("the order service is down")
    return answer_order(message)


def _says_nothing(message: str) -> str | None:
    return None if order_of(message) < BROKEN else answer_order(message)


def _gate(tmp_path: Path, baseline: EvalReport, candidate: EvalReport) -> tuple[int, str]:
    base, cand = tmp_path / "base.json", tmp_path / "cand.json"
    baseline.to_file(base)
    candidate.to_file(cand)
    gate = run_cli("gate", "--baseline", base, "--candidate", cand, "--out", tmp_path / "gate")
    return gate.exit_code, gate.stdout


def _assert_regressed(exit_code: int, stdout: str) -> None:
    assert exit_code == 1, stdout
    assert "case pass rate regressed significantly: pass rate 100% → 60%" in stdout
    assert "not compared" not in stdout


def test_a_candidate_crashing_in_its_stored_runs_fails_the_gate_as_it_does_live(tmp_path: Path) -> None:
    config = EvalConfig(criteria=CriteriaConfig(rouge_match=CriterionConfig.rouge_match(threshold=0.5)))
    _, baseline = grade_live_and_stored(answer_order, ORDERS, config, tmp_path / "base.duckdb")
    live, stored = grade_live_and_stored(_crashes, ORDERS, config, tmp_path / "cand.duckdb")
    crashed = stored.results[0].get_criterion_result("rouge_match")
    assert crashed is not None and crashed.error is not None and crashed.error.startswith("response not captured")

    result = compare_runs(baseline, stored)
    assert (result.verdict, result.paired_cases, result.ungraded) == ("fail", ORDER_CASES, [])
    assert compare_runs(baseline, live).verdict == "fail"
    _assert_regressed(*_gate(tmp_path, baseline, stored))


def test_a_candidate_answering_nothing_fails_the_gate_for_a_judge_criterion_too(
    server: LLMServer, tmp_path: Path
) -> None:
    server.responder = lambda request: Reply.score(1.0, "matches")
    config = EvalConfig(
        criteria=CriteriaConfig(
            rouge_match=CriterionConfig.rouge_match(threshold=0.5), llm_judge=judge_config(server, threshold=0.5)
        ),
        reporter=ReporterConfig(enabled=False),
        judge_cache=False,
    )
    baseline = AgentEvaluator(answer_order, config=config).evaluate_sync(ORDERS)
    candidate = AgentEvaluator(_says_nothing, config=config).evaluate_sync(ORDERS)
    silent = candidate.results[0]
    assert [(c.criterion, (c.error or "")[:21]) for c in silent.criterion_results] == [
        ("rouge_match", "response not captured"),
        ("final_response_match_v2", "response not captured"),
    ]

    result = compare_runs(baseline, candidate)
    assert (result.verdict, result.paired_cases, result.ungraded) == ("fail", ORDER_CASES, [])
    _assert_regressed(*_gate(tmp_path, baseline, candidate))


def test_diff_reads_a_run_that_recorded_no_response_as_regressed_and_a_judge_outage_as_errored() -> None:
    """``tracegrade diff`` agrees with the gate: no response is the run's failure, a judge error no verdict."""

    def report(error: str | None) -> EvalReport:
        result = CriterionResult(criterion="rouge_match", score=0.0 if error else 1.0, passed=not error, error=error)
        return EvalReport.create("set", [EvalCaseResult(eval_id="c", passed=not error, criterion_results=[result])])

    crashed = report(f"{NO_RESPONSE_ERROR}: the trace recorded no final response text")
    judge_down = report("All LLM samples failed")
    assert [case.kind for case in diff_reports(report(None), crashed, "a", "b").cases] == ["regressed"]
    assert [case.kind for case in diff_reports(report(None), judge_down, "a", "b").cases] == ["errored"]
