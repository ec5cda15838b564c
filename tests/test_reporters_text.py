"""Reporter text helpers: sanitising, shortening, message flattening, number formats, tolerant views."""

from __future__ import annotations

import pytest

from tracegrade.models.results import CriterionResult, EvalCaseResult, EvalReport, EvalSummary
from tracegrade.reporters.case_view import (
    case_status,
    criterion_status,
    criterion_warnings,
    run_warnings,
    split_details,
)
from tracegrade.reporters.text import clean_text, format_cost, jsonable, message_text, shorten


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("a\x00b", "a\\x00b"),
        ("esc\x1b[31m", "esc\\x1b[31m"),
        ("keep\ttab\nnewline", "keep\ttab\nnewline"),
        ("dos\r\nline", "dos\nline"),
        ("lone\rcr", "lone\\x0dcr"),
        ("del\x7f c1\x85", "del\\x7f c1\\x85"),
        ("bad\ufffe\uffff", "bad\\ufffe\\uffff"),
        ("half\ud800", "half\\ud800"),
        ("🚀 漢字", "🚀 漢字"),
    ],
)
def test_clean_text(raw: str, clean: str) -> None:
    assert clean_text(raw) == clean


def test_shorten() -> None:
    assert shorten("abcdef", 10) == "abcdef"
    assert shorten("abcdef", None) == "abcdef"
    assert shorten("a" * 1500, 1000) == "a" * 1000 + "… [500 more characters]"


def test_message_text_flattens_list_shaped_content() -> None:
    content = [{"type": "text", "text": "one"}, {"type": "image_url", "image_url": {"url": "u"}}, "two"]
    assert message_text(content) == 'one\n{"type": "image_url", "image_url": {"url": "u"}}\ntwo'
    assert message_text({"content": "inner"}) == "inner"
    assert message_text(None) == ""
    assert message_text(42) == "42"


def test_jsonable_and_cost() -> None:
    assert jsonable({"s": {1}, "b": b"x", "f": float("nan"), 3: (1,)}) == {"s": [1], "b": "x", "f": "nan", "3": [1]}
    assert [format_cost(v) for v in (0, 0.0123, 2.5, 0.00001)] == ["$0", "$0.0123", "$2.50", "$0.000010"]


def test_statuses_never_count_a_skip_as_a_pass() -> None:
    skipped = CriterionResult(criterion="c", score=0.0, passed=True, skipped=True)
    assert criterion_status(skipped) == "skipped"
    assert case_status(EvalCaseResult.success("a", [skipped])) == "skipped"
    assert case_status(EvalCaseResult.success("b", [])) == "pass"
    assert case_status(EvalCaseResult(eval_id="c", passed=False, criterion_results=[skipped])) == "fail"
    assert criterion_status(CriterionResult.failure("c", "boom")) == "error"


def test_run_warnings_add_what_the_summary_lacks() -> None:
    warned = CriterionResult.success("judge", 0.5, 0.5)
    warned.warnings = ["judge unreachable"]
    report = EvalReport.create("s", [EvalCaseResult.success("a", [warned])])
    assert run_warnings(report) == ["judge: judge unreachable (1 case)"]
    report.summary = EvalSummary(warnings=["run-level problem"])  # a summary built elsewhere
    assert run_warnings(report) == ["run-level problem", "judge: judge unreachable (1 case)"]


def test_split_details() -> None:
    reason, partial, rest = split_details({"reason": "r", "missing": "one", "extra": [], "k": 1})
    assert (reason, partial, rest) == ("r", {"missing": ["one"], "extra": []}, {"k": 1})
    assert split_details("not a dict") == (None, {}, {"details": "not a dict"})


def test_placeholder_judge_warning_is_added_once() -> None:
    bare = CriterionResult.success("j", 0.5, 0.5, {"reason": "No LLM provider available"})
    assert criterion_warnings(bare) == ["No LLM provider available (score 0.50 is a placeholder, not a judgement)"]
    said = bare.model_copy(update={"warnings": ["No LLM provider available for judge model 'm': no key"]})
    assert criterion_warnings(said) == ["No LLM provider available for judge model 'm': no key"]
