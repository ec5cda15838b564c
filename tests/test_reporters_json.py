"""JSONReporter: exact round trip, include flags, warnings/skips/costs kept, odd content, files."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.reporters_samples import LONG, NO_PROVIDER, odd_report, passing_case, sample_report
from tracegrade.models.results import EvalReport
from tracegrade.reporters import JSONReporter

CASE_FIELDS_BY_FLAG = {
    "include_trajectory": ["actual_trajectory"],
    "include_tool_call_details": ["actual_tool_calls"],
    "include_node_responses": ["node_responses", "node_details"],
    "include_actual_response": ["actual_response"],
}


def test_round_trips_through_model_validate() -> None:
    report = sample_report()
    back = EvalReport.model_validate(json.loads(JSONReporter().to_json(report)))
    assert back == report
    assert back.results[1].actual_response.endswith(LONG)  # nothing truncated


def test_warnings_skips_and_costs_are_kept() -> None:
    data = JSONReporter().to_dict(sample_report())
    assert data["summary"]["warnings"] == [f"final_response_match_v2: {NO_PROVIDER} (1 case)"]
    by_id = {r["eval_id"]: r for r in data["results"]}
    assert by_id["case-warn"]["criterion_results"][0]["warnings"] == [NO_PROVIDER]
    assert by_id["case-skipped"]["criterion_results"][0]["skipped"] is True
    judge = by_id["case-pass"]["criterion_results"][1]["token_usage"]
    assert judge["cost_usd"] == 0.0123 and judge["total_tokens"] == 1500
    assert data["summary"]["judge_token_usage"]["cost_usd"] == 0.0123
    assert by_id["case-pass"]["token_usage"]["total_tokens"] == 1500 + 5700


def test_each_include_flag_drops_its_fields_only() -> None:
    report = sample_report()
    for flag, fields in CASE_FIELDS_BY_FLAG.items():
        data = JSONReporter(**{flag: False}).to_dict(report)
        for case in data["results"]:
            for field in fields:
                assert field not in case, (flag, field)
            others = [f for fl, fs in CASE_FIELDS_BY_FLAG.items() if fl != flag for f in fs]
            assert all(f in case for f in others)
        EvalReport.model_validate(data)  # still a valid report
    data = JSONReporter(include_details=False).to_dict(report)
    assert all("details" not in c for r in data["results"] for c in r["criterion_results"])
    assert "details" in JSONReporter().to_dict(report)["results"][0]["criterion_results"][0]


def test_indent_and_string_form() -> None:
    report = EvalReport.create("s", [passing_case()])
    assert "\n" not in JSONReporter(indent=None).to_json(report)
    assert JSONReporter().to_json(report).startswith('{\n  "eval_set_id": "s"')
    assert JSONReporter().generate(report).strip() == JSONReporter().to_json(report)


def test_odd_content_becomes_valid_json() -> None:
    data = json.loads(JSONReporter().to_json(odd_report()))
    calls = data["results"][0]["actual_tool_calls"]
    assert calls[0] == "bare_tool_name"
    assert calls[1]["result"].startswith("<object object at")


def test_lone_surrogate_is_written_as_the_replacement_character(tmp_path: Path) -> None:
    # its JSON escape "\ud800" is refused by strict parsers (jq, orjson; RFC 8259 and I-JSON)
    case = passing_case()
    case.actual_response = "half \ud800 pair"
    report = EvalReport.create("s", [case])
    path = JSONReporter().save(report, tmp_path / "r.json")
    assert json.loads(Path(path).read_text(encoding="utf-8"))["results"][0]["actual_response"] == "half \ufffd pair"


def test_save_generate_and_quick_save_write_files(tmp_path: Path) -> None:
    report = sample_report()
    saved = JSONReporter().save(report, tmp_path / "deep" / "dir" / "out.json")
    assert Path(saved).is_file()
    assert EvalReport.from_file(saved) == report
    generated = JSONReporter().generate(report, output_dir=tmp_path / "gen")
    assert generated == str((tmp_path / "gen" / "report.json").absolute())
    quick = JSONReporter.quick_save(report, tmp_path / "quick.json", indent=4)
    assert Path(quick).read_text(encoding="utf-8").startswith('{\n    "eval_set_id"')
    assert list(tmp_path.glob("**/*.tmp")) == []
