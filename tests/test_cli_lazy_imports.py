"""`tracegrade --help` and the file-only commands start without importing the heavy libraries."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tracegrade.cli.main import COMMANDS, cli

HEAVY = ("duckdb", "pyarrow", "litellm", "grpc", "aiohttp", "opentelemetry.sdk")

_PROBE = """
import contextlib, io, json, sys
import tracegrade.cli.main as main
heavy = json.loads(sys.argv[1])
with contextlib.redirect_stdout(io.StringIO()) as out:
    try:
        main.cli(sys.argv[2:], standalone_mode=False)
    except SystemExit:
        pass
print(json.dumps({"out": out.getvalue(), "heavy": [m for m in heavy if m in sys.modules]}))
"""


def _probe(*args: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(HEAVY), *args], capture_output=True, text=True, timeout=60, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_group_help_lists_every_command_without_heavy_imports() -> None:
    seen = _probe("--help")
    assert seen["heavy"] == []
    for name in cli.list_commands(None):  # type: ignore[arg-type]
        assert f"  {name} " in seen["out"]
        assert COMMANDS[name][1] in seen["out"]


@pytest.mark.parametrize("command", ["validate", "schema", "report"])
def test_file_commands_help_without_heavy_imports(command: str) -> None:
    assert _probe(command, "--help")["heavy"] == []


def test_every_listed_command_loads() -> None:
    for name in cli.list_commands(None):  # type: ignore[arg-type]
        assert cli.get_command(None, name).name == name  # type: ignore[arg-type,union-attr]
