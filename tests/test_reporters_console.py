"""ConsoleReporter: readable plain text without colour, key figures, warnings, skipped criteria, odd data."""

from __future__ import annotations

import io
import re

import pytest

from tests.support.reporters_samples import CONTROL, LONG, NO_PROVIDER, odd_report, sample_report
from tracegrade.models.results import EvalReport
from tracegrade.reporters import ConsoleReporter, print_report

ANSI = re.compile(r"\x1b\[")


@pytest.fixture(autouse=True)
def _no_colour_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("FORCE_COLOR", "TTY_COMPATIBLE", "NO_COLOR", "TTY_INTERACTIVE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")


class _FakeTerminal(io.StringIO):
    """A text stream that says it is a terminal (rich then colours its output)."""

    def isatty(self) -> bool:
        return True


def render(report: EvalReport, **options: object) -> str:
    buffer = io.StringIO()
    ConsoleReporter(output=buffer, **options).report(report)  # type: ignore[arg-type]
    return buffer.getvalue()


def test_plain_output_has_no_escape_codes_and_no_raw_control_characters() -> None:
    text = render(sample_report(), use_color=False, verbose=True, include_trajectory=True, include_actual_response=True)
    assert not ANSI.search(text)
    assert not any(ch in text for ch in CONTROL)
    assert "\\x1b" in text  # the control characters are shown, escaped


def test_colour_is_auto_detected_and_never_forced_on_a_pipe() -> None:
    assert not ANSI.search(render(sample_report(), use_color=True))
    terminal = _FakeTerminal()
    ConsoleReporter(use_color=True, output=terminal).report(sample_report())
    assert ANSI.search(terminal.getvalue())
    terminal = _FakeTerminal()
    ConsoleReporter(use_color=False, output=terminal).report(sample_report())
    assert not ANSI.search(terminal.getvalue())


def test_summary_figures_and_statuses() -> None:
    report = sample_report()
    text = render(report, use_color=False)
    s = report.summary
    assert re.search(rf"Total cases\s+{s.total_cases}\b", text)
    assert re.search(rf"Passed\s+{s.passed_cases} \(60\.0%\)", text)
    assert re.search(rf"Failed\s+{s.failed_cases}\b", text)
    assert re.search(rf"Errors\s+{s.error_cases}\b", text)
    assert "PARTIAL" in text
    assert "Judge cost    $0.0123" in text
    for label in ("✓ PASS", "✗ FAIL", "! ERROR", "– SKIPPED"):
        assert label in text
    assert "failed: tool_trajectory_avg_score" in text
    assert "Report generated:" in text


def test_warnings_banner_comes_before_the_summary() -> None:
    text = render(sample_report(), use_color=False)
    banner = text.index("WARNINGS (1)")
    assert banner < text.index("Summary:")
    assert f"final_response_match_v2: {NO_PROVIDER} (1 case)" in text[banner : text.index("Summary:")]


def test_an_incomplete_run_says_so_in_the_banner_before_its_counts() -> None:
    report = sample_report()
    report.metadata["incomplete"] = "the run was interrupted after 5 of 9 cases"
    text = render(report, use_color=False)
    banner = text.index("WARNINGS (2)")
    assert banner < text.index("Summary:")
    assert (
        "incomplete: the run was interrupted after 5 of 9 cases; the counts cover only the cases that finished"
        in " ".join(text[banner : text.index("Summary:")].split())
    )


def test_skipped_criterion_is_shown_as_skipped_not_passed() -> None:
    text = render(sample_report(), use_color=False)
    line = next(ln for ln in text.splitlines() if "Skipped only" in ln)
    assert "SKIPPED" in line and "PASS" not in line
    criterion = next(ln for ln in text.splitlines() if "response_match_score" in ln and "SKIPPED" in ln)
    assert "0.00" not in criterion  # no score shown for a criterion that did not run


def test_partial_credit_details_of_a_failed_trajectory() -> None:
    text = render(sample_report(), use_color=False)
    assert "Matches (1):" in text and "- search (expected #0 ↔ actual #0)" in text
    assert "Missing (1):" in text
    assert '- book_flight {"to": "<script>alert(1)</script>"} (expected #1) — never called' in text
    assert "Extra (1):" in text and "- evil<script>alert(1)</script> (actual #1)" in text


def test_verbose_shows_tokens_and_costs_per_criterion_case_and_run() -> None:
    quiet = render(sample_report(), use_color=False)
    verbose = render(sample_report(), use_color=False, verbose=True)
    assert "Judge: 1,500 tokens" in verbose and "Judge: " not in quiet
    assert "Tokens: agent 5,700 tokens" in verbose
    assert re.search(r"response_match_score\s.*1,500\s+\$0\.0123", verbose)


def test_long_values_are_truncated_with_a_note() -> None:
    text = render(sample_report(), use_color=False, verbose=True, include_actual_response=True)
    assert "more characters]" in text
    assert LONG not in text
    assert len(text) < 60_000


def test_default_view_details_only_cases_that_need_attention() -> None:
    text = render(sample_report(), use_color=False)
    assert "(case-pass)" not in text  # a clean pass gets a table row, not a details panel
    assert "(case-fail)" in text and "(case-warn)" in text


def test_odd_field_content_is_rendered() -> None:
    text = render(odd_report(), use_color=False, verbose=True, include_trajectory=True)
    assert "bare_tool_name()" in text
    assert "[STEP] plain-step" in text
    assert "part one" in text and "part two" in text
    assert "loose message" in text
    assert "Turn 1 agent: a" in text


def test_stream_that_cannot_encode_gets_replacement_characters() -> None:
    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding="ascii")
    ConsoleReporter(use_color=False, output=stream).report(sample_report())
    stream.flush()
    text = raw.getvalue().decode("ascii")
    assert "Total cases" in text
    assert "?" in text


def test_empty_report() -> None:
    text = render(EvalReport.create("empty", []), use_color=False)
    assert "NO CASES" in text and "ALL FAILED" not in text and "Total cases" in text


def test_print_report_and_generate_write_to_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    print_report(sample_report(), use_color=False)
    assert "Evaluation Report: Capitals" in capsys.readouterr().out
    assert ConsoleReporter(use_color=False).generate(sample_report(), output_dir="ignored") is None
    assert "Total cases" in capsys.readouterr().out
    assert ConsoleReporter().name == "ConsoleReporter"
