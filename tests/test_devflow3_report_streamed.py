"""``tracegrade report -o`` writes the page as it is rendered: the same bytes as the page built whole (to a file
and to standard output, HTML and JSON), without ever holding the whole page, nor its bytes, in memory.

The command runs in-process (click's runner) on saved report files; Python's own allocation tracer measures it."""

from __future__ import annotations

import sys
import time
import tracemalloc
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support.large_reports import large_report
from tests.test_html_stream_pieces import _many
from tracegrade.cli.main import cli
from tracegrade.cli.report import load_report
from tracegrade.models.results import EvalCaseResult, EvalReport
from tracegrade.reporters import HTMLReporter, JSONReporter
from tracegrade.reporters.html import PAGE_SIZE


@pytest.fixture(autouse=True)
def _still_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    # the HTML footer shows when the page was made: one instant for every page compared here
    monkeypatch.setattr(time, "time", lambda: 1_764_000_000.0)


def _saved(report: EvalReport, path: Path) -> Path:
    JSONReporter.quick_save(report, path)
    return path


def _report(*args: str) -> bytes:
    done = CliRunner().invoke(cli, ["report", *args], catch_exceptions=False)
    assert done.exit_code == 0, done.output
    return done.stdout_bytes


@pytest.mark.parametrize("report", [_many(3 * PAGE_SIZE + 7), large_report(120)], ids=["hostile", "realistic"])
def test_report_o_writes_the_page_built_whole_byte_for_byte(tmp_path: Path, report: EvalReport) -> None:
    source = _saved(report, tmp_path / "in.json")
    loaded = load_report(source)
    for fmt, whole in (("html", HTMLReporter().render(loaded)), ("json", JSONReporter().render(loaded))):
        _report(str(source), "-f", fmt, "-o", str(tmp_path / f"out.{fmt}"))
        assert (tmp_path / f"out.{fmt}").read_bytes() == whole.encode("utf-8"), fmt
        assert _report(str(source), "-f", fmt) == whole.encode("utf-8"), fmt  # standard output: the same bytes


def test_report_o_refuses_to_write_over_its_report_file(tmp_path: Path) -> None:
    source = _saved(_many(3), tmp_path / "in.json")
    before = source.read_bytes()
    done = CliRunner().invoke(cli, ["report", str(source), "-f", "html", "-o", str(source)])
    assert done.exit_code != 0 and "it is the input file" in done.output
    assert source.read_bytes() == before


def _first_page_heavy() -> EvalReport:
    """One page of cases whose answers grow fivefold as HTML (``&`` is ``&amp;``): the page outweighs the report."""
    return EvalReport.create(
        "heavy",
        [
            EvalCaseResult(eval_id=f"c{n}", passed=True, actual_response=f"{n} " + "&" * 19_000)
            for n in range(PAGE_SIZE)
        ],
    )


def test_report_o_writes_the_page_while_it_renders_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = _saved(_first_page_heavy(), tmp_path / "in.json")
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    written: list[int] = []

    def clock() -> float:
        # the footer reads the clock once every case is rendered: how much of the page is in the file by then?
        written.append(sum(f.stat().st_size for f in out_dir.glob(".page.html.*.tmp")))
        return 1_764_000_000.0

    monkeypatch.setattr(time, "time", clock)
    _report(str(source), "-f", "html", "-o", str(out_dir / "page.html"))
    page = (out_dir / "page.html").stat().st_size
    assert page > 4 * source.stat().st_size  # as meant
    assert max(written) > page // 2, f"{max(written):,} bytes of {page:,} in the file once the cases were rendered"


def test_saving_a_page_holds_its_text_at_most_once(tmp_path: Path) -> None:
    report = load_report(_saved(_first_page_heavy(), tmp_path / "in.json"))
    reporter = HTMLReporter()
    reporter.save(_many(1), tmp_path / "warm.html")  # what the first page saved imports or caches
    tracemalloc.start()
    try:
        reporter.save(report, tmp_path / "page.html")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    text = (tmp_path / "page.html").read_text(encoding="utf-8")
    # built whole, the page is in memory twice at least (its pieces and their join) and its UTF-8 bytes besides;
    # written as it is rendered, the first page's cases (kept until the packed cases before them are written)
    # are the most it holds at once
    assert peak < 1.5 * sys.getsizeof(text), f"peak {peak:,} bytes traced for a page of {sys.getsizeof(text):,}"
