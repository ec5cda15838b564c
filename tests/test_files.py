"""Malformed eval-set, config and report files: every error names the file, the JSON path and the problem,
lists every problem at once, and nothing is half-loaded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tracegrade.errors import ConfigError, EvalSetError, FileFormatError
from tracegrade.models import CRITERIA_SLOTS, EvalConfig, EvalReport, EvalSet
from tracegrade.models.builder import EvalSetBuilder

VALID_CASE = {"eval_id": "ok", "conversation": [{"user_content": {"role": "user", "content": "hi"}}]}


def write(tmp_path: Path, name: str, content: str | bytes | object) -> Path:
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif isinstance(content, str):
        path.write_text(content, encoding="utf-8")
    else:
        path.write_text(json.dumps(content), encoding="utf-8")
    return path


def problems_of(exc: FileFormatError) -> dict[str, str]:
    return dict(exc.problems)


def test_invalid_json_names_file_line_and_column(tmp_path: Path):
    path = write(tmp_path, "broken.json", '{\n  "eval_cases": [\n    {"eval_id": "a",}\n  ]\n}')
    with pytest.raises(EvalSetError) as info:
        EvalSet.from_file(path)
    exc = info.value
    assert exc.path == str(path) and exc.kind == "eval set"
    message = "invalid JSON: Expecting property name enclosed in double quotes at line 3, column 21"
    assert exc.problems == [("$", message)]
    assert str(path) in str(exc) and "at $: invalid JSON" in str(exc)


def test_wrong_types_and_unknown_keys_are_all_listed_with_json_paths(tmp_path: Path):
    data = {
        "eval_set_id": "s",
        "eval_cases": [
            VALID_CASE,
            {
                "eval_id": 7,
                "conversation": [
                    {"user_content": {"role": "user", "content": "hi"}, "expected_tool_trajectory": [{"args": {}}]},
                    {"user_content": {"role": ["user"], "content": "x"}, "expected_node_order": "MAIN"},
                ],
                "tagz": ["typo"],
            },
        ],
    }
    path = write(tmp_path, "set.json", data)
    with pytest.raises(EvalSetError) as info:
        EvalSet.from_file(path)
    found = problems_of(info.value)
    assert set(found) == {
        "$.eval_cases[1].eval_id",
        "$.eval_cases[1].conversation[0].expected_tool_trajectory[0].name",
        "$.eval_cases[1].conversation[1].user_content.role",
        "$.eval_cases[1].conversation[1].expected_node_order",
        "$.eval_cases[1].tagz",
    }
    assert found["$.eval_cases[1].tagz"] == "unknown key 'tagz' (did you mean 'tags'?)"
    assert found["$.eval_cases[1].conversation[0].expected_tool_trajectory[0].name"] == "Field required"
    assert "got 7" in found["$.eval_cases[1].eval_id"]
    assert "5 problems" in str(info.value)


def test_top_level_must_be_an_object(tmp_path: Path):
    with pytest.raises(EvalSetError) as info:
        EvalSet.from_file(write(tmp_path, "list.json", [VALID_CASE]))
    assert info.value.problems == [("$", "expected a JSON object, got an array")]


def test_not_utf8(tmp_path: Path):
    with pytest.raises(FileFormatError) as info:
        EvalSet.from_file(write(tmp_path, "latin1.json", '{"name": "caf\xe9"}'.encode("latin-1")))
    assert info.value.problems[0][0] == "$" and info.value.problems[0][1].startswith("not UTF-8 text")


def test_missing_file(tmp_path: Path):
    with pytest.raises(FileNotFoundError, match="eval set file not found"):
        EvalSet.from_file(tmp_path / "absent.json")


def test_nothing_is_half_loaded(tmp_path: Path):
    """A file with valid and invalid cases yields an error and no object, not the valid part."""
    path = write(tmp_path, "half.json", {"eval_cases": [VALID_CASE, {"conversation": "nope"}]})
    with pytest.raises(EvalSetError):
        EvalSet.from_file(path)
    with pytest.raises(EvalSetError):
        EvalSetBuilder.from_file(path)


def test_config_unknown_slot_lists_valid_slots_and_other_problems(tmp_path: Path):
    data = {"criteria": {"exact_match": {"threshold": 1.0}, "trajectory": {"match_type": "FUZZY"}}, "paralel": True}
    path = write(tmp_path, "config.json", data)
    with pytest.raises(ConfigError) as info:
        EvalConfig.from_file(path)
    found = problems_of(info.value)
    slot_message = found["$.criteria.exact_match"]
    assert slot_message.startswith("unknown criterion slot 'exact_match'; valid slots: ")  # none is close
    assert all(slot in slot_message for slot in CRITERIA_SLOTS) and "got" not in slot_message
    assert "'EXACT', 'IN_ORDER' or 'ANY_ORDER'" in found["$.criteria.trajectory.match_type"]
    assert found["$.paralel"] == "unknown key 'paralel' (did you mean 'parallel'?)"
    assert info.value.kind == "config" and str(path) in str(info.value)


def test_config_value_out_of_range(tmp_path: Path):
    path = write(tmp_path, "c.json", {"criteria": {"rouge_match": {"threshold": 1.5}}, "max_concurrency": 0})
    with pytest.raises(ConfigError) as info:
        EvalConfig.from_file(path)
    found = problems_of(info.value)
    assert "less than or equal to 1" in found["$.criteria.rouge_match.threshold"]
    assert "greater than or equal to 1" in found["$.max_concurrency"]


def test_invalid_yaml_config(tmp_path: Path):
    with pytest.raises(ConfigError) as info:
        EvalConfig.from_file(write(tmp_path, "c.yaml", "criteria: [unclosed\n"))
    assert info.value.problems[0][1].startswith("invalid YAML")


def test_malformed_report(tmp_path: Path):
    path = write(tmp_path, "r.json", {"eval_set_id": "s", "results": [{"eval_id": "c"}]})
    with pytest.raises(FileFormatError) as info:
        EvalReport.from_file(path)
    assert problems_of(info.value) == {"$.results[0].passed": "Field required"}


def test_save_is_atomic_and_leaves_no_temporary_files(tmp_path: Path):
    EvalSet(eval_set_id="s", eval_cases=[]).to_file(tmp_path / "out" / "s.json")
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["s.json"]
