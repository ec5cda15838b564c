"""Reports of runs whose text comes from users and models: every report is written, stays well-formed, and shows
hostile characters (lone surrogates, bidi overrides) as visible escapes; numbers that are not numbers (a NaN read
back from a saved report) never stop a report nor reach a JUnit ``time``; report files are named so that any file
system takes them, and a place they cannot go is named with what is there instead."""

from __future__ import annotations

import base64
import gzip
import io
import json
import math
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.support.grading_cli import run_cli
from tests.support.small_fs import fill, small_filesystem
from tracegrade.cli.report import load_report
from tracegrade.models.config import ReporterConfig
from tracegrade.models.results import CriterionResult, EvalCaseResult, EvalReport
from tracegrade.reporters import ConsoleReporter, HTMLReporter, JSONReporter, JUnitXMLReporter, ReporterManager

LONE_SURROGATE = "half \ud800 pair"
BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"  # embeddings, overrides, isolates
RTL_TEXT = "שלום עולם مرحبا"  # right-to-left text needs none of them and is shown as it is


def _report(*cases: EvalCaseResult, eval_set_id: str = "hostile") -> EvalReport:
    return EvalReport.create(eval_set_id, list(cases))


def _case(eval_id: str, name: str = "", *, passed: bool = True, **fields: object) -> EvalCaseResult:
    return EvalCaseResult(eval_id=eval_id, name=name, passed=passed, **fields)  # type: ignore[arg-type]


def _console(report: EvalReport) -> str:
    out = io.StringIO()
    ConsoleReporter(use_color=False, verbose=True, output=out, include_actual_response=True).report(report)
    return out.getvalue()


def _packed(page: str) -> list[list[object]]:
    packed = re.search(r'data-cases="([A-Za-z0-9+/=]+)"', page)
    assert packed is not None
    return json.loads(gzip.decompress(base64.b64decode(packed.group(1))))  # type: ignore[no-any-return]


def test_html_report_of_a_case_named_with_a_lone_surrogate_is_written(tmp_path: Path) -> None:
    # a lone surrogate arrives from an eval set file ("\ud800" is a legal JSON escape) or from Python code
    report = _report(_case(f"id {LONE_SURROGATE}", f"name {LONE_SURROGATE}"))
    path = Path(HTMLReporter().save(report, tmp_path / "report.html"))
    page = path.read_text(encoding="utf-8")
    assert "name half \\ud800 pair" in page
    (case,) = _packed(page)
    assert case[2] == "name half \\ud800 pair id half \\ud800 pair"  # what the filter box matches


def test_bidi_overrides_are_shown_as_escapes_in_console_html_and_junit(tmp_path: Path) -> None:
    name = f"refund {BIDI}{RTL_TEXT} LIAF"
    failing = CriterionResult(
        criterion=f"judge{BIDI}", score=0.1, passed=False, threshold=0.5, details={"reason": BIDI}
    )
    report = _report(_case("c1", name, passed=False, criterion_results=[failing], actual_response=f"ok {BIDI}"))
    texts = {
        "console": _console(report),
        "html": HTMLReporter().render(report),
        "junit": JUnitXMLReporter().render(report),
    }
    for kind, text in texts.items():
        assert not any(ch in text for ch in BIDI), kind
        assert "\\u202e" in text and "\\u2066" in text, kind
        assert RTL_TEXT in text, kind
    ET.fromstring(texts["junit"].split("\n", 1)[1])
    # the JSON report is the record: it keeps the text as the agent produced it
    assert json.loads(JSONReporter().render(report))["results"][0]["name"] == name


def _spread_report(tmp_path: Path, spread: dict[str, object]) -> EvalReport:
    """A judge's result whose ``sample_spread`` holds no numbers, saved as JSON and read back as ``tracegrade
    report`` reads it (a NaN or an infinity is saved as null)."""
    criterion = CriterionResult(
        criterion="judge", score=0.4, passed=False, threshold=0.7, details={"reason": "r", "sample_spread": spread}
    )
    path = Path(JSONReporter().save(_report(_case("c1", passed=False, criterion_results=[criterion])), tmp_path / "r"))
    return load_report(path)


@pytest.mark.parametrize(
    ("spread", "shown"),
    [
        ({"samples": 3, "range": float("nan"), "stdev": float("inf"), "split": True}, "range n/a, sd n/a"),
        ({"samples": 3, "range": None, "stdev": "wide\x1b[2J"}, "range n/a, sd wide\\x1b[2J"),
        ({"samples": 3, "range": "nan", "stdev": 0.5}, "range nan, sd 0.50"),  # as earlier versions saved a NaN
    ],
)
def test_a_sample_spread_that_is_not_a_number_is_shown_as_it_is(
    tmp_path: Path, spread: dict[str, object], shown: str
) -> None:
    report = _spread_report(tmp_path, spread)
    console = _console(report)
    assert f"3 judge samples, {shown}" in console and "\x1b" not in console
    assert f"3 judge samples, {shown}" in HTMLReporter().render(report)
    assert f"3 judge samples, {shown}" in JUnitXMLReporter().render(report)


def test_tracegrade_report_renders_a_saved_report_with_a_nan_spread(tmp_path: Path) -> None:
    report = _spread_report(tmp_path, {"samples": 2, "range": float("nan"), "stdev": 0.5})
    saved = tmp_path / "saved.json"
    JSONReporter().save(report, saved)
    for fmt in ("console", "html", "junit"):
        result = run_cli("report", saved, "-f", fmt)
        assert result.exit_code == 0, (fmt, result.output)
        assert "2 judge samples, range n/a, sd 0.50" in result.output


@pytest.mark.parametrize("duration", [float("nan"), float("inf"), -3.0])
def test_junit_time_is_always_a_plain_non_negative_number(duration: float) -> None:
    report = _report(_case("c1", duration_seconds=duration), _case("c2", duration_seconds=1.5))
    root = ET.fromstring(JUnitXMLReporter().render(report).split("\n", 1)[1])
    times = [element.get("time") for element in root.iter() if element.get("time") is not None]
    assert len(times) == 4  # testsuites, testsuite and both cases
    for text in times:
        assert text is not None and re.fullmatch(r"\d+\.\d{3}", text), times
    assert [case.get("time") for case in root.iter("testcase")] == ["0.000", "1.500"]


def test_saved_report_with_nan_scores_is_json_that_strict_parsers_read(tmp_path: Path) -> None:
    criterion = CriterionResult(criterion="c", score=float("nan"), passed=False, threshold=0.5)
    report = _report(_case("c1", passed=False, criterion_results=[criterion], duration_seconds=float("nan")))
    text = Path(JSONReporter().save(report, tmp_path / "r.json")).read_text(encoding="utf-8")

    def refuse(constant: str) -> object:
        raise AssertionError(f"{constant} is not JSON")

    data = json.loads(text, parse_constant=refuse)
    assert data["results"][0]["criterion_results"][0]["score"] is None
    assert math.isnan(load_report(tmp_path / "r.json").results[0].criterion_results[0].score)


def test_report_files_of_a_long_cjk_eval_set_are_written(tmp_path: Path) -> None:
    # 80 CJK characters are 240 bytes of UTF-8: with the timestamp and suffix, more than a file name may hold
    report = _report(_case("c1"), eval_set_id="客服评测" * 20)
    config = ReporterConfig(console=False, junit_xml=True)
    out = ReporterManager(config).run_all(report, output_dir=tmp_path)
    assert out.errors == []
    assert len(out.generated_files) == 3
    for path in out.generated_files:
        name = Path(path).name
        assert name.startswith("客服评测") and len(name.encode("utf-8")) <= 255 - 14  # room for the temporary file
    assert load_report(Path(out.generated_files[0])).eval_set_id == "客服评测" * 20


def _in_the_way(tmp_path: Path, what: str) -> Path:
    """A path where the reports' directory should be, holding ``what`` instead."""
    if what == "a character device":
        return Path(os.devnull)
    target = tmp_path / "taken"
    if what == "a regular file":
        target.write_text("{}", encoding="utf-8")
    else:
        target.symlink_to(tmp_path / "nowhere")
    return target


@pytest.mark.parametrize("kind", ["a character device", "a regular file", "a broken symbolic link"])
def test_an_output_directory_that_is_something_else_says_what_it_is(tmp_path: Path, kind: str) -> None:
    target = _in_the_way(tmp_path, kind)
    console = io.StringIO()
    out = ReporterManager(ReporterConfig(junit_xml=True), console_stream=console).run_all(_report(), output_dir=target)
    assert out.errors == [
        (
            "directory",
            f"cannot write {target}: it is {kind}, not a directory; give a directory for the reports "
            "(it is created when missing)",
        )
    ]
    assert out.generated_files == [] and out.console_output


def test_report_command_says_where_a_saved_report_is_not_utf8(tmp_path: Path) -> None:
    saved = tmp_path / "report.json"
    JSONReporter().save(_report(_case("c1")), saved)
    data = saved.read_bytes()
    saved.write_bytes(data.replace(b'"c1"', b'"c\xff1"'))
    at = data.index(b'"c1"') + 2
    result = run_cli("report", saved)
    assert result.exit_code == 2
    assert f"at $: not UTF-8 text (invalid start byte at byte {at})" in result.stderr
    assert "binary" not in result.stderr


def test_console_cuts_a_page_long_run_or_case_name_in_its_headings() -> None:
    # a case named after a model's answer: the console shows its start, the JSON report keeps all of it
    long_name = "why " * 250_000  # a million characters
    case = _case("c" * 50_000, long_name, passed=False, error="boom")
    report = EvalReport.create("s" * 50_000, [case], eval_set_name=long_name)
    out = io.StringIO()
    ConsoleReporter(use_color=False, output=out).report(report)
    text = out.getvalue()
    assert len(text) < 20_000
    assert "[999,800 more characters]" in text  # the run's name in the header, the case's above its details
    assert "[49,800 more characters]" in text  # eval set id and case id
    assert json.loads(JSONReporter().render(report))["results"][0]["name"] == long_name


def _saved_large_report(tmp_path: Path) -> Path:
    """A saved report of some 300 KB, so that every format is larger than what the disk has left."""
    cases = [_case(f"c{i}", f"case {i}", passed=False, error="boom " * 200) for i in range(100)]
    return Path(JSONReporter().save(_report(*cases), tmp_path / "saved.json"))


@pytest.mark.parametrize("fmt", ["console", "json", "html", "junit"])
def test_report_to_standard_output_on_a_full_disk_fails_and_says_why(tmp_path: Path, fmt: str) -> None:
    # `tracegrade report r.json -f junit > junit.xml` on a full disk: the write stops short without an error, and
    # the command used to end with exit code 0 and half a report for CI to read
    saved = _saved_large_report(tmp_path)
    with small_filesystem(tmp_path / "fs", "256k") as mount:
        fill(mount, leave=64 * 1024)
        with (mount / "out").open("wb") as stdout:
            done = subprocess.run(
                [sys.executable, "-m", "tracegrade.cli.main", "report", str(saved), "-f", fmt, "-v"],
                stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=120,
            )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == ["Error: cannot write standard output: No space left on device"]


def test_report_to_dev_full_fails_and_says_why(tmp_path: Path) -> None:
    saved = _saved_large_report(tmp_path)
    with open("/dev/full", "wb") as stdout:
        done = subprocess.run(
            [sys.executable, "-m", "tracegrade.cli.main", "report", str(saved)],
            stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=120,
        )  # fmt: skip
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "Error: cannot write standard output: No space left on device" in done.stderr
