"""Broken eval-set and config files, ADK's and tracegrade's: each is refused with the file, the JSON path and what
is wrong, by `tracegrade validate` (exit 2, no traceback) and by the Python API (the project's own error)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tracegrade.cli.main import cli
from tracegrade.errors import ConfigError, EvalSetError, FileFormatError
from tracegrade.models import EvalConfig, EvalReport, EvalSet

TURN = {"user_content": {"role": "user", "parts": [{"text": "hi"}]}}


def adk_set(case: dict[str, Any] | None = None, turn: dict[str, Any] | None = None) -> dict[str, Any]:
    """A one-case ADK eval set, with ``case`` and ``turn`` merged into its case and its turn."""
    return {
        "eval_set_id": "s",
        "eval_cases": [{"eval_id": "a", "conversation": [{**TURN, **(turn or {})}], **(case or {})}],
    }


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def symlink_loop(tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    os.symlink(tmp_path / "other.json", path)
    os.symlink(path, tmp_path / "other.json")
    return path


Writer = Callable[[Path, str], Path]


def content(value: Any) -> Writer:
    def write(tmp_path: Path, name: str) -> Path:
        path = tmp_path / name
        path.write_text(value if isinstance(value, str) else json.dumps(value), encoding="utf-8")
        return path

    return write


CASES: list[tuple[str, str, Writer, list[tuple[str, str]]]] = [
    # (file name, kind, writer, [(JSON path, fragment of what is said there)]) -- A1: wrong types in ADK files
    (
        "conv.evalset.json",
        "evalset",
        content(adk_set({"conversation": 5})),
        [("$.eval_cases[0].conversation", "must be a list (got 5)")],
    ),
    ("old_data.test.json", "evalset", content([{"name": "c", "data": 5}]), [("$[0].data", "must be a list (got 5)")]),
    (
        "session.evalset.json",
        "evalset",
        content(adk_set({"session_input": ["x"]})),
        [("$.eval_cases[0].session_input", "must be an object (got ['x'])")],
    ),
    (
        "state.evalset.json",
        "evalset",
        content(adk_set({"session_input": {"state": "abc"}})),
        [("$.eval_cases[0].session_input.state", "must be an object (got 'abc')")],
    ),
    (
        "inter.evalset.json",
        "evalset",
        content(adk_set(turn={"intermediate_data": ["x"]})),
        [("$.eval_cases[0].conversation[0].intermediate_data", "must be an object (got ['x'])")],
    ),
    (
        "events.evalset.json",
        "evalset",
        content(adk_set(turn={"intermediate_data": {"invocation_events": ["x"]}})),
        [("$.eval_cases[0].conversation[0].intermediate_data.invocation_events[0]", "must be an object (got 'x')")],
    ),
    (
        "tool.test.json",
        "evalset",
        content([{"query": "hi", "expected_tool_use": ["get_weather"], "reference": "x"}]),
        [("$[0].expected_tool_use[0]", "must be an object (got 'get_weather')")],
    ),
    (
        "test_config.json",
        "config",
        content({"criteria": {"final_response_match_v2": {"threshold": 0.8, "judge_model_options": "gemini"}}}),
        [("$.criteria.final_response_match_v2.judge_model_options", "must be an object (got 'gemini')")],
    ),
    (
        "test_config.json",
        "config",
        content(
            {
                "criteria": {
                    "rubric_based_final_response_quality_v1": {
                        "threshold": 0.8,
                        "rubrics": [{"rubric_id": "r", "rubric_content": "be nice"}],
                    }
                }
            }
        ),
        [("$.criteria.rubric_based_final_response_quality_v1.rubrics[0].rubric_content", "must be an object")],
    ),
    # A12: unknown keys in ADK files, with the key meant
    (
        "test_config.json",
        "config",
        content(
            {
                "criteria": {
                    "tool_trajectory_avg_score": {"threshold": 1.0, "ignore_arg": True, "match_typ": "ANY_ORDER"},
                    "final_response_match_v2": {
                        "threshold": 0.8,
                        "judge_model_options": {"judge_modl": "openai/x", "num_sample": 1},
                    },
                }
            }
        ),
        [
            ("$.criteria.tool_trajectory_avg_score.ignore_arg", "did you mean 'ignore_args'?"),
            ("$.criteria.tool_trajectory_avg_score.match_typ", "did you mean 'match_type'?"),
            ("$.criteria.final_response_match_v2.judge_model_options.judge_modl", "did you mean 'judge_model'?"),
            ("$.criteria.final_response_match_v2.judge_model_options.num_sample", "did you mean 'num_samples'?"),
        ],
    ),
    (
        "turn.evalset.json",
        "evalset",
        content(adk_set(turn={"final_respons": TURN["user_content"], "intermediate_dat": {"tool_uses": []}})),
        [
            (
                "$.eval_cases[0].conversation[0].final_respons",
                "unknown key 'final_respons' (did you mean 'final_response'?)",
            ),
            ("$.eval_cases[0].conversation[0].intermediate_dat", "did you mean 'intermediate_data'?"),
        ],
    ),
    (
        "old.test.json",
        "evalset",
        content([{"query": "hi", "expected_tool_uses": [{"tool_name": "t", "tool_input": {}}], "referense": "x"}]),
        [("$[0].expected_tool_uses", "did you mean 'expected_tool_use'?"), ("$[0].referense", "'reference'")],
    ),
    (
        "case.evalset.json",
        "evalset",
        content(adk_set({"sesion_input": {"state": {}}})),
        [("$.eval_cases[0].sesion_input", "did you mean 'session_input'?")],
    ),
    # A2: nesting too deep for the parser, or for code that walks the value
    (
        "deep.json",
        "evalset",
        content('{"eval_cases": [], "metadata": {"x": ' + nested(3000) + "}}"),
        [("$", "nested too deeply for the parser")],
    ),
    (
        "deep.yaml",
        "config",
        content("criteria:\n  x: " + nested(3000) + "\n"),
        [("$", "nested too deeply for the parser")],
    ),
    (
        "deep.evalset.json",
        "evalset",
        content(adk_set(turn={"user_content": {"parts": [{"text": "hi", "x": json.loads(nested(900))}]}})),
        [("$.eval_cases[0].conversation[0].user_content.parts", "nested too deeply")],
    ),
    # A11: a key given twice
    (
        "dup.json",
        "config",
        content(
            '{"criteria": {"trajectory": {"threshold": 1.0, "check_args": true}, "trajectory": {"threshold": 0.1}}}'
        ),
        [("$.criteria.trajectory", "duplicate key 'trajectory'")],
    ),
    (
        "dup.yaml",
        "config",
        content("criteria:\n  trajectory: {threshold: 1.0, check_args: true}\n  trajectory: {threshold: 0.1}\n"),
        [("$.criteria.trajectory", "duplicate key 'trajectory' (line 3, column 3)")],
    ),
    (
        "dup_case.json",
        "evalset",
        content('{"eval_cases": [{"eval_id": "a", "eval_id": "b", "conversation": []}]}'),
        [("$.eval_cases[0].eval_id", "duplicate key 'eval_id'")],
    ),
    # poor messages made precise
    ("empty.yaml", "config", content("# nothing yet\n"), [("$", "the file is empty")]),
    ("empty.json", "evalset", content("  \n"), [("$", "the file is empty")]),
    ("loop.json", "config", symlink_loop, [("$", "a symlink loop")]),
    (
        "mixed.json",
        "evalset",
        content(
            {
                "eval_set_id": "s",
                "eval_cases": [
                    {"eval_id": "ours", "conversation": [{"user_content": {"role": "user", "content": "hi"}}]},
                    {"eval_id": "adk", "conversation": [TURN]},
                ],
            }
        ),
        [("$.eval_cases", "mixes Google ADK's format ($.eval_cases[1]: turns with parts")],
    ),
]


@pytest.mark.parametrize(("name", "kind", "write", "expected"), CASES, ids=[f"{c[0]}-{c[3][0][1]}" for c in CASES])
def test_validate_names_path_and_problem_without_a_traceback(
    tmp_path: Path, name: str, kind: str, write: Writer, expected: list[tuple[str, str]]
) -> None:
    path = write(tmp_path, name)
    result = CliRunner().invoke(cli, ["validate", str(path)])
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit)  # not an exception escaping the command
    assert "Traceback" not in result.output
    assert f"error {path}: invalid" in result.output
    for where, what in expected:
        assert any(line.startswith(f"  at {where}: ") and what in line for line in result.output.splitlines()), (
            where,
            what,
            result.output,
        )


@pytest.mark.parametrize(("name", "kind", "write", "expected"), CASES, ids=[f"{c[0]}-{c[3][0][1]}" for c in CASES])
def test_loading_raises_the_file_error_of_its_kind(
    tmp_path: Path, name: str, kind: str, write: Writer, expected: list[tuple[str, str]]
) -> None:
    path = write(tmp_path, name)
    load, error = (EvalSet.from_file, EvalSetError) if kind == "evalset" else (EvalConfig.from_file, ConfigError)
    with pytest.raises(error) as caught:
        load(path)
    assert caught.value.path == str(path)
    for where, what in expected:
        assert any(p == where and what in message for p, message in caught.value.problems), caught.value.problems


def test_an_empty_file_says_what_the_kind_of_file_holds(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        EvalConfig.from_file(content("")(tmp_path, "c.yaml"))
    assert caught.value.problems == [("$", 'the file is empty; a config is an object with "criteria": {...}')]


def test_a_utf8_byte_order_mark_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps({"criteria": {"rouge_match": {"threshold": 0.5}}}).encode())
    assert EvalConfig.from_file(path).criteria.rouge_match is not None
    result = CliRunner().invoke(cli, ["validate", str(path)])
    assert result.exit_code == 0 and "config enabling rouge_match" in result.output


def test_a_report_nested_too_deeply_is_a_file_error(tmp_path: Path) -> None:
    path = content('{"results": [], "metadata": {"x": ' + nested(3000) + "}}")(tmp_path, "r.json")
    with pytest.raises(FileFormatError) as caught:
        EvalReport.from_file(path)
    assert "nested too deeply for the parser" in caught.value.problems[0][1]
    result = CliRunner().invoke(cli, ["report", str(path)])
    assert result.exit_code != 0 and "nested too deeply" in result.output and "Traceback" not in result.output


def test_keys_adk_writes_and_tracegrade_does_not_use_are_accepted(tmp_path: Path) -> None:
    """Timings, app details, per-invocation rubrics, dumped events' other keys and an old tool use's mock output."""
    turn = {
        "creation_timestamp": 1.5,
        "duration": 2.0,
        "model_duration": 1.0,
        "tool_duration": 0.5,
        "rubrics": [],
        "app_details": {"agent_details": {}},
        "intermediate_data": {
            "invocation_events": [{"author": "a", "content": {"parts": [{"text": "t"}]}, "usage_metadata": {}}]
        },
    }
    eval_set = EvalSet.from_file(content(adk_set(turn=turn))(tmp_path, "s.evalset.json"))
    assert eval_set.eval_cases[0].conversation[0].expected_intermediate_responses[0].get_text() == "t"
    old = [{"query": "q", "expected_tool_use": [{"tool_name": "t", "tool_input": {}, "mock_tool_output": "x"}]}]
    [call] = (
        EvalSet.from_file(content(old)(tmp_path, "o.test.json")).eval_cases[0].conversation[0].expected_tool_trajectory
    )
    assert call.name == "t"
