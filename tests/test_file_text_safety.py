"""What every file tracegrade reads is refused for before it can hang or exhaust memory: YAML aliases that make a
value contain itself or expand it beyond ``MAX_YAML_VALUES`` values, a FIFO or device, a file larger than the limit
of its kind. Ordinary anchors and aliases keep working."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from tracegrade.errors import FileFormatError
from tracegrade.models import file_text
from tracegrade.models.file_text import read_json_file


def _billion_laughs() -> str:
    """Nine levels of nine aliases: about 10**9 values once expanded, a few hundred bytes of text."""
    lines = ["l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, 9)]
    return "\n".join(lines) + "\n"


def _limit_memory() -> None:  # without the checks, /dev/zero or the bomb would take all the machine's memory
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


def test_validate_refuses_recursive_aliases_alias_bombs_pipes_and_devices_at_once(tmp_path: Path) -> None:
    files = {"list.yaml": "a: &a [*a]\n", "tokens.yaml": "tenants: &t\n  acme: [*t]\n", "bomb.yaml": _billion_laughs()}
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    os.mkfifo(tmp_path / "fifo.json")
    paths = [str(tmp_path / name) for name in (*files, "fifo.json")] + ["/dev/zero"]
    validate = "from tracegrade.cli.main import cli; cli()"
    done = subprocess.run(  # a child process: without the checks each of these hangs or grows without end
        [sys.executable, "-c", validate, "validate", *paths],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=_limit_memory,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    said = done.stderr.splitlines()
    recursive = "a recursive alias: this alias refers to the anchor at line 1, column {}, whose value holds this alias"
    assert f"  at $.a[0]: {recursive.format(4)}" in said[1]
    assert f"  at $.tenants.acme[0]: {recursive.format(10)}" in said[3]
    assert said[5] == (
        "  at $: its aliases expand it to 490,329,064 values, more than the 1,000,000 tracegrade reads (each alias "
        "repeats its anchor's whole value); write the values out instead of repeating them through nested aliases"
    )
    assert said[7].startswith("  at $: a FIFO (named pipe), not a regular file: ")
    assert said[9].startswith("  at $: a character device, not a regular file: ")
    assert said[10] == "5 of 5 files invalid"


def test_ordinary_anchors_aliases_and_merges_still_load(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(
        "base: &base {threshold: 0.5, check_args: true}\n"
        "criteria:\n  trajectory: *base\n  tool_name_match: {<<: *base, threshold: 0.8}\n  same: [*base, *base]\n",
        encoding="utf-8",
    )
    base = {"threshold": 0.5, "check_args": True}
    assert read_json_file(path, "config") == {
        "base": base,
        "criteria": {"trajectory": base, "tool_name_match": {**base, "threshold": 0.8}, "same": [base, base]},
    }


def test_aliases_may_expand_a_document_up_to_the_limit_and_no_further(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("a: &a [1, 2, 3]\nb: [*a, *a]\n", encoding="utf-8")  # 1 + (1 + 4) + 1 + (1 + 4 + 4) = 16
    monkeypatch.setattr(file_text, "MAX_YAML_VALUES", 16)
    assert read_json_file(path, "config") == {"a": [1, 2, 3], "b": [[1, 2, 3], [1, 2, 3]]}
    monkeypatch.setattr(file_text, "MAX_YAML_VALUES", 15)
    with pytest.raises(FileFormatError) as refused:
        read_json_file(path, "config")
    assert refused.value.problems == [
        (
            "$",
            "its aliases expand it to 16 values, more than the 15 tracegrade reads (each alias repeats its anchor's "
            "whole value); write the values out instead of repeating them through nested aliases",
        )
    ]


def test_a_file_larger_than_its_kinds_limit_is_refused_before_it_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "r.json"
    path.write_text('{"results": []}' + " " * (3 * 1024 * 1024), encoding="utf-8")
    monkeypatch.setattr(file_text, "MAX_FILE_BYTES", 2 * 1024 * 1024)
    monkeypatch.setattr(file_text, "MAX_REPORT_BYTES", 4 * 1024 * 1024)
    with pytest.raises(FileFormatError) as refused:
        read_json_file(path, "eval set")
    assert refused.value.problems == [
        (
            "$",
            "the file is 3.0 MiB, larger than the 2 MiB tracegrade reads; check that this is the file meant, or "
            "split it into smaller files",
        )
    ]
    assert read_json_file(path, "report", strict=False) == {"results": []}  # reports may be larger


def test_a_directory_is_named_as_one(tmp_path: Path) -> None:
    with pytest.raises(FileFormatError) as refused:
        read_json_file(tmp_path, "config")
    assert refused.value.problems[0][1].startswith("a directory, not a regular file: ")
