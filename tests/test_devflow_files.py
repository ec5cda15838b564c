"""Broken eval files as a developer meets them (a truncated ADK ``.evalset.json``, a ``.test.json`` saved as UTF-16
by a Windows editor or as Latin-1, a file holding ``null``): ``tracegrade validate`` and the loaders say what is
wrong and where, in JSON's words, with how to fix it."""

from __future__ import annotations

import codecs
import json
from pathlib import Path

import pytest

from tests.support.grading_cli import run_cli
from tracegrade.errors import EvalSetError, FileFormatError
from tracegrade.models import EvalSet

pytest_plugins = ["pytester"]

DATA = Path(__file__).parent / "data" / "adk"
DICE = DATA / "dice.test.json"


def _validate(path: Path) -> str:
    result = run_cli("validate", path)
    assert result.exit_code == 2, result.output
    return result.output


def test_a_truncated_file_names_the_line_and_column_where_the_string_starts(tmp_path: Path) -> None:
    text = (DATA / "demo.evalset.json").read_text(encoding="utf-8")
    cut = text.index('"What is the weather in Bergen?"') + 10  # inside the string
    broken = tmp_path / "cut.evalset.json"
    broken.write_text(text[:cut], encoding="utf-8")
    line = text.count("\n", 0, cut) + 1
    column = cut - text.rfind("\n", 0, cut) - 10
    out = _validate(broken)
    assert f"at $: invalid JSON: Unterminated string starting at line {line}, column {column}" in out, out
    assert "at at" not in out


@pytest.mark.parametrize(
    ("content", "name"),
    [("null", "null"), ('"hello"', "a string"), ("42", "a number"), ("true", "a boolean")],
)
def test_a_file_that_is_not_an_object_says_what_it_holds_in_json_words(tmp_path: Path, content: str, name: str) -> None:
    path = tmp_path / "odd.evalset.json"
    path.write_text(content, encoding="utf-8")
    assert f"at $: expected a JSON object, got {name}\n" in _validate(path)
    with pytest.raises(EvalSetError) as caught:
        EvalSet.from_file(path)
    assert caught.value.problems == [("$", f"expected a JSON object, got {name}")]


def test_a_utf16_file_is_named_as_such(tmp_path: Path) -> None:
    path = tmp_path / "dice.test.json"
    path.write_bytes(codecs.BOM_UTF16_LE + DICE.read_text(encoding="utf-8").encode("utf-16-le"))
    out = _validate(path)
    assert "UTF-16 text (it starts with a UTF-16 byte-order mark), not UTF-8: save the file as UTF-8" in out, out


def test_a_latin1_byte_is_located_by_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "cafe.test.json"
    path.write_bytes(b'[\n  {"query": "caf\xe9 au lait?", "reference": "yes"}\n]')
    with pytest.raises(FileFormatError) as caught:
        EvalSet.from_file(path)
    [(where, what)] = caught.value.problems
    assert where == "$"
    assert what == (
        "not UTF-8 text (invalid continuation byte at byte 18) at line 2, column 17; save the file as UTF-8"
    )


def test_a_bom_and_crlf_file_written_on_windows_still_loads(tmp_path: Path) -> None:
    path = tmp_path / "dice.test.json"
    text = json.dumps(json.loads(DICE.read_text(encoding="utf-8")), indent=2).replace("\n", "\r\n")
    path.write_bytes(codecs.BOM_UTF8 + text.encode("utf-8"))
    assert [c.eval_id for c in EvalSet.from_file(path)] == [c.eval_id for c in EvalSet.from_file(DICE)]
    assert run_cli("validate", path).exit_code == 0


def test_pytest_names_the_broken_eval_file_without_a_traceback_through_tracegrade(pytester: pytest.Pytester) -> None:
    data = json.loads((DATA / "demo.evalset.json").read_text(encoding="utf-8"))
    data["eval_cases"][0]["conversation"][0]["user_content"]["parts"][0]["txt"] = "typo"
    pytester.path.joinpath("cases.evalset.json").write_text(json.dumps(data), encoding="utf-8")
    pytester.makepyfile(
        test_cases="""
from tracegrade import parametrize_eval_cases

@parametrize_eval_cases("cases.evalset.json")
def test_case(eval_case):
    pass
"""
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            "*ERROR collecting test_cases.py*",
            "eval set */cases.evalset.json is invalid (1 problem):",
            "  at $.eval_cases[[]0[]].conversation[[]0[]].user_content.parts[[]0[]].txt: unknown key 'txt' *",
        ]
    )
    assert "adk_files.py" not in result.stdout.str() and "During handling" not in result.stdout.str()


def test_a_stray_item_in_an_adk_test_json_list_is_reported_where_it_is(tmp_path: Path) -> None:
    turns = json.loads(DICE.read_text(encoding="utf-8"))
    path = tmp_path / "dice.test.json"
    path.write_text(json.dumps([turns[0], "oops", turns[1], 7]), encoding="utf-8")
    out = _validate(path)
    assert "at $[1]: must be an object (got 'oops')" in out and "at $[3]: must be an object (got 7)" in out, out
    assert "expected a JSON object" not in out
    with pytest.raises(EvalSetError) as caught:
        EvalSet.from_file(path)
    assert [where for where, _ in caught.value.problems] == ["$[1]", "$[3]"]
