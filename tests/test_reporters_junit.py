"""JUnitXMLReporter: parsed by a real XML parser and checked against the JUnit schema's shape."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from tests.support.reporters_samples import CONTROL, LONG, NO_PROVIDER, SCRIPT, odd_report, sample_report
from tracegrade.models.results import CriterionResult, EvalCaseResult, EvalReport
from tracegrade.reporters import JUnitXMLReporter

# element -> (required attributes, allowed attributes, allowed children) — the JUnit XSD shape CI tools read
SHAPE: dict[str, tuple[set[str], set[str], set[str]]] = {
    "testsuites": ({"tests", "failures", "errors"}, {"name", "tests", "failures", "errors", "skipped", "time",
                   "disabled"}, {"testsuite"}),
    "testsuite": ({"name", "tests", "failures", "errors", "time", "timestamp"},
                  {"name", "tests", "failures", "errors", "skipped", "time", "timestamp", "hostname", "id",
                   "package", "disabled"}, {"properties", "testcase", "system-out", "system-err"}),
    "properties": (set(), set(), {"property"}),
    "property": ({"name", "value"}, {"name", "value"}, set()),
    "testcase": ({"name", "classname", "time"}, {"name", "classname", "time", "assertions", "status"},
                 {"skipped", "error", "failure", "system-out", "system-err"}),
    "failure": ({"message", "type"}, {"message", "type"}, set()),
    "error": ({"message", "type"}, {"message", "type"}, set()),
    "skipped": (set(), {"message"}, set()),
    "system-out": (set(), set(), set()),
    "system-err": (set(), set(), set()),
}  # fmt: skip


def check_junit_shape(root: ET.Element) -> None:
    """Raise AssertionError unless ``root`` has the element/attribute shape of a JUnit report."""
    assert root.tag == "testsuites"
    for element in root.iter():
        assert element.tag in SHAPE, element.tag
        required, allowed, children = SHAPE[element.tag]
        assert required <= set(element.attrib), (element.tag, required - set(element.attrib))
        assert set(element.attrib) <= allowed, (element.tag, set(element.attrib) - allowed)
        assert {c.tag for c in element} <= children, (element.tag, {c.tag for c in element} - children)
    for suite in [root, *root.findall("testsuite")]:
        cases = suite.iter("testcase")
        outcomes = [{c.tag for c in case} & {"failure", "error", "skipped"} for case in cases]
        assert int(suite.get("tests", -1)) == len(outcomes)
        assert int(suite.get("failures", -1)) == sum("failure" in o for o in outcomes)
        assert int(suite.get("errors", -1)) == sum("error" in o for o in outcomes)
        assert int(suite.get("skipped", 0)) == sum("skipped" in o for o in outcomes)
        assert all(len(o) <= 1 for o in outcomes)  # a case has one kind of outcome
        float(suite.get("time", "x"))
    for case in root.iter("testcase"):
        assert case.get("name") and case.get("classname")
        float(case.get("time", "x"))
    for suite in root.findall("testsuite"):
        order = [c.tag for c in suite]
        assert order[0] == "properties" and order[-2:] == ["system-out", "system-err"]


def parse(xml_text: str) -> ET.Element:
    return ET.fromstring(xml_text.encode("utf-8"))


def test_sample_report_has_junit_shape_and_counts() -> None:
    xml_text = JUnitXMLReporter().to_xml(sample_report())
    assert xml_text.startswith('<?xml version="1.0" encoding="UTF-8"?>')
    root = parse(xml_text)
    check_junit_shape(root)
    suite = root.find("testsuite")
    assert suite is not None
    counts = [suite.get(k) for k in ("tests", "failures", "errors", "skipped")]
    assert counts == ["5", "1", "1", "1"]
    assert suite.get("name") == "agent-evaluation" and suite.get("time") == "4.550"
    names = [c.get("name") for c in suite.iter("testcase")]
    assert names[0] == "Paris weather" and names[2] == "Crashing case"


def test_failure_per_failed_criterion_with_details() -> None:
    suite = parse(JUnitXMLReporter().to_xml(sample_report())).find("testsuite")
    assert suite is not None
    failing = suite.findall("testcase")[1]
    failures = failing.findall("failure")
    assert [f.get("type") for f in failures] == ["tool_trajectory_avg_score"]
    message = failures[0].get("message") or ""
    assert message.startswith("tool_trajectory_avg_score: score 0.50 below threshold 1.0 | Matched 50%")
    body = failures[0].text or ""
    assert f'Missing (1):\n  - book_flight {{"to": "{SCRIPT}"}} (expected #1) — never called' in body
    assert "Extra (1):" in body and "Matches (1):" in body and '"match_type": "in_order"' in body


def test_error_and_skipped_cases() -> None:
    suite = parse(JUnitXMLReporter().to_xml(sample_report())).find("testsuite")
    assert suite is not None
    cases = suite.findall("testcase")
    error = cases[2].find("error")
    assert error is not None and error.get("type") == "EvalCaseError"
    assert (error.get("message") or "").startswith("RuntimeError: agent crashed")
    skipped = cases[3].find("skipped")
    assert skipped is not None and "no expected response" in (skipped.get("message") or "")
    assert cases[0].find("failure") is None and cases[0].find("skipped") is None


def test_warnings_are_a_property_and_system_err() -> None:
    suite = parse(JUnitXMLReporter().to_xml(sample_report())).find("testsuite")
    assert suite is not None
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props["warning.0"] == f"final_response_match_v2: {NO_PROVIDER} (1 case)"
    assert props["judge_cost_usd"] == "0.012300" and props["pass_rate"] == "0.6000"
    warned = suite.findall("testcase")[4].find("system-err")
    assert warned is not None and f"WARNING: final_response_match_v2: {NO_PROVIDER}" in (warned.text or "")
    suite_err = suite.find("system-err")
    assert suite_err is not None and NO_PROVIDER in (suite_err.text or "")
    assert all(c.find("system-err") is None for c in suite.findall("testcase")[:4])


def test_system_out_describes_what_the_agent_did() -> None:
    suite = parse(JUnitXMLReporter().to_xml(sample_report())).find("testsuite")
    assert suite is not None
    out = suite.findall("testcase")[0].findtext("system-out") or ""
    assert "=== Agent Response ===\nIt is sunny in Paris." in out
    assert 'get_weather({"location": "Paris"})\n  -> {"t": 21}' in out
    assert "[conditional] MAIN->END" in out and "MAIN -> TOOL -> MAIN" in out
    assert "[PASS] response_match_score: 0.91 (threshold: 0.8) - judge: 1,500 tokens" in out
    assert suite.findall("testcase")[2].findtext("system-out") == "No execution data"


def test_control_characters_are_stripped_and_long_values_cut() -> None:
    xml_text = JUnitXMLReporter().to_xml(sample_report())
    assert not any(ch in xml_text for ch in CONTROL)
    assert LONG not in xml_text and "more characters]" in xml_text
    assert len(xml_text) < 60_000
    all_text = " ".join(
        [e.text or "" for e in parse(xml_text).iter()] + [v for e in parse(xml_text).iter() for v in e.attrib.values()]
    )
    assert "🚀 naïve café 漢字" in all_text and "]]>" in all_text


def test_failed_case_without_failed_criteria_and_criterion_errors() -> None:
    odd_fail = EvalCaseResult(eval_id="no-criteria", passed=False)
    errored = EvalCaseResult.success("crit-error", [CriterionResult.failure("safety_v1", "judge timed out", 0.5)])
    root = parse(JUnitXMLReporter(suite_name="my suite").to_xml(EvalReport.create("s", [odd_fail, errored])))
    check_junit_shape(root)
    cases = root.findall("testsuite/testcase")
    assert [f.get("type") for f in cases[0].findall("failure")] == ["EvalCaseFailure"]
    failure = cases[1].find("failure")
    assert failure is not None and failure.get("message") == "safety_v1 errored: judge timed out"
    assert root.get("name") == "my suite" and root.get("failures") == "2"


def test_empty_and_odd_reports() -> None:
    check_junit_shape(parse(JUnitXMLReporter().to_xml(EvalReport.create("", []))))
    root = parse(JUnitXMLReporter().to_xml(odd_report()))
    check_junit_shape(root)
    out = root.findtext("testsuite/testcase/system-out") or ""
    assert "bare_tool_name()" in out and "[step] plain-step" in out and "part one" in out


def test_save_and_generate(tmp_path: Path) -> None:
    path = JUnitXMLReporter().generate(sample_report(), output_dir=tmp_path)
    assert path == str((tmp_path / "junit.xml").absolute())
    check_junit_shape(ET.parse(path).getroot())
    saved = JUnitXMLReporter().save(sample_report(), tmp_path / "sub" / "x_junit.xml")
    assert Path(saved).is_file()
