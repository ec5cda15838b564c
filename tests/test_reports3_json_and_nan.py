"""Report text a strict reader parses: the JSON held in JUnit properties (``criterion.<name>``, ``config_used``,
``metadata``) is JSON that ``json.loads`` reads back as the very text, whatever characters it holds, in a file XML
parsers read; and a score that is no number (a custom criterion's NaN) is shown as ``n/a`` on the HTML page, whose
packed case data stays JSON that ``JSON.parse`` takes, and in the console and JUnit reports."""

from __future__ import annotations

import io
import math
import re
import xml.etree.ElementTree as ET
from pathlib import Path

from tests.support.plugin_sessions import strict_json_text
from tests.support.reporters_samples import packed_cases
from tracegrade.models.results import CriterionResult, EvalCaseResult, EvalReport
from tracegrade.reporters import ConsoleReporter, HTMLReporter, JUnitXMLReporter
from tracegrade.reporters.junit import PROPERTY_LIMIT

# NUL, ESC, DEL, NEL (a C1 control), a bidi override, the two non-characters XML forbids, and an emoji
HOSTILE = "a\x00b\x1b[2Jc\x7fd\x85e\u202ef\ufffeg\uffffh 🚀"
JSON_PROPERTIES = ("criterion.judge", "config_used", "metadata")


LONG = "y" * (PROPERTY_LIMIT + 1000)


def _hostile_report() -> EvalReport:
    reasoned = CriterionResult(
        criterion="judge", score=0.2, passed=False, threshold=0.5, details={"reason": f"why {HOSTILE}"}
    )
    case = EvalCaseResult(eval_id=f"case {HOSTILE}", passed=False, criterion_results=[reasoned])
    return EvalReport.create(
        "hostile",
        [case],
        config_used={"criteria": {"judge": {"prompt": HOSTILE}}},
        metadata={HOSTILE: [HOSTILE, {"nested": HOSTILE}], "commit": "abc", "notes": LONG},
    )


def test_json_valued_junit_properties_read_back_as_the_text_they_hold(tmp_path: Path) -> None:
    path = Path(JUnitXMLReporter().save(_hostile_report(), tmp_path / "junit.xml"))
    root = ET.parse(path).getroot()  # well-formed XML 1.0
    properties = {p.get("name"): p.get("value") or "" for p in root.iter("property")}
    assert set(JSON_PROPERTIES) <= set(properties), properties
    read = {name: strict_json_text(properties[name]) for name in JSON_PROPERTIES}
    assert read["config_used"] == {"criteria": {"judge": {"prompt": HOSTILE}}}
    # whole, however long: a JSON value cut short would be no JSON
    assert read["metadata"] == {HOSTILE: [HOSTILE, {"nested": HOSTILE}], "commit": "abc", "notes": LONG}
    assert read["criterion.judge"]["failed"] == 1
    # the escapes are JSON's: ASCII text any XML reader and terminal takes as it is
    assert "\\u0085" in properties["metadata"] and "\\u202e" in properties["metadata"]
    assert "\\x85" not in properties["metadata"]
    # text outside JSON keeps its documented visible escapes
    (case,) = root.iter("testcase")
    assert case.get("name") == "case a\\x00b\\x1b[2Jc\\x7fd\\x85e\\u202ef\\ufffeg\\uffffh 🚀"
    (failure,) = case.iter("failure")
    assert "why a\\x00b\\x1b[2Jc\\x7fd\\x85e\\u202ef\\ufffeg\\uffffh 🚀" in (failure.get("message") or "")


def _nan_report() -> EvalReport:
    """A run in which a custom criterion gave NaN: its average, the case's score and its own are no numbers."""
    steady = CriterionResult(criterion="steadiness", score=math.nan, passed=True, threshold=0.5)
    exact = CriterionResult(criterion="exact", score=1.0, passed=True, threshold=0.5)
    case = EvalCaseResult(eval_id="c1", passed=True, criterion_results=[steady, exact])
    return EvalReport.create("custom-run", [case])


def test_html_report_shows_a_nan_score_as_n_a_and_packs_strict_json() -> None:
    page = HTMLReporter().render(_nan_report())
    assert not re.search(r"\bnan\b", page, re.IGNORECASE)
    # the criteria table: steadiness averages n/a, exact 1.00
    assert "<td><code>steadiness</code></td>" in page and "<td class=num>n/a</td>" in page
    assert "<td class=num>1.00</td>" in page
    # the case: its mean score and the criterion's score
    assert "score n/a · " in page and "n/a / 0.5" in page
    # the packed cases, read as JSON.parse reads them (no NaN, no Infinity)
    (case,) = packed_cases(page)
    status, _, _, case_html = case
    assert status == "pass" and "score n/a · " in str(case_html) and "n/a / 0.5" in str(case_html)


def test_console_and_junit_show_a_nan_score_as_n_a() -> None:
    report = _nan_report()
    out = io.StringIO()
    ConsoleReporter(use_color=False, verbose=True, output=out).report(report)
    console = out.getvalue()
    assert not re.search(r"\bnan\b", console, re.IGNORECASE)
    assert re.search(r"steadiness\s.*\sn/a\s", console)  # its average in the criteria table
    assert "steadiness: n/a (threshold: 0.5)" in console
    (case,) = ET.fromstring(JUnitXMLReporter().render(report).encode("utf-8")).iter("testcase")
    case_out = case.findtext("system-out") or ""
    assert not re.search(r"\bnan\b", case_out, re.IGNORECASE)
    assert "[PASS] steadiness: n/a (threshold: 0.5)" in case_out
    # the suite's output: the report's summary text
    summary = report.format_summary()
    assert not re.search(r"\bnan\b", summary, re.IGNORECASE) and "steadiness: 1/1 passed, avg score: n/a" in summary


def test_the_summary_text_keeps_each_id_name_and_error_on_its_line_with_controls_escaped() -> None:
    errored = EvalCaseResult(
        eval_id="boom", name=f"named {HOSTILE}", passed=False, error=f"agent said\n\x1b[2J{HOSTILE}"
    )
    summary = EvalReport.create(f"set {HOSTILE}", [errored, *_hostile_report().results]).format_summary()
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e]", summary), summary
    lines = summary.splitlines()
    assert any(line.startswith("  - boom: named a\\x00b\\x1b[2Jc") for line in lines), lines
    assert any(line.startswith("      error: agent said\\n\\x1b[2Ja\\x00b") for line in lines), lines
    assert any(line.startswith("  - case a\\x00b\\x1b[2Jc\\x7fd\\x85e\\u202ef") for line in lines), lines
