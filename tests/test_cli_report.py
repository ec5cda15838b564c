"""``tracegrade report``: every format to stdout and to a file, clean errors for bad report files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support.reporters_samples import sample_report
from tracegrade.cli.main import cli
from tracegrade.models.results import EvalReport


@pytest.fixture
def saved_report(tmp_path: Path) -> tuple[Path, EvalReport]:
    report = sample_report()
    path = tmp_path / "report.json"
    report.to_file(path)
    return path, report


def invoke(*args: str | Path) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["report", *map(str, args)], catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def test_console_is_the_default(saved_report: tuple[Path, EvalReport]) -> None:
    code, out, _ = invoke(saved_report[0])
    assert code == 0
    assert "Evaluation Report: Capitals" in out and "WARNINGS (1)" in out and "\x1b[" not in out
    code, verbose_out, _ = invoke(saved_report[0], "--verbose", "--no-color")
    assert code == 0 and "Judge: 1,500 tokens" in verbose_out and "It is sunny in Paris." in verbose_out


def test_html_to_stdout(saved_report: tuple[Path, EvalReport]) -> None:
    code, out, _ = invoke(saved_report[0], "--format", "html")
    assert code == 0 and out.startswith("<!DOCTYPE html>") and "<script>alert" not in out


def test_junit_to_stdout(saved_report: tuple[Path, EvalReport]) -> None:
    code, out, _ = invoke(saved_report[0], "-f", "junit", "--suite-name", "ci")
    root = ET.fromstring(out.encode("utf-8"))
    assert code == 0 and root.get("name") == "ci" and root.get("tests") == "5"


def test_json_to_stdout_round_trips(saved_report: tuple[Path, EvalReport]) -> None:
    path, report = saved_report
    code, out, _ = invoke(path, "--format", "json")
    assert code == 0 and EvalReport.model_validate(json.loads(out)) == report


@pytest.mark.parametrize(
    ("fmt", "start"), [("html", "<!DOCTYPE html>"), ("junit", "<?xml"), ("json", "{"), ("console", "╔")]
)
def test_output_file(saved_report: tuple[Path, EvalReport], tmp_path: Path, fmt: str, start: str) -> None:
    target = tmp_path / "out" / f"report.{fmt}"
    code, out, err = invoke(saved_report[0], "--format", fmt, "-o", target)
    assert code == 0 and out == ""
    assert f"wrote {target}" in err
    text = target.read_text(encoding="utf-8")
    assert text.startswith(start) and "\x1b[" not in text


def test_malformed_report_names_file_and_json_path(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"eval_set_id": "x", "results": [{"eval_id": "a", "passed": "maybe"}]}))
    code, _, err = invoke(bad, "--format", "html")
    assert code == 2
    assert str(bad) in err and "$.results[0].passed" in err and "Traceback" not in err


def test_invalid_json_and_missing_file(tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text('{"eval_set_id": ')
    code, _, err = invoke(broken)
    assert code == 2 and "invalid JSON" in err and str(broken) in err
    code, _, err = invoke(tmp_path / "missing.json")
    assert code == 2 and "not found" in err


def test_unwritable_output_is_a_clean_error(saved_report: tuple[Path, EvalReport], tmp_path: Path) -> None:
    (tmp_path / "blocker").write_text("file, not a directory")
    code, _, err = invoke(saved_report[0], "-f", "json", "-o", tmp_path / "blocker" / "r.json")
    assert code == 2 and "cannot write" in err


def test_real_subprocess(saved_report: tuple[Path, EvalReport]) -> None:
    script = Path(sys.executable).with_name("tracegrade")
    command = (
        [str(script)] if script.exists() else [sys.executable, "-c", "from tracegrade.cli.main import main; main()"]
    )
    env = {**os.environ, "PYTHONIOENCODING": "utf-8"}
    done = subprocess.run(
        [*command, "report", str(saved_report[0]), "--format", "junit"],
        capture_output=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    assert ET.fromstring(done.stdout).get("failures") == "1"
    done = subprocess.run(
        [*command, "report", str(saved_report[0])], capture_output=True, env=env, timeout=120, check=False
    )
    assert done.returncode == 0 and "\x1b[" not in done.stdout.decode() and b"Total cases" in done.stdout
