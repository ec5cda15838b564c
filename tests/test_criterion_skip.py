"""LLMJudgeCriterion skips (1.0) an empty agent response, as the seed says, and every reporter shows the skip."""

from __future__ import annotations

import io
import json
import xml.etree.ElementTree as ET

import pytest

from tests.support.judges_setup import fast_runtime, fresh_server, judge_config, scripted_server  # noqa: F401
from tests.support.llm_server import Reply
from tracegrade.criteria.llm import LLMJudgeCriterion, ResponseMatchCriterion
from tracegrade.judges import judge_runtime
from tracegrade.models.dataset import EvalCase
from tracegrade.models.execution import ExecutionResult
from tracegrade.models.results import CriterionResult, EvalCaseResult, EvalReport
from tracegrade.reporters import ConsoleReporter, HTMLReporter, JSONReporter, JUnitXMLReporter

CASE = EvalCase.single_turn("c1", "When did the store open?", expected_response="It opened in 1998.")
EMPTY = ExecutionResult(actual_response="   ")


async def grade(server, criterion_cls, actual):
    with judge_runtime(fast_runtime(max_retries=0)):
        return await criterion_cls(judge_config(server)).evaluate(actual, CASE)


async def test_llm_judge_skips_an_empty_response_with_score_one_and_no_judge_call(server):
    result = await grade(server, LLMJudgeCriterion, EMPTY)
    assert result.skipped and result.passed and result.score == 1.0
    assert result.details["note"] == "No response to evaluate"
    assert server.requests == []


async def test_llm_judge_still_judges_a_real_response(server):
    server.script(Reply.score(0.25, "different year"))
    result = await grade(server, LLMJudgeCriterion, ExecutionResult(actual_response="It opened in 2004."))
    assert not result.skipped and result.score == 0.25 and not result.passed
    assert len(server.requests) == 1


async def test_response_match_keeps_scoring_an_empty_response_zero(server):
    result = await grade(server, ResponseMatchCriterion, EMPTY)
    assert not result.skipped and result.score == 0.0 and not result.passed


async def test_uncaptured_response_is_still_an_error_not_a_skip(server):
    result = await grade(server, LLMJudgeCriterion, ExecutionResult(response_captured=False))
    assert not result.skipped and result.error == "response not captured"


@pytest.fixture
async def report(server) -> EvalReport:
    skipped = await grade(server, LLMJudgeCriterion, EMPTY)
    ran = CriterionResult.success("rouge_match", 0.9, 0.5)
    cases = [
        EvalCaseResult.success("mixed", [skipped, ran], name="judge skipped, rouge ran"),
        EvalCaseResult.success("only-skip", [skipped.model_copy(deep=True)], name="judge skipped alone"),
    ]
    return EvalReport.create("skips", cases)


def test_summary_counts_the_skip_apart_from_passes(report: EvalReport) -> None:
    stats = report.summary.criterion_stats["final_response_match_v2"]
    assert (stats.skipped, stats.total, stats.passed) == (2, 0, 0)


def test_console_shows_skipped_with_its_reason(report: EvalReport) -> None:
    buffer = io.StringIO()
    ConsoleReporter(use_color=False, output=buffer, verbose=True).report(report)
    lines = [ln for ln in buffer.getvalue().splitlines() if "final_response_match_v2" in ln and "SKIPPED" in ln]
    assert lines and all("PASS" not in ln for ln in lines)
    assert "No response to evaluate" in buffer.getvalue()


def test_json_keeps_the_skipped_flag_and_reads_back(report: EvalReport) -> None:
    text = JSONReporter().to_json(report)
    data = json.loads(text)
    criterion = data["results"][0]["criterion_results"][0]
    assert criterion["skipped"] is True and criterion["score"] == 1.0
    assert EvalReport.model_validate_json(text).results[0].criterion_results[0].skipped


def test_html_marks_the_criterion_skipped(report: EvalReport) -> None:
    page = HTMLReporter().to_html(report)
    assert '<tr class="criterion skipped">' in page
    assert "No response to evaluate" in page


def test_junit_reports_a_skip_never_a_silent_pass(report: EvalReport) -> None:
    root = ET.fromstring(JUnitXMLReporter().to_xml(report).encode("utf-8"))
    mixed, only = root.iter("testcase")
    assert "[SKIPPED] final_response_match_v2: No response to evaluate" in (mixed.findtext("system-out") or "")
    assert only.find("skipped") is not None
    prop = next(p for p in root.iter("property") if p.get("name") == "criterion.final_response_match_v2")
    assert json.loads(prop.get("value") or "{}")["skipped"] == 2
