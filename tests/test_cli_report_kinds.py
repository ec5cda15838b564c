"""`tracegrade report` refuses files that are not reports and says what they look like instead."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support.reporters_samples import sample_report
from tests.support.server_otlp import otlp_json_to_proto
from tracegrade.cli.main import cli

ROOT = Path(__file__).resolve().parents[1]
OTLP_FIXTURE = ROOT / "tests" / "data" / "otlp" / "langgraph_openinference_langchain.otlp.json"


def _report(path: Path) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["report", str(path)], catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def _otlp_json_lines(tmp_path: Path) -> Path:
    document = json.loads(OTLP_FIXTURE.read_text(encoding="utf-8"))
    target = tmp_path / "export.json"  # not .jsonl: recognised by content
    target.write_text(json.dumps(document) + "\n" + json.dumps(document) + "\n", encoding="utf-8")
    return target


def _otlp_protobuf(tmp_path: Path) -> Path:
    target = tmp_path / "export.pb"
    target.write_bytes(otlp_json_to_proto(json.loads(OTLP_FIXTURE.read_text(encoding="utf-8"))))
    return target


@pytest.mark.parametrize(
    ("make", "looks_like", "hint"),
    [
        (lambda tmp: shutil.copy(ROOT / "examples/langgraph_weather/eval_set.json", tmp), "an eval set", "grade"),
        (lambda tmp: shutil.copy(ROOT / "examples/langgraph_weather/config.json", tmp), "an eval config", "grade"),
        (lambda tmp: shutil.copy(OTLP_FIXTURE, tmp), "an OTLP/JSON traces request", "tracegrade import"),
        (_otlp_json_lines, "OTLP/JSON lines", "tracegrade import"),
        (_otlp_protobuf, "binary data", "tracegrade import"),
    ],
    ids=["eval-set", "config", "otlp-json", "otlp-json-lines", "otlp-protobuf"],
)
def test_other_kinds_of_file_are_refused_by_name(tmp_path: Path, make, looks_like: str, hint: str) -> None:
    path = Path(make(tmp_path))
    code, out, err = _report(path)
    assert code == 2, out
    assert "ALL FAILED" not in out and "0 cases" not in out
    assert str(path) in err and "not a tracegrade report" in err and looks_like in err and hint in err
    assert "Traceback" not in err


def test_json_object_of_no_known_kind_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.json"
    path.write_text(json.dumps({"name": "x", "items": []}), encoding="utf-8")
    code, _, err = _report(path)
    assert code == 2 and "none of a report's keys" in err and "'items'" in err


def test_a_report_still_renders(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    sample_report().to_file(path)
    code, out, _ = _report(path)
    assert code == 0 and "Evaluation Report: Capitals" in out


def test_validate_names_a_report_instead_of_calling_it_an_eval_set(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    sample_report().to_file(path)
    result = CliRunner().invoke(cli, ["validate", str(path)], catch_exceptions=False)
    assert result.exit_code == 2 and "it looks like an evaluation report" in result.stderr
