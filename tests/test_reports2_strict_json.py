"""Saved reports are strict JSON (RFC 8259, I-JSON) that jq and orjson read: a lone surrogate is written as U+FFFD,
a number that is not finite as ``null`` (the report schema allows it), and every reader (``tracegrade report``,
``diff``, ``gate``, the store's runs) reads such a report back, and the ``"nan"`` strings of earlier versions too."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import orjson
import pytest

from tracegrade.cli.report import load_report
from tracegrade.cli.schema import file_schema
from tracegrade.models.results import CriterionResult, EvalCaseResult, EvalReport, TrialStats
from tracegrade.reporters import JSONReporter

LONE = "half \ud800 pair \udfff end"
PAIR = "\ud83d\ude00"  # two surrogate halves that pair up: the emoji U+1F600


def _cli(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    """The real command in its own process: what a CI step or a shell pipeline runs."""
    command = [sys.executable, "-m", "tracegrade.cli.main", *map(str, args)]
    return subprocess.run(command, cwd=cwd, capture_output=True, timeout=120, check=False)


def _criterion(score: float, **fields: Any) -> CriterionResult:
    return CriterionResult(criterion="quality", score=score, passed=score >= 0.5, threshold=0.5, **fields)


def _odd_report() -> EvalReport:
    """A report holding what no strict JSON can: lone surrogates in text and keys, NaN and infinities."""
    stats = TrialStats(
        trials=2, passed=1, mean=math.nan, ci_low=0.0, ci_high=1.0, pass_at_k=1.0, pass_hat_k=0.0, flaky=True
    )
    odd = EvalCaseResult(
        eval_id="odd",
        name=f"case {LONE}",
        passed=False,
        actual_response=f"{LONE} {PAIR}",
        duration_seconds=math.inf,
        criterion_results=[
            _criterion(math.nan, details={"reason": LONE, f"key {LONE}": -math.inf}, trial_stats=stats),
        ],
    )
    fine = EvalCaseResult(eval_id="fine", passed=True, criterion_results=[_criterion(1.0)])
    return EvalReport.create("strict", [odd, fine])


def _strict_load(data: bytes) -> Any:
    """orjson refuses lone surrogates (escaped or not) and NaN/Infinity, as RFC 8259 and I-JSON do."""
    return orjson.loads(data)


def test_a_json_report_holding_lone_surrogates_and_nan_is_strict_json(tmp_path: Path) -> None:
    path = Path(JSONReporter().save(_odd_report(), tmp_path / "report.json"))
    data = _strict_load(path.read_bytes())
    odd = data["results"][0]
    assert odd["name"] == "case half \ufffd pair \ufffd end"
    assert odd["actual_response"] == "half \ufffd pair \ufffd end \U0001f600"  # a pair is the character it stands for
    criterion = odd["criterion_results"][0]
    assert criterion["score"] is None and odd["duration_seconds"] is None
    assert criterion["trial_stats"]["mean"] is None
    assert criterion["details"] == {"reason": "half \ufffd pair \ufffd end", "key half \ufffd pair \ufffd end": None}
    assert data["summary"]["criterion_stats"]["quality"]["avg_score"] is None  # the mean of a NaN and a 1
    # the report schema says where a number may be null, and the file keeps to it
    jsonschema.validate(data, file_schema("report"))


def test_the_report_schema_allows_null_only_where_a_number_is(tmp_path: Path) -> None:
    schema = file_schema("report")
    score = schema["$defs"]["CriterionResult"]["properties"]["score"]
    assert {"type": "null"} in score["anyOf"] and {"type": "number"} in score["anyOf"]
    report = json.loads(JSONReporter().render(EvalReport.create("s", [EvalCaseResult(eval_id="a", passed=True)])))
    report["results"][0]["criterion_results"] = [
        {"criterion": "c", "score": "nan", "passed": False}  # what earlier versions wrote: not the schema's
    ]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(report, schema)


def test_a_report_read_back_keeps_nan_and_writes_it_again_as_null(tmp_path: Path) -> None:
    path = Path(JSONReporter().save(_odd_report(), tmp_path / "report.json"))
    report = load_report(path)
    odd = report.results[0]
    assert math.isnan(odd.criterion_results[0].score) and math.isnan(odd.duration_seconds)
    assert math.isnan(odd.criterion_results[0].trial_stats.mean)  # type: ignore[union-attr]
    again = Path(JSONReporter().save(report, tmp_path / "again.json"))
    assert _strict_load(again.read_bytes()) == _strict_load(path.read_bytes())


def test_eval_report_to_file_writes_strict_json(tmp_path: Path) -> None:
    # EvalReport.to_file (the Python API's save) raised UnicodeEncodeError on a lone surrogate and wrote NaN tokens
    _odd_report().to_file(tmp_path / "report.json")
    data = _strict_load((tmp_path / "report.json").read_bytes())
    assert data["results"][0]["criterion_results"][0]["score"] is None
    assert data["results"][0]["name"] == "case half \ufffd pair \ufffd end"
    assert math.isnan(EvalReport.from_file(tmp_path / "report.json").results[0].criterion_results[0].score)


def test_the_stores_json_of_a_report_with_nan_reads_back() -> None:
    # recorded runs are stored as pydantic's JSON, which writes NaN as null; loading a run validated that null
    # as a float and failed, so `diff`/`gate` on a run id and the UI's run page could not open such a run
    report = EvalReport.create(
        "s", [EvalCaseResult(eval_id="a", passed=False, criterion_results=[_criterion(math.nan)])]
    )
    text = report.model_dump_json()
    assert '"score":null' in text
    assert math.isnan(EvalReport.model_validate_json(text).results[0].criterion_results[0].score)


def test_tracegrade_report_json_output_is_read_by_strict_parsers(tmp_path: Path) -> None:
    JSONReporter().save(_odd_report(), tmp_path / "report.json")
    done = _cli("report", "report.json", "-f", "json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr.decode()
    assert _strict_load(done.stdout)["results"][0]["criterion_results"][0]["score"] is None
    jq = shutil.which("jq")
    if jq is not None:  # the tool the defect was found with
        parsed = subprocess.run([jq, "-c", ".results[0].name"], input=done.stdout, capture_output=True, check=True)
        assert parsed.stdout.decode("utf-8") == '"case half \ufffd pair \ufffd end"\n'


def _old_report(tmp_path: Path, name: str, scores: list[str | float]) -> Path:
    """A report as earlier versions wrote it: NaN and infinity as the strings "nan" and "inf"."""
    results = [
        {
            "eval_id": f"c{i}",
            "name": f"case {i}",
            "passed": score == 1.0,
            "duration_seconds": "inf",
            "criterion_results": [{"criterion": "quality", "score": score, "passed": score == 1.0, "threshold": 0.5}],
        }
        for i, score in enumerate(scores)
    ]
    path = tmp_path / name
    summary = {"total_cases": len(scores), "pass_rate": "nan", "avg_duration_seconds": "nan"}
    path.write_text(json.dumps({"eval_set_id": "old", "results": results, "summary": summary}), encoding="utf-8")
    return path


@pytest.mark.parametrize("fmt", ["console", "json", "junit", "html"])
def test_tracegrade_report_reads_an_older_report_with_nan_strings(tmp_path: Path, fmt: str) -> None:
    _old_report(tmp_path, "old.json", ["nan", 1.0])
    done = _cli("report", "old.json", "-f", fmt, cwd=tmp_path)
    assert done.returncode == 0, done.stderr.decode()
    if fmt == "json":
        data = _strict_load(done.stdout)
        assert [r["criterion_results"][0]["score"] for r in data["results"]] == [None, 1.0]
        assert data["results"][0]["duration_seconds"] is None


def test_diff_and_gate_read_older_reports_with_nan_strings(tmp_path: Path) -> None:
    # the NaN is a duration and a summary value: scores are numbers, so the runs can be compared
    _old_report(tmp_path, "a.json", [1.0, 1.0, 0.0])
    _old_report(tmp_path, "b.json", [1.0, 0.0, 0.0])
    diff = _cli("diff", "a.json", "b.json", "--format", "json", cwd=tmp_path)
    assert diff.returncode == 0, diff.stderr.decode()
    assert _strict_load(diff.stdout)["summary"]["regressed"] == 1
    gate = _cli("gate", "--baseline", "a.json", "--candidate", "b.json", "--format", "json", "--out", "g", cwd=tmp_path)
    assert gate.returncode == 0, gate.stderr.decode()
    assert _strict_load(gate.stdout)["paired_cases"] == 3


def test_diff_and_gate_name_a_score_that_is_no_number(tmp_path: Path) -> None:
    # a NaN score (null now, "nan" before) cannot be compared: refused, naming the run, case and criterion
    for name, scores in (("a.json", [1.0, 1.0]), ("b.json", ["nan", 1.0])):
        _old_report(tmp_path, name, scores)
    JSONReporter().save(load_report(tmp_path / "b.json"), tmp_path / "b-new.json")
    for candidate in ("b.json", "b-new.json"):
        done = _cli("gate", "--baseline", "a.json", "--candidate", candidate, "--out", "g", cwd=tmp_path)
        assert done.returncode == 2
        assert f"{candidate}: case 'c0', criterion 'quality' has score nan" in done.stderr.decode()
