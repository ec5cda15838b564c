"""Large runs: the console lists failing cases only (unless verbose); the HTML page stays small and holds every
case, checked by opening it in headless Chromium (Debian's package; skipped where it is not installed)."""

from __future__ import annotations

import base64
import gzip
import io
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.chromium import CHROMIUM_FLAGS
from tests.support.large_reports import large_report
from tracegrade.models.results import EvalReport
from tracegrade.reporters import ConsoleReporter, HTMLReporter
from tracegrade.reporters.html import PAGE_SIZE

CASES = 20_000
MAX_PAGE_BYTES = 5_000_000
CHROMIUM = shutil.which("chromium")


@pytest.fixture(scope="module")
def report() -> EvalReport:
    return large_report(CASES)


@pytest.fixture(scope="module")
def page(report: EvalReport, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("html") / "report.html"
    HTMLReporter().save(report, path)
    return path


def test_console_lists_failing_cases_and_a_count_of_the_rest() -> None:
    small = large_report(400)  # 20 failing
    quiet, verbose = io.StringIO(), io.StringIO()
    ConsoleReporter(use_color=False, output=quiet).report(small)
    ConsoleReporter(use_color=False, output=verbose, verbose=True).report(small)
    text = quiet.getvalue()
    assert "case-000020" in text and "case-000400" in text  # failing
    assert "case-000001" not in text and "380 passing cases not listed" in text
    assert len(text.splitlines()) < 20 * 12 + 40
    assert "case-000001" in verbose.getvalue()


def test_page_is_small_and_packs_every_case(page: Path) -> None:
    html_text = page.read_text(encoding="utf-8")
    assert len(html_text.encode("utf-8")) < MAX_PAGE_BYTES
    assert html_text.count('<details class="case ') == PAGE_SIZE  # only the first page is in the document
    packed = re.search(r'data-cases="([A-Za-z0-9+/=]+)"', html_text)
    assert packed is not None
    cases = json.loads(gzip.decompress(base64.b64decode(packed.group(1))))
    assert len(cases) == CASES
    assert sum(1 for c in cases if c[0] == "fail") == CASES // 20
    assert 'data-search="where is my order 30000? case-020000"' in cases[-1][3]


def _dom(page: Path, fragment: str, profile: Path) -> str:
    assert CHROMIUM is not None
    return subprocess.run(
        [CHROMIUM, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--virtual-time-budget=20000", "--dump-dom",
         page.as_uri() + fragment],
        capture_output=True, text=True, timeout=240, check=True,
    ).stdout  # fmt: skip


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
def test_chromium_unpacks_every_case_and_pages_through_them(page: Path, tmp_path: Path) -> None:
    dom = _dom(page, "#filter=fail&page=3", tmp_path / "profile")
    assert f'data-ready="{CASES}"' in dom  # the script unpacked every case
    statuses = re.findall(r'<details class="case (\w+)"', dom)
    assert statuses == ["fail"] * PAGE_SIZE
    assert f"cases {2 * PAGE_SIZE + 1}-{3 * PAGE_SIZE} of {CASES // 20}" in dom
    assert "case-002020" in dom  # the 101st failing case is the first of page 3
    dom = _dom(page, "#page=400", tmp_path / "profile2")
    assert "case-020000" in dom and f"cases {CASES - PAGE_SIZE + 1}-{CASES} of {CASES}" in dom
