"""Written files honour the umask like a plain ``open(path, "w")``: reports and model files are not 0600."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from tracegrade.models.config import ReporterConfig
from tracegrade.models.dataset import EvalCase, EvalSet
from tracegrade.models.files import write_text_file
from tracegrade.models.results import EvalCaseResult, EvalReport
from tracegrade.reporters.html import HTMLReporter
from tracegrade.reporters.json_reporter import JSONReporter
from tracegrade.reporters.junit import JUnitXMLReporter
from tracegrade.reporters.manager import ReporterManager

pytestmark = pytest.mark.skipif(os.name != "posix", reason="POSIX permission bits")


@pytest.fixture
def umask() -> Iterator[None]:
    """Restore the process umask after a test sets its own."""
    previous = os.umask(0o022)
    os.umask(previous)
    try:
        yield
    finally:
        os.umask(previous)


def mode(path: str | Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def report() -> EvalReport:
    return EvalReport.create("modes", [EvalCaseResult(eval_id="c1", passed=True)])


@pytest.mark.parametrize(("mask", "expected"), [(0o022, 0o644), (0o027, 0o640), (0o077, 0o600)])
def test_report_files_get_0666_minus_the_umask(tmp_path, umask, mask, expected):
    os.umask(mask)
    for reporter in (JSONReporter(), HTMLReporter(), JUnitXMLReporter()):
        assert mode(reporter.generate(report(), tmp_path / "out")) == expected, reporter.name
    report().to_file(tmp_path / "report.json")
    EvalSet(eval_set_id="s", eval_cases=[EvalCase.single_turn("c1", "hi")]).to_file(tmp_path / "set.json")
    assert mode(tmp_path / "report.json") == mode(tmp_path / "set.json") == expected
    assert not list(tmp_path.rglob(".*.tmp"))  # no temporary file left behind


def test_the_reporter_manager_writes_readable_files(tmp_path, umask):
    os.umask(0o022)
    out = tmp_path / "reports"
    config = ReporterConfig(output_dir=str(out), console=False, junit_xml=True, timestamp_files=False)
    ReporterManager(config).run_all(report(), None)
    written = sorted(out.iterdir())
    assert written and all(mode(p) == 0o644 for p in written)


def test_rewriting_a_file_keeps_its_mode(tmp_path, umask):
    os.umask(0o022)
    target = tmp_path / "kept.txt"
    target.write_text("old")
    target.chmod(0o600)
    write_text_file(target, "new")
    assert target.read_text() == "new" and mode(target) == 0o600
