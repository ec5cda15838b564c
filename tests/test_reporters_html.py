"""HTMLReporter: hostile text never reaches the page unescaped; the page is self-contained and complete."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tests.support.reporters_samples import CONTROL, LONG, NO_PROVIDER, odd_report, sample_report
from tracegrade.models.results import CriterionResult, EvalCaseResult, EvalReport
from tracegrade.reporters import HTMLReporter

ALLOWED_TAGS = {
    "html", "head", "meta", "title", "style", "body", "main", "header", "footer", "section", "h1", "h2", "h3",
    "h4", "div", "span", "p", "ul", "ol", "li", "table", "thead", "tbody", "tr", "th", "td", "pre", "code",
    "strong", "details", "summary", "button", "input", "script",
}  # fmt: skip


class _PageParser(HTMLParser):
    """Collects every start tag with its attributes, and the text of <script> elements."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"

    def handle_endtag(self, tag: str) -> None:
        self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.scripts.append(data)


@pytest.fixture(scope="module")
def page() -> str:
    return HTMLReporter().to_html(sample_report())


@pytest.fixture(scope="module")
def parsed(page: str) -> _PageParser:
    parser = _PageParser()
    parser.feed(page)
    parser.close()
    return parser


def test_hostile_text_is_escaped(page: str) -> None:
    assert "<script>alert" not in page
    assert page.count("<script") == 1 and page.count("</script") == 1  # only the page's own script
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "&quot;double&quot; &#x27;single&#x27; &amp;amp;" in page
    assert "]]&gt;" in page
    assert "🚀 naïve café 漢字" in page


def test_no_raw_control_characters(page: str) -> None:
    assert not any(ch in page for ch in CONTROL + "\x7f")
    assert "\\x1b" in page  # shown, escaped


def test_only_known_tags_and_no_event_handler_attributes(parsed: _PageParser) -> None:
    tags = {tag for tag, _ in parsed.tags}
    assert tags <= ALLOWED_TAGS, tags - ALLOWED_TAGS
    for tag, attrs in parsed.tags:
        assert not any(name.startswith("on") for name in attrs), (tag, attrs)
    script_tags = [attrs for tag, attrs in parsed.tags if tag == "script"]
    assert script_tags == [{}]  # inline, no src
    assert "alert" not in "".join(parsed.scripts)


def test_page_is_self_contained(page: str, parsed: _PageParser) -> None:
    for tag, attrs in parsed.tags:
        for name in ("src", "href"):
            assert attrs.get(name) is None, (tag, attrs)
    assert "<link" not in page and "@import" not in page
    assert not re.search(r"url\(\s*['\"]?\s*(https?:)?//", page)
    assert "<style>" in page
    csp = next(a for t, a in parsed.tags if t == "meta" and a.get("http-equiv") == "Content-Security-Policy")
    assert "default-src 'none'" in (csp["content"] or "")


def test_warnings_banner_is_at_the_top(page: str, parsed: _PageParser) -> None:
    banner = page.index('class="warnings"')
    assert banner < page.index('class="summary"')
    assert f"final_response_match_v2: {NO_PROVIDER} (1 case)" in page[banner : page.index('class="summary"')]
    warned = [a["data-search"] for t, a in parsed.tags if t == "details" and "data-warn" in a]
    assert warned == ["judge without provider case-warn"]


def test_summary_cards_and_criterion_table(page: str) -> None:
    cards = dict(re.findall(r'<div class="label">([^<]+)</div><div class="value">([^<]+)</div>', page))
    assert cards == {
        "Total cases": "5", "Passed": "3", "Failed": "1", "Errors": "1", "Pass rate": "60.0%",
        "Duration": "4.55s", "Tokens": "7,200", "Judge cost": "$0.0123",
    }  # fmt: skip
    row = re.search(r"<tr><td><code>response_match_score</code></td>(.*?)</tr>", page)
    assert row is not None
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row.group(1))
    assert cells[:4] == ["1/1", "0", "1", "0"]  # passed, failed, skipped, errors
    assert cells[-2:] == ["1,500", "$0.0123"]


def test_case_statuses(parsed: _PageParser) -> None:
    statuses = [a["data-status"] for t, a in parsed.tags if t == "details" and "data-status" in a]
    assert statuses == ["pass", "fail", "error", "skipped", "pass"]


def test_failed_trajectory_shows_matched_missing_and_extra(page: str) -> None:
    fail_case = page[page.index('data-status="fail"') : page.index('data-status="error"')]
    for key in ("Matches (1)", "Missing (1)", "Extra (1)"):
        assert key in fail_case
    escaped_args = "{&quot;to&quot;: &quot;&lt;script&gt;alert(1)&lt;/script&gt;&quot;}"
    assert f"<li>book_flight {escaped_args} (expected #1) — never called</li>" in fail_case
    assert "match_type" in fail_case


def test_case_sections(page: str) -> None:
    pass_case = page[page.index('data-status="pass"') : page.index('data-status="fail"')]
    assert "Trajectory (3 steps)" in pass_case
    assert '<span class="step-kind">routing</span><code>MAIN-&gt;END</code>' in pass_case
    assert "Tool calls (1)" in pass_case and "get_weather" in pass_case and "&quot;t&quot;: 21" in pass_case
    assert "Node visits (3)" in pass_case
    assert "Token usage" in pass_case and "judge · <code>response_match_score</code>" in pass_case
    error_case = page[page.index('data-status="error"') : page.index('data-status="skipped"')]
    assert 'class="error-message"' in error_case and "agent crashed" in error_case
    fail_case = page[page.index('data-status="fail"') : page.index('data-status="error"')]
    assert "Turns (1)" in fail_case and "Messages (2)" in fail_case


def test_long_values_are_cut(page: str) -> None:
    assert LONG not in page
    assert "more characters]" in page


def test_include_flags_hide_sections() -> None:
    page = HTMLReporter(
        include_details=False, include_actual_response=False, include_tool_call_details=False,
        include_trajectory=False, include_node_responses=False,
    ).to_html(sample_report())  # fmt: skip
    assert "It is sunny in Paris" not in page
    assert "Tool calls (" not in page and "Trajectory (" not in page
    assert "Missing (1)" not in page


def test_criterion_error_and_placeholder_judge_are_flagged() -> None:
    placeholder = CriterionResult.success("safety_v1", 0.5, 0.5, {"reason": NO_PROVIDER})  # no warnings list
    broken = CriterionResult.failure("hallucinations_v1", "All LLM samples failed", threshold=0.7)
    case = EvalCaseResult.success("c", [placeholder, broken])
    page = HTMLReporter().to_html(EvalReport.create("s", [case]))
    assert "score 0.50 is a placeholder" in page[: page.index('class="summary"')]
    assert "All LLM samples failed" in page
    assert '<tr class="criterion error">' in page


def test_odd_content_and_empty_report_render() -> None:
    page = HTMLReporter().to_html(odd_report())
    assert "bare_tool_name" in page and "part one\npart two" in page and "plain-step" in page
    assert "No cases." in HTMLReporter().to_html(EvalReport.create("e", []))


def test_save_and_generate(tmp_path: Path) -> None:
    report = sample_report()
    path = HTMLReporter().generate(report, output_dir=tmp_path)
    assert path == str((tmp_path / "report.html").absolute())
    assert Path(path).read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert HTMLReporter.quick_save(report, tmp_path / "x" / "q.html").endswith("q.html")
