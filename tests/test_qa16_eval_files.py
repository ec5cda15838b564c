"""QA of eval-set and config files, tracegrade's and Google ADK's, as users hand them over: through the CLI
(`validate`, `run`, `convert`) and the Python API. Every broken file gets one precise FileFormatError (the file,
the key path or line, how to fix it) and exit code 2, never a traceback. Also ADK's tool call written without
`args`, which google-adk fails against a call made with `args: {}` (bench/adk_side_by_side.py checks the same
cases against google-adk's own TrajectoryEvaluator).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tracegrade.errors import FileFormatError, TracegradeError
from tracegrade.models.config import EvalConfig
from tracegrade.models.dataset import EvalSet

from .support.grading_cli import read_report, run_cli

CASE = {
    "eval_id": "c1",
    "conversation": [
        {
            "user_content": {"role": "user", "content": "What time is it?"},
            "expected_final_response": {"role": "assistant", "content": "It is noon."},
        }
    ],
}
GOOD_EVAL_SET = {"eval_set_id": "s", "eval_cases": [CASE]}
GOOD_CONFIG = {"criteria": {"rouge_match": {"threshold": 0.5}}}


def _eval_set_with_args(args: str) -> str:
    """An eval set whose one expected tool call has ``args`` as written (JSON text)."""
    turn = '{"user_content": {"role": "user", "content": "hi"}, "expected_tool_trajectory": [{"name": "t", "args": '
    return '{"eval_set_id": "s", "eval_cases": [{"eval_id": "c1", "conversation": [' + turn + args + "}]}]}]}"


def _adk_eval_set(tool_use: dict[str, object]) -> str:
    invocation = {
        "invocation_id": "i",
        "user_content": {"role": "user", "parts": [{"text": "q"}]},
        "intermediate_data": {"tool_uses": [tool_use]},
    }
    return json.dumps({"eval_set_id": "s", "eval_cases": [{"eval_id": "c", "conversation": [invocation]}]})


OVERFLOW = _eval_set_with_args('{"n": 1e999}')
YAML_CASE = (
    "eval_set_id: s\neval_cases:\n- eval_id: {id}\n  conversation:\n  - user_content: {{role: user, content: hi}}\n"
)

# (file name, is it a config, content, where the problem is, what the message says): each tried through
# `validate`, `run` and EvalSet/EvalConfig.from_file
BROKEN: list[tuple[str, bool, str | bytes, str, str]] = [
    # JSON reads these as infinity or NaN, or as text no UTF-8 file can hold, and took them (fixed here)
    ("overflow.json", False, OVERFLOW, "$", f"1e999 at line 1, column {OVERFLOW.index('1e999') + 1} is too large"),
    ("nan.yaml", False, YAML_CASE.format(id="c1") + "    expected_tool_trajectory: [{name: t, args: {n: .nan}}]\n",
     "$.eval_cases[0].conversation[0].expected_tool_trajectory[0].args.n", ".nan (line 6, column 52) is not a finite"),
    ("infinite_timeout.yaml", True, "timeout: .inf\ncriteria:\n  rouge_match: {threshold: 0.5}\n", "$.timeout",
     ".inf (line 1, column 10) is not a finite number"),
    ("surrogate.json", False, json.dumps(GOOD_EVAL_SET).replace('"s"', '"s\\ud800"'), "$.eval_set_id",
     "holds \\ud800, half of a UTF-16 surrogate pair"),
    ("huge_int.json", True, '{"timeout": 1' + "0" * 400 + ', "criteria": {"rouge_match": {}}}', "$.timeout",
     "too large for a number (at most about 1.8e308): write a smaller one"),
    ("date_id.yaml", False, YAML_CASE.format(id="2024-01-01"), "$.eval_cases[0].eval_id",
     "must be a string (got 2024-01-01, a date to YAML: quote it)"),
    ("config.toml", True, "[criteria.rouge_match]\nthreshold = 0.5\n", "$",
     "a .toml file is read as JSON: tracegrade reads JSON, or YAML from a file named .yaml or .yml"),
    # refused precisely before this session (kept so that they stay so)
    ("unknown_key.json", False, json.dumps({**GOOD_EVAL_SET, "eval_casess": []}), "$.eval_casess",
     "unknown key 'eval_casess' (did you mean 'eval_cases'?)"),
    ("wrong_type.json", True, '{"criteria": {"trajectory": {"threshold": "high"}}}', "$.criteria.trajectory.threshold",
     "unable to parse string as a number (got 'high')"),
    ("empty.json", False, "", "$", "the file is empty"),
    ("invalid_utf8.json", False, b'{"eval_set_id": "s\xff"}', "$", "not UTF-8 text (invalid start byte at byte 18)"),
    ("deep.json", False, '{"eval_cases": ' + "[" * 5000 + "]" * 5000 + "}", "$", "nested too deeply"),
    ("nan.json", True, '{"criteria": {"rouge_match": {"threshold": NaN}}}', "$", "NaN at line 1, column 44"),
    ("duplicate_key.json", True, '{"criteria": {}, "criteria": {}}', "$.criteria", "duplicate key 'criteria'"),
    ("adk_part.evalset.json", False, _adk_eval_set({"name": "t", "argz": {}}),
     "$.eval_cases[0].conversation[0].intermediate_data.tool_uses[0].argz", "unknown key 'argz' (did you mean"),
    ("adk_old.test.json", False, json.dumps([{"query": "q", "refrence": "r"}]), "$[0].refrence",
     "unknown key 'refrence' (did you mean 'reference'?)"),
    ("test_config.json", True, '{"criteria": {"tool_trajectory_avg_scor": 1.0}}',
     "$.criteria.tool_trajectory_avg_scor", "unknown ADK metric 'tool_trajectory_avg_scor' (did you mean"),
]  # fmt: skip


def _write(path: Path, content: str | bytes) -> Path:
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def _agent(tmp_path: Path, body: str = "    return 'It is noon.'\n") -> Path:
    return _write(tmp_path / "agent.py", "from tracegrade import trace_tool\n\n\ndef agent(query):\n" + body)


def _run_args(tmp_path: Path, path: Path, is_config: bool) -> list[str | Path]:
    """`tracegrade run` with ``path`` as its config or eval set, the other one good."""
    evalset = _write(tmp_path / "good.json", json.dumps(GOOD_EVAL_SET)) if is_config else path
    config = path if is_config else _write(tmp_path / "good_config.json", json.dumps(GOOD_CONFIG))
    return ["run", _agent(tmp_path), "--evalset", evalset, "--config", config, "--out", tmp_path / "out"]


def _assert_precise(output: str, path: Path, where: str, what: str) -> None:
    assert "Traceback" not in output, output
    assert f"{path}" in output and f"at {where}: " in output and what in output, output
    assert len(output.strip().splitlines()) <= 3, output  # the problem, not a dump


@pytest.mark.parametrize(("name", "is_config", "content", "where", "what"), BROKEN, ids=[b[0] for b in BROKEN])
def test_a_broken_file_is_one_precise_error_everywhere(
    tmp_path: Path, name: str, is_config: bool, content: str | bytes, where: str, what: str
) -> None:
    path = _write(tmp_path / name, content)
    checked = run_cli("validate", path)
    assert checked.exit_code == 2
    _assert_precise(checked.output, path, where, what)
    ran = run_cli(*_run_args(tmp_path, path, is_config))
    assert ran.exit_code == 2
    _assert_precise(ran.output, path, where, what)
    assert not (tmp_path / "out").exists()  # nothing ran, nothing was written
    with pytest.raises(FileFormatError) as refused:
        (EvalConfig if is_config else EvalSet).from_file(path)
    assert refused.value.path == str(path) and [at for at, _ in refused.value.problems] == [where]
    assert what in str(refused.value)


def test_a_lone_surrogate_is_refused_by_convert_not_a_traceback(tmp_path: Path) -> None:
    source = _write(tmp_path / "s.json", json.dumps(GOOD_EVAL_SET).replace('"It is noon."', '"noon \\udc80"'))
    converted = run_cli("convert", source, tmp_path / "s.evalset.json", "--to", "adk")
    assert converted.exit_code == 2
    where = "$.eval_cases[0].conversation[0].expected_final_response.content"
    _assert_precise(converted.output, source, where, "holds \\udc80, half of a UTF-16 surrogate pair")
    assert not (tmp_path / "s.evalset.json").exists()


def test_a_surrogate_pair_written_as_escapes_is_one_character(tmp_path: Path) -> None:
    path = _write(tmp_path / "pair.json", json.dumps(GOOD_EVAL_SET).replace('"s"', '"s \\ud83d\\ude00"'))
    assert EvalSet.from_file(path).eval_set_id == "s \N{GRINNING FACE}"


@pytest.mark.parametrize("kind", ["directory", "symlink loop", "missing"])
def test_a_path_that_is_no_file_is_named_with_what_it_is(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "cases.json"
    if kind == "directory":
        path.mkdir()
    elif kind == "symlink loop":
        path.symlink_to(tmp_path / "other.json")
        (tmp_path / "other.json").symlink_to(path)
    expected = {
        "directory": "a directory, not a regular file",
        "symlink loop": "a symlink loop",
        "missing": "file not found",
    }
    with pytest.raises(TracegradeError) as refused:
        EvalSet.from_file(path)
    assert str(path) in str(refused.value) and expected[kind] in str(refused.value)
    ran = run_cli(*_run_args(tmp_path, path, is_config=False))
    assert ran.exit_code == 2 and "Traceback" not in ran.output and str(path) in ran.output, ran.output
    assert len(ran.output.strip().splitlines()) <= 4, ran.output


def test_a_bom_and_crlf_are_read(tmp_path: Path) -> None:
    path = _write(tmp_path / "bom.yaml", "\ufeffcriteria:\r\n  rouge_match: {threshold: 0.5}\r\n")
    assert EvalConfig.from_file(path).criteria.rouge_match is not None


# ---- ADK: a tool call without args is not a call with args {}


def _adk_case(eval_id: str, tool_use: dict[str, object]) -> dict[str, object]:
    invocation = {
        "invocation_id": f"{eval_id}-1",
        "user_content": {"role": "user", "parts": [{"text": f"What time is it ({eval_id})?"}]},
        "final_response": {"role": "model", "parts": [{"text": "It is noon."}]},
        "intermediate_data": {"tool_uses": [tool_use]},
    }
    return {"eval_id": eval_id, "conversation": [invocation]}


NOW_TOOL = (
    "    with trace_tool('now', arguments={}) as tool:\n        tool.set_result('12:00')\n    return 'It is noon.'\n"
)
ADK_CASES = [
    _adk_case("no_args", {"name": "now"}),
    _adk_case("null_args", {"name": "now", "args": None}),
    _adk_case("empty_args", {"name": "now", "args": {}}),
]


def test_adk_scoring_fails_a_call_without_args_against_args_empty(tmp_path: Path) -> None:
    """ADK's files graded by `tracegrade run` with ADK's test_config.json, as google-adk 2.13 scores them: an
    expected call written without args (or with args null) fails the agent's call with args {}. (A traced call
    always has arguments, {} at least; bench/adk_side_by_side.py also has actual calls without args.)"""
    evalset = _write(tmp_path / "now.evalset.json", json.dumps({"eval_set_id": "now", "eval_cases": ADK_CASES}))
    config = _write(tmp_path / "test_config.json", json.dumps({"criteria": {"tool_trajectory_avg_score": 1.0}}))
    agent = _agent(tmp_path, NOW_TOOL)
    ran = run_cli("run", agent, "--evalset", evalset, "--config", config, "--out", tmp_path / "out", "--format", "json")
    assert ran.exit_code == 1, ran.output
    scores = {
        r.eval_id: {c.criterion: c.score for c in r.criterion_results}["tool_trajectory_avg_score"]
        for r in read_report(tmp_path / "out").results
    }
    assert scores == {"no_args": 0.0, "null_args": 0.0, "empty_args": 1.0}


def test_tracegrade_scoring_still_reads_a_call_without_args_as_any_args(tmp_path: Path) -> None:
    evalset = _write(tmp_path / "now.evalset.json", json.dumps({"eval_set_id": "now", "eval_cases": ADK_CASES}))
    config = _write(tmp_path / "config.json", json.dumps({"criteria": {"trajectory": {"check_args": True}}}))
    agent = _agent(tmp_path, NOW_TOOL)
    ran = run_cli("run", agent, "--evalset", evalset, "--config", config, "--out", tmp_path / "out")
    assert ran.exit_code == 0, ran.output


def test_convert_keeps_a_call_without_args_apart_from_args_empty(tmp_path: Path) -> None:
    source = _write(tmp_path / "now.evalset.json", json.dumps({"eval_set_id": "now", "eval_cases": ADK_CASES}))
    ours, back = tmp_path / "now.json", tmp_path / "back.evalset.json"
    assert run_cli("convert", source, ours, "--to", "tracegrade").exit_code == 0
    written = json.loads(ours.read_text(encoding="utf-8"))
    calls = [case["conversation"][0]["expected_tool_trajectory"][0] for case in written["eval_cases"]]
    assert ["args" in call for call in calls] == [False, False, True]
    assert run_cli("convert", ours, back, "--to", "adk").exit_code == 0
    again = json.loads(back.read_text(encoding="utf-8"))
    uses = [case["conversation"][0]["intermediate_data"]["tool_uses"][0] for case in again["eval_cases"]]
    assert [use.get("args", "absent") for use in uses] == ["absent", "absent", {}]
    assert [c.args_given for c in EvalSet.from_file(back).eval_cases[0].conversation[0].expected_tool_trajectory] == [
        False
    ]


def test_a_number_of_runs_past_the_bound_is_refused_when_the_config_loads(tmp_path: Path) -> None:
    # 10**30 trials used to pass validation and a run then went on until memory ran out
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"num_runs": 10**30}), encoding="utf-8")
    with pytest.raises(TracegradeError) as refused:
        EvalConfig.from_file(path)
    assert "$.num_runs" in str(refused.value) and "less than or equal to 1000" in str(refused.value)
    assert EvalConfig(num_runs=1000).num_runs == 1000


@pytest.mark.parametrize(
    ("name", "text", "where"),
    [
        ("config.yaml", "criteria:\n  trajectory:\n    threshold: yes\n", "$.criteria.trajectory.threshold"),
        ("config.json", '{"num_runs": true}', "$.num_runs"),
        ("config.json", '{"criteria": {"budget": {"max_llm_calls": false}}}', "$.criteria.budget.max_llm_calls"),
    ],
)
def test_true_or_false_where_a_number_belongs_is_refused_at_its_key(
    tmp_path: Path, name: str, text: str, where: str
) -> None:
    # pydantic read them as 1 and 0: `threshold: yes` was a threshold of 1.0
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with pytest.raises(TracegradeError) as refused:
        EvalConfig.from_file(path)
    assert f"at {where}: true or false where a number belongs: write a number" in str(refused.value)
