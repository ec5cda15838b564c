"""JUnit XML report for CI: one ``<testcase>`` per eval case, one ``<failure>`` per failed criterion.

Layout (the shape Jenkins, GitLab, GitHub and Azure render): ``<testsuites>`` wrapping one
``<testsuite>`` with ``<properties>``, the test cases, and suite-level ``<system-out>``/``<system-err>``.
All text goes through :func:`clean_text` (XML 1.0 forbids control characters) and long values are cut.
"""

from __future__ import annotations

import math
import socket
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Iterator
from typing import Any

from tracegrade.models.expectations import xfail_reason
from tracegrade.models.results import CriterionResult, EvalCaseResult, EvalReport
from tracegrade.reporters.base import FileReporter
from tracegrade.reporters.case_view import (
    STATUS_LABELS,
    case_display_name,
    case_outcome,
    case_warnings,
    criterion_status,
    message_views,
    node_visit_names,
    partial_item_text,
    run_warnings,
    samples_text,
    split_details,
    step_views,
    tool_call_views,
    trials_text,
    turn_views,
)
from tracegrade.reporters.text import (
    clean_text,
    escaped_json_text,
    format_score,
    format_timestamp,
    format_usage,
    shorten,
    to_json_text,
)

__all__ = ["JUnitXMLReporter", "testcase_names"]

MESSAGE_LIMIT = 500  # characters in a message="..." attribute
VALUE_LIMIT = 4000  # characters per value in element bodies
PROPERTY_LIMIT = 4000  # characters per property value that is no JSON

# the suite's count each case outcome (case_view.case_outcome) adds to; a passed case adds to none
_COUNTED_AS = {"xfail": "skipped", "skipped": "skipped", "xpass": "failures", "fail": "failures", "error": "errors"}
# Where the test cases go in the document serialized without them: an element no escaped text can spell ("<" is
# always "&lt;" in text and attributes). Test cases sit in <testsuite> in <testsuites>: indented two levels deep,
# and each followed by the indentation of the next element at that depth (after the last, the suite's system-out).
_PLACEHOLDER_TAG = "tracegrade-testcases"
_CASE_DEPTH = 2
_CASE_TAIL = "\n" + "  " * _CASE_DEPTH
_CASES_PLACEHOLDER = f"<{_PLACEHOLDER_TAG} />{_CASE_TAIL}"


def _safe(value: Any, limit: int | None) -> str:
    return shorten(clean_text(value), limit)


def _seconds(value: float) -> str:
    """A ``time`` attribute: seconds with three decimals. The JUnit schema types it ``xs:decimal``, which has no
    NaN or infinity, and CI readers parse it as a plain number; so a duration that is not a finite, non-negative
    number (a NaN read back from a saved report as "nan", a clock that went backwards) is written as 0."""
    return f"{value:.3f}" if math.isfinite(value) and value >= 0 else "0.000"


def _number(value: float, places: int) -> str:
    """A number property's value: the JSON report has ``null`` for a number that is none (NaN, infinity), and so do
    the properties holding JSON (``criterion.*``); so every number property's value is a JSON number or ``null``
    (never Python's "nan"), for a reader of either kind."""
    return f"{value:.{places}f}" if math.isfinite(value) else "null"


def _attributes(**attrs: Any) -> dict[str, str]:
    return {k: _safe(v, MESSAGE_LIMIT) for k, v in attrs.items()}


def _element(parent: ET.Element, tag: str, text: str | None = None, **attrs: Any) -> ET.Element:
    element = ET.SubElement(parent, tag, _attributes(**attrs))
    if text:
        element.text = text
    return element


def _criterion_line(c: CriterionResult) -> str:
    status = criterion_status(c)
    if status == "skipped":  # a skip has no meaningful score: say why it did not run
        return f"  [{STATUS_LABELS[status]}] {c.criterion}: {c.reason or 'not applicable'}"
    line = f"  [{STATUS_LABELS[status]}] {c.criterion}: {format_score(c.score)} (threshold: {c.threshold})"
    if c.trial_stats is not None:
        line += f" - {trials_text(c.trial_stats)}"
    if samples_text(c):
        line += f" - {samples_text(c)}"
    if not c.token_usage.is_zero():
        line += f" - judge: {format_usage(c.token_usage)}"
    return line


def _failure_message(c: CriterionResult) -> str:
    if c.error is not None:
        return f"{c.criterion} errored: {c.error}"
    message = f"{c.criterion}: score {format_score(c.score)} below threshold {c.threshold}"
    return f"{message} | {c.reason}" if c.reason else message


def _failure_body(c: CriterionResult) -> str:
    reason, partial, rest = split_details(c.details)
    lines = []
    if c.error is not None:
        lines.append(f"Error: {c.error}")
    if reason:
        lines.append(f"Reason: {reason}")
    for key, items in partial.items():
        lines.append(f"{key.capitalize()} ({len(items)}):")
        lines += [f"  - {partial_item_text(item)}" for item in items]
    if rest:
        lines += ["Details:", to_json_text(rest, indent=2)]
    return _safe("\n".join(lines), VALUE_LIMIT * 2)


def _case_output(result: EvalCaseResult) -> str:
    """The ``<system-out>`` of a case: what the agent did, section by section."""
    sections: list[tuple[str, str]] = []
    if result.actual_response:
        sections.append(("Agent Response", _safe(result.actual_response, VALUE_LIMIT)))
    calls = tool_call_views(result.actual_tool_calls)
    if calls:
        body = []
        for call in calls:
            body.append(f"{call.name}({_safe(call.args_text, VALUE_LIMIT)})")
            if call.error:
                body.append(f"  error: {_safe(call.error, VALUE_LIMIT)}")
            elif call.result is not None:
                body.append(f"  -> {_safe(to_json_text(call.result), VALUE_LIMIT)}")
        sections.append((f"Tool Calls ({len(calls)})", "\n".join(body)))
    steps = step_views(result.actual_trajectory)
    if steps:
        body = [f"{i + 1:>3}. [{s.kind}] {_safe(s.name, MESSAGE_LIMIT)}" for i, s in enumerate(steps)]
        sections.append((f"Trajectory ({len(steps)} steps)", "\n".join(body)))
    visits = node_visit_names(result.node_visits)
    if visits:
        sections.append(("Node Visits", _safe(" -> ".join(visits), VALUE_LIMIT)))
    turns = turn_views(result.turn_results)
    if turns:
        body = []
        for t in turns:
            body += [
                f"Turn {t.index}:",
                f"  user: {_safe(t.user, VALUE_LIMIT)}",
                f"  agent: {_safe(t.agent, VALUE_LIMIT)}",
            ]
            if t.tool_names:
                body.append(f"  tools: {', '.join(t.tool_names)}")
        sections.append((f"Turn Results ({len(turns)})", "\n".join(body)))
    messages = message_views(result.messages)
    if messages:
        body = [f"[{role or '?'}] {_safe(text, MESSAGE_LIMIT)}" for role, text in messages]
        sections.append((f"Messages ({len(messages)})", "\n".join(body)))
    if result.criterion_results:
        sections.append(("Criteria Results", "\n".join(_criterion_line(c) for c in result.criterion_results)))
    if not result.token_usage.is_zero():
        sections.append(
            (
                "Token Usage",
                f"agent: {format_usage(result.agent_token_usage)}\ntotal: {format_usage(result.token_usage)}",
            )
        )
    if not sections:
        return "No execution data"
    return clean_text("\n\n".join(f"=== {title} ===\n{body}" for title, body in sections))


def _document(root: ET.Element) -> str:
    """The XML document of the element tree ``root``, indented two spaces a level."""
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def testcase_names(results: list[EvalCaseResult]) -> list[str]:
    """Each result's ``<testcase>`` name: its display name, unique within the suite.

    CI systems key a test's history by classname and name, and merge or overwrite test cases that share both
    (GitLab and Jenkins keep one). A display name several cases share gets each case's eval id (``"Greeting
    [case-7]"``), which does not depend on the order of the cases; a name shared even so (one eval id graded
    twice) gets its occurrence number, ``" #2"`` on. A name no other case has stays as it is, so the history
    of a CI's existing test cases is kept.
    """
    shown = [case_display_name(r) for r in results]
    shared = {name for name, count in Counter(shown).items() if count > 1}
    names = [f"{name} [{r.eval_id}]" if name in shared else name for name, r in zip(shown, results)]
    seen: Counter[str] = Counter()
    unique = []
    for name in names:
        seen[name] += 1
        unique.append(name if seen[name] == 1 else f"{name} #{seen[name]}")
    return unique


class JUnitXMLReporter(FileReporter):
    """Renders the report as JUnit XML; error cases are ``<error>``, failed cases carry ``<failure>``s.

    The document is written a test case at a time (:meth:`pieces`): built as one element tree, a report of
    10,000 cases held every case's elements, the serialized text in parts, the text and its bytes at once."""

    default_filename = "junit.xml"

    def __init__(self, suite_name: str = "agent-evaluation") -> None:
        self.suite_name = suite_name

    def to_xml(self, report: EvalReport) -> str:
        """The document serialized from one whole element tree (:meth:`build_tree`): :meth:`render`'s text."""
        return _document(self.build_tree(report))

    def render(self, report: EvalReport) -> str:
        return "".join(self.pieces(report))

    def pieces(self, report: EvalReport) -> Iterator[str]:
        """``render(report)`` in consecutive pieces: the document down to the first ``<testcase>``, each test case
        with the indentation before the next element, the rest.

        Joined, they are :meth:`to_xml`'s text byte for byte: the document is serialized with a placeholder
        element where the test cases go, and each test case is indented at the depth it has in the whole tree.
        """
        names = testcase_names(report.results)
        text = _document(self._tree(report, cases=None))
        head, tail = text.split(_CASES_PLACEHOLDER, 1)
        yield head
        for result, name in zip(report.results, names):
            case = self._testcase(report, result, name)
            ET.indent(case, level=_CASE_DEPTH)
            yield ET.tostring(case, encoding="unicode") + _CASE_TAIL
        yield tail

    def build_tree(self, report: EvalReport) -> ET.Element:
        """The ``<testsuites>`` element tree (counts computed from the outcomes of the test cases written)."""
        names = testcase_names(report.results)
        return self._tree(report, cases=[self._testcase(report, r, n) for r, n in zip(report.results, names)])

    def _tree(self, report: EvalReport, cases: list[ET.Element] | None) -> ET.Element:
        """The ``<testsuites>`` tree holding ``cases``, or a placeholder element where they go when None."""
        summary = report.summary
        warnings = run_warnings(report)
        suite = ET.Element("testsuite")
        self._add_properties(suite, report, warnings)
        if cases is None:
            ET.SubElement(suite, _PLACEHOLDER_TAG)
        else:
            suite.extend(cases)
        _element(suite, "system-out", _safe(report.format_summary(), VALUE_LIMIT * 4))
        _element(suite, "system-err", _safe("\n".join(f"WARNING: {w}" for w in warnings), VALUE_LIMIT * 4))
        counts = {"failures": 0, "errors": 0, "skipped": 0}
        for result in report.results:
            counted = _COUNTED_AS.get(case_outcome(result))
            if counted:
                counts[counted] += 1
        attrs = {
            "name": self.suite_name,
            "tests": len(report.results),
            **counts,
            "time": _seconds(summary.total_duration_seconds),
        }
        suite.attrib.update({k: _safe(v, MESSAGE_LIMIT) for k, v in attrs.items()})
        suite.attrib.update(
            {
                "timestamp": format_timestamp(report.timestamp, "%Y-%m-%dT%H:%M:%S"),
                "hostname": _safe(socket.gethostname() or "localhost", MESSAGE_LIMIT),
                "id": "0",
                "package": _safe(report.eval_set_id, MESSAGE_LIMIT),
            }
        )
        root = ET.Element("testsuites", {k: suite.attrib[k] for k in attrs})
        root.append(suite)
        return root

    @staticmethod
    def _add_properties(suite: ET.Element, report: EvalReport, warnings: list[str]) -> None:
        summary = report.summary
        props: list[tuple[str, Any]] = [
            ("eval_set_id", report.eval_set_id),
            ("eval_set_name", report.eval_set_name),
            ("pass_rate", _number(summary.pass_rate, 4)),
            ("avg_duration", _number(summary.avg_duration_seconds, 3)),
            ("agent_tokens", summary.agent_token_usage.total_tokens),
            ("judge_tokens", summary.judge_token_usage.total_tokens),
            ("judge_cost_usd", _number(summary.judge_token_usage.cost_usd, 6)),
        ]
        if summary.pass_rate_ci is not None:  # repeated trials (num_runs > 1)
            props += [
                ("num_runs", summary.num_runs),
                ("pass_rate_ci_low", _number(summary.pass_rate_ci[0], 4)),
                ("pass_rate_ci_high", _number(summary.pass_rate_ci[1], 4)),
                ("flaky_cases", summary.flaky_cases),
            ]
        props += [(f"warning.{i}", w) for i, w in enumerate(warnings)]
        # JSON as the JSON report writes it (strict: NaN is null), for a reader that parses these properties; the
        # characters XML 1.0 or a terminal cannot take raw are JSON escapes, which such a reader reads back as sent
        json_props = [(f"criterion.{name}", escaped_json_text(st)) for name, st in summary.criterion_stats.items()]
        if report.config_used:
            json_props.append(("config_used", escaped_json_text(report.config_used)))
        if report.metadata:
            json_props.append(("metadata", escaped_json_text(report.metadata)))
        properties = ET.SubElement(suite, "properties")
        # a JSON value is written whole: cut, it would be no JSON at all
        limited = [(name, value, PROPERTY_LIMIT) for name, value in props] + [(*prop, None) for prop in json_props]
        for name, value, limit in limited:
            ET.SubElement(properties, "property", {"name": _safe(name, MESSAGE_LIMIT), "value": _safe(value, limit)})

    @staticmethod
    def _testcase(report: EvalReport, result: EvalCaseResult, name: str) -> ET.Element:
        """The ``<testcase>`` of ``result``, named ``name``."""
        case = ET.Element(
            "testcase",
            _attributes(name=name, classname=report.eval_set_id or "eval", time=_seconds(result.duration_seconds)),
        )
        status = case_outcome(result)
        if status == "xfail":  # as pytest's junitxml writes an xfailed test, with what failed as the body
            what = result.error or "; ".join(_failure_message(c) for c in result.failed_criteria)
            reason = xfail_reason(result.metadata)
            _element(case, "skipped", _safe(what, VALUE_LIMIT * 2), message=reason, type="pytest.xfail")
        elif status == "xpass":  # a strict xfail that passed, as pytest words it
            message = f"[XPASS(strict)] {xfail_reason(result.metadata)}".rstrip()
            _element(case, "failure", _safe(message, VALUE_LIMIT), message=message)
        elif status == "error":
            # the body as pytest's junitxml writes a test's error: the message, then the (agent's) traceback
            body = "\n\n".join(part for part in (result.error, result.error_traceback) if part)
            _element(case, "error", _safe(body, VALUE_LIMIT * 2), message=result.error, type="EvalCaseError")
        elif status == "fail":
            failed = result.failed_criteria
            for c in failed:
                _element(case, "failure", _failure_body(c), message=_failure_message(c), type=c.criterion)
            if not failed:
                _element(case, "failure", message="case did not pass", type="EvalCaseFailure")
        elif status == "skipped":
            reasons = "; ".join(f"{c.criterion}: {c.reason or 'not applicable'}" for c in result.criterion_results)
            _element(case, "skipped", message=f"every criterion was skipped ({reasons})")
        _element(case, "system-out", _case_output(result))
        warnings = case_warnings(result)
        if warnings:
            _element(case, "system-err", _safe("\n".join(f"WARNING: {w}" for w in warnings), VALUE_LIMIT))
        return case
