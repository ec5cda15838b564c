"""ReporterManager: the files it writes, their names, and how it records a reporter that fails."""

from __future__ import annotations

import io
import json
import re
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.support.reporters_samples import passing_case, sample_report
from tracegrade.models.config import ReporterConfig
from tracegrade.models.results import EvalReport
from tracegrade.reporters import ReporterManager, ReporterOutput
from tracegrade.reporters.manager import FILE_REPORTERS, report_file_stem


def _config(**overrides: object) -> ReporterConfig:
    return ReporterConfig(**{"timestamp_files": False, "junit_xml": True, **overrides})  # type: ignore[arg-type]


def test_writes_every_enabled_report(tmp_path: Path) -> None:
    console = io.StringIO()
    report = sample_report()
    out = ReporterManager(_config(), console_stream=console).run_all(report, output_dir=tmp_path)
    stem = "capitals_v1__set_"
    assert out.json_path == str(tmp_path / f"{stem}.json")
    assert out.html_path == str(tmp_path / f"{stem}.html")
    assert out.junit_path == str(tmp_path / f"{stem}_junit.xml")
    assert out.generated_files == [out.json_path, out.html_path, out.junit_path]
    assert out.console_output and not out.has_errors
    assert EvalReport.model_validate(json.loads(Path(out.json_path).read_text(encoding="utf-8"))) == report
    assert Path(out.html_path).read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert ET.parse(out.junit_path).getroot().tag == "testsuites"
    assert "Total cases" in console.getvalue()
    assert "\x1b[" not in console.getvalue()  # colour is auto-detected, not forced, on a non-terminal


def test_flags_choose_reporters_and_their_content(tmp_path: Path) -> None:
    config = _config(console=False, html=False, junit_xml=False, include_actual_response=False)
    out = ReporterManager(config).run_all(sample_report(), output_dir=tmp_path)
    assert out.generated_files == [out.json_path] and not out.console_output
    data = json.loads(Path(out.json_path or "").read_text(encoding="utf-8"))
    assert all("actual_response" not in r for r in data["results"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["capitals_v1__set_.json"]


@pytest.mark.parametrize("name", list(FILE_REPORTERS))
def test_each_registered_reporter_is_switched_by_its_config_field(name: str, tmp_path: Path) -> None:
    switches = {entry.switch: False for entry in FILE_REPORTERS.values()}
    config = _config(console=False, **{**switches, FILE_REPORTERS[name].switch: True})
    out = ReporterManager(config).run_all(sample_report(), output_dir=tmp_path)
    assert out.files == {name: str(tmp_path / f"capitals_v1__set_{FILE_REPORTERS[name].suffix}")}
    assert [p.name for p in tmp_path.iterdir()] == [Path(out.files[name]).name]


def test_output_dir_defaults_to_config_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    out = ReporterManager(_config(console=False, output_dir="reports/nested")).run_all(sample_report())
    assert out.json_path == str(tmp_path / "reports" / "nested" / "capitals_v1__set_.json")


def test_disabled_manager_does_nothing(tmp_path: Path) -> None:
    out = ReporterManager(_config(enabled=False)).run_all(sample_report(), output_dir=tmp_path / "x")
    assert out == ReporterOutput()
    assert not (tmp_path / "x").exists()


def test_file_stem_rules() -> None:
    report = EvalReport.create("a b/c:d-é_1", [passing_case()])
    assert report_file_stem(report, timestamp_files=False) == "a_b_c_d-é_1"
    assert report_file_stem(EvalReport.create("", []), timestamp_files=False) == "eval"
    stamped = report_file_stem(report)
    assert re.fullmatch(r"a_b_c_d-é_1_\d{8}_\d{6}", stamped)
    assert stamped.endswith(time.strftime("_%Y%m%d_%H%M%S", time.localtime(report.timestamp)))
    assert len(report_file_stem(EvalReport.create("x" * 1000, []), timestamp_files=False)) == 100


def test_a_failing_reporter_is_recorded_and_the_others_still_run(tmp_path: Path) -> None:
    (tmp_path / "capitals_v1__set_.html").mkdir()  # the HTML file cannot be written over a directory
    out = ReporterManager(_config(console=False)).run_all(sample_report(), output_dir=tmp_path)
    assert [name for name, _ in out.errors] == ["HTMLReporter"]
    assert out.has_errors and out.html_path is None
    assert out.json_path and Path(out.json_path).is_file()
    assert out.junit_path and Path(out.junit_path).is_file()


def test_unusable_directory_is_recorded_and_console_still_prints(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    console = io.StringIO()
    out = ReporterManager(_config(), console_stream=console).run_all(sample_report(), output_dir=blocker / "sub")
    # one error for the directory, said as a user reads it, and no file tried under it
    assert out.errors == [("directory", f"cannot write {blocker / 'sub'}: Not a directory")]
    assert out.generated_files == []
    assert out.console_output and "Total cases" in console.getvalue()
