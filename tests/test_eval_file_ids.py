"""Eval ids as every way in reads them: two cases of one id and control characters in an id are refused by
`EvalSet.from_file` as by `validate`, `run` and `convert` (tracegrade's files and ADK's, an EvalSet built in code at
the run), with the file and the place of each occurrence; `EvalSet.to_file` refuses to write two cases of one id; a
scenario's id is refused a control character as an eval id is; and `convert` to ADK names a call written without
`args` or with `args: {}` ("any arguments" to tracegrade, which ADK's format cannot say) instead of changing its
meaning silently."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from tracegrade import AgentEvaluator, CriteriaConfig, CriterionConfig, EvalConfig, create_eval_app
from tracegrade.errors import EvalSetError
from tracegrade.evaluation.simulator import ConversationScenario
from tracegrade.models.adk_files import eval_set_to_adk
from tracegrade.models.dataset import EvalCase, EvalSet
from tracegrade.models.files import validation_problems

from .support.grading_cli import run_cli

DUPLICATE_A = "duplicate eval_id 'a' (also used at $.eval_cases[0]); every case needs its own eval_id"


def _case(eval_id: str, tools: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    turn: dict[str, Any] = {
        "user_content": {"role": "user", "content": "What time is it?"},
        "expected_final_response": {"role": "assistant", "content": "It is noon."},
    }
    if tools is not None:
        turn["expected_tool_trajectory"] = tools
    return {"eval_id": eval_id, "conversation": [turn]}


def _adk_case(eval_id: str) -> dict[str, Any]:
    invocation = {
        "invocation_id": f"{eval_id}-1",
        "user_content": {"role": "user", "parts": [{"text": "What time is it?"}]},
        "final_response": {"role": "model", "parts": [{"text": "It is noon."}]},
    }
    return {"eval_id": eval_id, "conversation": [invocation]}


def _old_adk_case(name: str) -> dict[str, Any]:
    return {"name": name, "data": [{"query": "What time is it?", "expected_tool_use": [], "reference": "noon"}]}


def _write(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def _agent(tmp_path: Path) -> Path:
    path = tmp_path / "agent.py"
    path.write_text("def agent(query):\n    return 'It is noon.'\n", encoding="utf-8")
    return path


def _refused_everywhere(tmp_path: Path, path: Path) -> list[tuple[str, str]]:
    """The problems `EvalSet.from_file` refuses ``path`` with, after checking that `validate`, `run` and `convert`
    refuse it with the same lines and run no case."""
    with pytest.raises(EvalSetError) as refused:
        EvalSet.from_file(path)
    assert refused.value.path == str(path)
    lines = [f"  at {where}: {what}" for where, what in refused.value.problems]
    validated = run_cli("validate", path)
    ran = run_cli("run", _agent(tmp_path), "--evalset", path, "--out", tmp_path / "out")
    converted = run_cli("convert", path, tmp_path / "converted.json")
    for result in (validated, ran, converted):
        assert result.exit_code == 2, result.output
        assert str(path) in result.stderr and "Traceback" not in result.output, result.output
        assert [line for line in result.stderr.splitlines() if line.startswith("  at ")] == lines, result.stderr
    assert not (tmp_path / "out").exists() and not (tmp_path / "converted.json").exists()
    return refused.value.problems


# ---- two cases of one id


def test_from_file_refuses_a_repeated_eval_id_naming_both_positions(tmp_path: Path) -> None:
    path = _write(tmp_path / "cases.json", {"eval_set_id": "s", "eval_cases": [_case("a"), _case("b"), _case("a")]})
    assert _refused_everywhere(tmp_path, path) == [("$.eval_cases[2].eval_id", DUPLICATE_A)]


def test_an_adk_eval_set_with_a_repeated_eval_id_is_refused_where_adk_wrote_it(tmp_path: Path) -> None:
    path = _write(tmp_path / "time.evalset.json", {"eval_set_id": "s", "eval_cases": [_adk_case("a")] * 2})
    assert _refused_everywhere(tmp_path, path) == [("$.eval_cases[1].eval_id", DUPLICATE_A)]


def test_an_older_adk_list_with_a_repeated_case_name_is_refused_at_the_name(tmp_path: Path) -> None:
    path = _write(tmp_path / "time.test.json", [_old_adk_case("x"), _old_adk_case("y"), _old_adk_case("x")])
    assert _refused_everywhere(tmp_path, path) == [
        ("$[2].name", "duplicate name 'x' (also used at $[0]); every case needs its own name")
    ]


def test_validate_still_lists_a_repeated_id_with_every_other_problem_of_the_file(tmp_path: Path) -> None:
    blank_turn = _case("a")
    blank_turn["conversation"][0]["user_content"]["content"] = " "
    path = _write(tmp_path / "cases.json", {"eval_cases": [_case("a"), blank_turn]})
    validated = run_cli("validate", path)
    assert validated.exit_code == 2
    assert validated.stderr.splitlines()[1:3] == [
        f"  at $.eval_cases[1].eval_id: {DUPLICATE_A}",
        "  at $.eval_cases[1].conversation[0].user_content: the user message is empty; give the turn a query",
    ]


def test_an_eval_set_built_in_code_with_a_repeated_id_is_refused_before_its_agent_runs(tmp_path: Path) -> None:
    asked: list[str] = []

    def agent(query: str) -> str:
        asked.append(query)
        return "It is noon."

    eval_set = EvalSet(eval_set_id="s", eval_cases=[EvalCase.single_turn("a", "q"), EvalCase.single_turn("a", "q")])
    app, collector = create_eval_app(agent)
    config = EvalConfig(criteria=CriteriaConfig(rouge_match=CriterionConfig.rouge_match(0.5)))
    with pytest.raises(EvalSetError) as refused:
        AgentEvaluator(app, collector, config=config).evaluate_sync(eval_set)
    assert refused.value.problems == [("$.eval_cases[1].eval_id", DUPLICATE_A)] and asked == []


def test_to_file_refuses_a_repeated_id_as_from_file_would_and_writes_nothing(tmp_path: Path) -> None:
    eval_set = EvalSet(eval_set_id="s", eval_cases=[EvalCase.single_turn(i, "q") for i in ("a", "b", "a")])
    saved = tmp_path / "saved.json"
    saved.write_text("the file before\n", encoding="utf-8")
    with pytest.raises(EvalSetError) as refused:
        eval_set.to_file(saved)
    assert refused.value.path == str(saved) and str(refused.value).startswith(
        f"eval set {saved} is invalid (1 problem)"
    )
    assert saved.read_text(encoding="utf-8") == "the file before\n"  # not replaced, not half-written
    assert sorted(p.name for p in tmp_path.iterdir()) == ["saved.json"]  # no temporary file left beside it
    with pytest.raises(EvalSetError):
        eval_set.save(tmp_path / "other.json")
    assert not (tmp_path / "other.json").exists()
    # the same set written out as it is: from_file, validate, run and convert refuse it with the same problem
    as_file = _write(tmp_path / "as_file.json", eval_set.model_dump(mode="json"))
    assert _refused_everywhere(tmp_path, as_file) == refused.value.problems
    assert refused.value.problems == [("$.eval_cases[2].eval_id", DUPLICATE_A)]


# ---- control characters in an id

CONTROL_IDS = [("nul", "a\x00b", "'\\x00'"), ("escape", "wipe\x1b[2J", "'\\x1b'"), ("newline", "two\nlines", "'\\n'"),
               ("delete", "del\x7f", "'\\x7f'"), ("c1", "csi\x9b2J", "'\\x9b'")]  # fmt: skip


@pytest.mark.parametrize(("eval_id", "char"), [c[1:] for c in CONTROL_IDS], ids=[c[0] for c in CONTROL_IDS])
def test_a_control_character_in_an_eval_id_is_refused_with_the_id_escaped(
    tmp_path: Path, eval_id: str, char: str
) -> None:
    path = _write(tmp_path / "cases.json", {"eval_set_id": "s", "eval_cases": [_case("ok"), _case(eval_id)]})
    ((where, what),) = _refused_everywhere(tmp_path, path)
    assert where == "$.eval_cases[1].eval_id"
    assert what.startswith(f"eval_id {eval_id!r} holds the control character {char} (at index ")
    assert eval_id not in what and "remove it" in what  # shown escaped, never raw


def test_a_control_character_in_an_adk_eval_id_is_refused_at_its_place_in_the_file(tmp_path: Path) -> None:
    path = _write(tmp_path / "time.evalset.json", {"eval_set_id": "s", "eval_cases": [_adk_case("a\x00b")]})
    ((where, what),) = _refused_everywhere(tmp_path, path)
    assert where == "$.eval_cases[0].eval_id" and what.startswith("eval_id 'a\\x00b' holds the control character")


def test_a_blank_adk_eval_id_is_a_file_error_not_a_pydantic_traceback(tmp_path: Path) -> None:
    path = _write(tmp_path / "time.evalset.json", {"eval_set_id": "s", "eval_cases": [_adk_case(" ")]})
    ((where, what),) = _refused_everywhere(tmp_path, path)
    assert where == "$.eval_cases[0].eval_id" and "eval_id is blank" in what


def test_a_case_built_in_code_with_a_control_character_in_its_id_is_refused() -> None:
    with pytest.raises(ValidationError, match=r"eval_id 'a\\x00b' holds the control character '\\x00' \(at index 1\)"):
        EvalCase.single_turn("a\x00b", "What time is it?")


def test_a_control_character_in_a_scenario_id_is_refused_as_in_an_eval_id(tmp_path: Path) -> None:
    bad = "wipe\x1b[2J"
    with pytest.raises(ValidationError) as as_eval_id:
        EvalCase.single_turn(bad, "What time is it?")
    ((_, eval_id_problem),) = validation_problems(as_eval_id.value)
    problem = eval_id_problem.replace("eval_id", "scenario_id", 1)
    assert problem.startswith("scenario_id 'wipe\\x1b[2J' holds the control character '\\x1b' (at index 4)")
    simulated = {"eval_id": "sim", "metadata": {"scenario": {"scenario_id": bad, "starting_prompt": "What time?"}}}
    path = _write(tmp_path / "sim.json", {"eval_set_id": "s", "eval_cases": [_case("ok"), simulated]})

    validated = run_cli("validate", path)
    ran = run_cli("run", _agent(tmp_path), "--evalset", path, "--out", tmp_path / "out")

    for result in (validated, ran):
        assert result.exit_code == 2 and str(path) in result.stderr and "Traceback" not in result.output
        assert [line for line in result.stderr.splitlines() if line.startswith("  at ")] == [
            f"  at $.eval_cases[1].metadata.scenario.scenario_id: {problem}"
        ]
        assert bad not in result.output  # shown escaped, never raw
    assert not (tmp_path / "out").exists()
    with pytest.raises(ValidationError) as in_code:  # built in code: refused at once, as an EvalCase's id is
        ConversationScenario(scenario_id=bad, starting_prompt="What time?")
    assert validation_problems(in_code.value) == [("$.scenario_id", problem)]


def test_ids_without_control_characters_stay_valid(tmp_path: Path) -> None:
    # ADK's eval ids are any string (its web UI writes hex; its files take what users type); seen in the wild:
    # spaces, punctuation, non-Latin text, emoji; a right-to-left override is not a control character (the reports
    # show it escaped)
    ids = ["weather-paris-001", "a::b 漢字", "Frage über Öl?", "case_0 (retry)", "😀 smile", "rtl\u202etxt", "x" * 300]
    path = _write(tmp_path / "cases.json", {"eval_set_id": "s", "eval_cases": [_case(i) for i in ids]})
    assert [case.eval_id for case in EvalSet.from_file(path)] == ids
    assert run_cli("validate", path).exit_code == 0


# ---- convert: a call of any arguments (written without args, or with args {})


# tracegrade reads both as "any arguments"; ADK the first as a call made without arguments, the second with none
ANY_ARGUMENTS = [
    ({"name": "now"}, "written without args", "(it would match only a call made without arguments)"),
    (
        {"name": "now", "args": {}},
        "written with args {}",
        "(it reads {} as no arguments: it would match only a call made with none)",
    ),
]


@pytest.mark.parametrize(("call", "written", "adk_reads"), ANY_ARGUMENTS, ids=["without_args", "args_empty"])
def test_convert_to_adk_names_a_call_of_any_arguments_as_a_loss(
    tmp_path: Path, call: dict[str, Any], written: str, adk_reads: str
) -> None:
    tools = [{"name": "clock", "args": {"zone": "UTC"}}, call]
    source = _write(tmp_path / "cases.json", {"eval_set_id": "s", "eval_cases": [_case("ok"), _case("t", tools)]})
    dest = tmp_path / "time.evalset.json"
    where = "$.eval_cases[1].conversation[0].expected_tool_trajectory[1]"

    refused = run_cli("convert", source, dest, "--to", "adk")

    assert refused.exit_code == 2 and not dest.exists()
    assert f"without losing 1 thing it has no place for:\n  at {where}: case 't', turn 1: call 'now' is {written}, " \
        f"which tracegrade reads as any arguments; ADK has no such call {adk_reads}: give the call the args it " \
        "expects, or let ADK ignore every call's arguments" in refused.stderr  # fmt: skip
    with pytest.raises(EvalSetError) as in_python:
        eval_set_to_adk(EvalSet.from_file(source), source=str(source))
    assert [at for at, _ in in_python.value.problems] == [where]
    lossy = run_cli("convert", source, dest, "--to", "adk", "--lossy")
    assert lossy.exit_code == 0 and f"at {where}: case 't', turn 1: call 'now' is {written}" in lossy.stderr
    uses = json.loads(dest.read_text(encoding="utf-8"))["eval_cases"][1]["conversation"][0]["intermediate_data"]
    assert uses["tool_uses"] == tools  # written as it is: ADK reads it as it reads such a call of its own


def test_calls_without_args_read_from_adk_go_back_to_adk_without_a_loss(tmp_path: Path) -> None:
    # they are ADK's calls made without arguments (or with none, args {}): written back as they were, whatever the
    # case holds besides (and a case whose only such call was given args since has nothing left to say about them)
    adk = [_adk_case("c"), _adk_case("d"), _adk_case("e")]
    adk[0]["conversation"][0]["intermediate_data"] = {"tool_uses": [{"name": "now"}, {"name": "clock", "args": {}}]}
    adk[1]["conversation"][0]["intermediate_data"] = {"tool_uses": [{"name": "now"}]}
    adk[2]["conversation"][0]["intermediate_data"] = {"tool_uses": [{"name": "clock", "args": {}}]}
    source = _write(tmp_path / "time.evalset.json", {"eval_set_id": "s", "eval_cases": adk})
    ours, back = tmp_path / "ours.json", tmp_path / "back.evalset.json"
    assert run_cli("convert", source, ours).exit_code == 0
    written = json.loads(ours.read_text(encoding="utf-8"))
    marks = [case["metadata"].get("adk") for case in written["eval_cases"]]
    assert marks == [
        {"calls_without_args": True, "calls_with_empty_args": True},
        {"calls_without_args": True},
        {"calls_with_empty_args": True},
    ]
    written["eval_cases"][0]["tags"] = ["edited"]
    written["eval_cases"][1]["conversation"][0]["expected_tool_trajectory"][0]["args"] = {"zone": "UTC"}
    _write(ours, written)
    converted = run_cli("convert", ours, back)
    assert converted.exit_code == 0 and converted.stderr == "", converted.output
    cases = json.loads(back.read_text(encoding="utf-8"))["eval_cases"]
    uses = [case["conversation"][0]["intermediate_data"]["tool_uses"] for case in cases]
    assert uses == [
        [{"name": "now"}, {"name": "clock", "args": {}}],
        [{"name": "now", "args": {"zone": "UTC"}}],
        [{"name": "clock", "args": {}}],
    ]
    assert (
        cases[0]["tracegrade"] == {"tags": ["edited"]} and "tracegrade" not in cases[1] and "tracegrade" not in cases[2]
    )
