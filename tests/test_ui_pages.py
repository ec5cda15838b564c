"""The UI's pages as HTML: what a page shows of a trace whose values are too large to show in full, and of an empty
trace list."""

from __future__ import annotations

from tracegrade.models import ExecutionResult, ToolCall
from tracegrade.ui import pages
from tracegrade.ui.api import TraceFilters


def _detail(execution: ExecutionResult, spans: list[dict] | None = None) -> dict:
    return {
        "trace_id": "ab" * 16,
        "trace": {"status": "OK", "span_count": 2},
        "execution": execution.model_dump(mode="json"),
        "spans": spans or [],
        "log_counts": {},
        "runs": [],
    }


def _span(span_id: str, name: str, parent: str | None = None) -> dict:
    return {
        "span_id": span_id,
        "parent_span_id": parent,
        "name": name,
        "start_ns": 1_000,
        "end_ns": 2_000,
        "duration_ms": 0.001,
        "status_code": "OK",
    }


def test_a_huge_value_is_cut_on_the_page_and_says_how_much_is_left_out() -> None:
    megabyte = "x" * 1_000_000
    calls = [ToolCall(name="fetch_page", args={"url": f"https://example.test/{i}"}, result=megabyte) for i in range(20)]
    execution = ExecutionResult(user_query="summarise these", actual_response=megabyte, tool_calls=calls)
    page = pages.trace_page(_detail(execution))
    assert len(page) < 1_000_000  # 21 MB of values make a page of well under a megabyte
    assert page.count("more characters not shown here") == 21  # each tool result and the response
    assert f"{1_000_000 - 20_000:,} more characters" in page
    assert "https://example.test/19" in page  # small values are shown whole


def test_values_under_the_limit_are_shown_whole_and_escaped() -> None:
    text = "<script>alert(1)</script>" + "y" * 19_000
    page = pages.trace_page(_detail(ExecutionResult(user_query="q", actual_response=text)))
    assert "more characters not shown" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" + "y" * 19_000 in page and "<script>alert" not in page


def test_a_huge_span_name_is_cut_in_the_waterfall() -> None:
    spans = [_span("a" * 16, "agent " + "n" * 1_000_000), _span("b" * 16, "tool lookup", "a" * 16)]
    page = pages.trace_page(_detail(ExecutionResult(user_query="q"), spans))
    assert len(page) < 10_000 and "tool lookup" in page and "agent nnn" in page


def test_an_empty_trace_list_says_whether_the_store_or_the_filters_are_empty() -> None:
    facets: dict[str, list[str]] = {"services": [], "conventions": [], "tools": []}
    empty = {"traces": [], "next_cursor": None}
    unfiltered = pages.traces_page(empty, TraceFilters(), facets, {})
    assert "No traces yet" in unfiltered and "No traces match" not in unfiltered
    filtered = pages.traces_page(empty, TraceFilters(status="error"), facets, {"status": "error"})
    assert "No traces match these filters." in filtered and "No traces yet" not in filtered
    assert unfiltered.count('id="live"') == 1  # the live status once: the page's script updates one element
