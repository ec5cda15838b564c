"""The JUnit XML report written piece by piece: the saved file (and standard output, and every command that writes
JUnit) is the document serialized from one whole element tree, byte for byte, for empty, small and large runs with
hostile text (control characters, lone surrogates, ``]]>``, huge values), NaN scores and every case outcome; no
piece holds more than one test case, and saving never holds the document whole."""

from __future__ import annotations

import math
import sys
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support.large_reports import large_report
from tests.support.reporters_samples import CDATA_END, CONTROL, HOSTILE, LONG, odd_report, sample_report
from tracegrade.cli.main import cli
from tracegrade.cli.report import load_report
from tracegrade.cli.report_output import write_reports
from tracegrade.models.config import ReporterConfig
from tracegrade.models.results import CriterionResult, EvalCaseResult, EvalReport
from tracegrade.reporters import JSONReporter, JUnitXMLReporter

LONE = "half \ud800 pair \udfff end"


def _every_outcome(count: int) -> EvalReport:
    """``count`` cases cycling through every outcome (pass, fail, error, skipped, xfail, xpass), their text hostile:
    control characters, lone surrogates, ``]]>``, 100,000-character values, NaN scores and durations."""
    cases = []
    for n in range(count):
        kind = n % 6
        score = math.nan if n % 4 == 0 else 0.25 * (n % 4)
        criterion = CriterionResult(
            criterion=f"quality {CDATA_END}",
            score=score,
            passed=kind in (0, 5),
            threshold=0.5,
            details={"reason": f"{LONE} {HOSTILE} {LONG if n == 7 else ''}", "n": n, "nan": math.nan},
            skipped=kind == 3,
        )
        cases.append(
            EvalCaseResult(
                eval_id=f"case-{n} {LONE if n % 5 == 0 else ''}",
                name=f"{HOSTILE} {n}" if n % 2 else f"same name {LONE}",  # shared names: made unique
                passed=kind in (0, 3, 5),
                error=f"agent crashed {CONTROL} {LONE} {CDATA_END}" if kind == 2 else None,
                error_traceback=f"Traceback {LONG}" if kind == 2 else None,
                actual_response=LONG if n == 7 else f"{HOSTILE} answer {n} {LONE}",
                criterion_results=[criterion],
                duration_seconds=math.nan if n % 7 == 0 else n / 10,
                metadata={"xfail": f"known {LONE}"} if kind in (4, 5) else {"text": LONE},
            )
        )
    return EvalReport.create(f"stream <set> {CDATA_END}", cases, f"Stream {HOSTILE} {LONE}")


REPORTS = {
    "empty": lambda: sample_report().model_copy(update={"results": []}),
    "one case": lambda: _every_outcome(1),
    "sample": sample_report,
    "odd content": odd_report,
    "every outcome": lambda: _every_outcome(60),
    "realistic": lambda: large_report(200),
}


@pytest.mark.parametrize("name", list(REPORTS))
def test_saved_document_is_the_whole_tree_serialized(tmp_path: Path, name: str) -> None:
    report = REPORTS[name]()
    reporter = JUnitXMLReporter(suite_name=f"suite {HOSTILE}")
    whole = reporter.to_xml(report)
    pieces = list(reporter.pieces(report))
    assert "".join(pieces) == whole
    assert reporter.render(report) == whole
    saved = Path(reporter.save(report, tmp_path / "junit.xml"))
    assert saved.read_bytes() == whole.encode("utf-8")
    # one piece a test case, between the document's head and tail
    assert len(pieces) == len(report.results) + 2
    assert [piece.count("<testcase ") for piece in pieces] == [0] + [1] * len(report.results) + [0]


def test_no_piece_holds_more_than_a_test_case() -> None:
    report = large_report(500)
    pieces = list(JUnitXMLReporter().pieces(report))
    total = sum(map(len, pieces))
    assert max(map(len, pieces)) < total / 100, f"a piece of {max(map(len, pieces)):,} characters of {total:,}"


def _heavy(count: int) -> EvalReport:
    """Cases whose text grows fivefold as XML (``&`` is ``&amp;``, a control character ``\\x01``): the document
    outweighs the report."""
    text = "&\x01" * 1_900
    return EvalReport.create(
        "heavy",
        [EvalCaseResult(eval_id=f"c{n}", passed=True, actual_response=f"{n} {text}") for n in range(count)],
    )


def _saved_by_reporter(report: EvalReport, directory: Path) -> Path:
    return Path(JUnitXMLReporter().save(report, directory / "junit.xml"))


def _written_as_grade_and_run_write(report: EvalReport, directory: Path) -> Path:
    """What ``tracegrade grade --format junit`` and ``tracegrade run --format junit`` do with their report."""
    written, failed = write_reports(report, ReporterConfig(), directory, ["junit"], verbose=False, announce=False)
    assert not failed
    [path] = written
    return Path(path)


@pytest.mark.parametrize("write", [_saved_by_reporter, _written_as_grade_and_run_write], ids=["save", "grade/run"])
def test_writing_a_document_never_holds_it_whole(tmp_path: Path, write: Callable[[EvalReport, Path], Path]) -> None:
    report = _heavy(400)
    write(_heavy(1), tmp_path / "warm")  # what the first document written imports or caches
    tracemalloc.start()
    try:
        saved = write(report, tmp_path / "out")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert saved.read_bytes() == JUnitXMLReporter().to_xml(report).encode("utf-8")
    text = saved.read_text(encoding="utf-8")
    # rendered whole, the document is in memory as its serializer's parts, their join and its UTF-8 bytes at once
    assert peak < 0.25 * sys.getsizeof(text), f"peak {peak:,} bytes traced for a document of {sys.getsizeof(text):,}"


def _run(*args: str) -> bytes:
    done = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert done.exit_code == 0, done.output
    return done.stdout_bytes


def test_report_writes_junit_as_the_whole_tree_serialized(tmp_path: Path) -> None:
    source = tmp_path / "in.json"
    JSONReporter.quick_save(_every_outcome(30), source)
    whole = JUnitXMLReporter(suite_name="ci <suite>").to_xml(load_report(source)).encode("utf-8")
    _run("report", str(source), "-f", "junit", "--suite-name", "ci <suite>", "-o", str(tmp_path / "out.xml"))
    assert (tmp_path / "out.xml").read_bytes() == whole
    assert _run("report", str(source), "-f", "junit", "--suite-name", "ci <suite>") == whole  # standard output
