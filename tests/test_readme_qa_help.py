"""``tracegrade <command> --help`` checked against what a new user needs from it: an option that has a default
says what it is, so that files do not appear in a directory no help text named (``grade`` writing its reports
into ``eval_reports/``, ``gate`` its summary into ``tracegrade-gate/``)."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from tracegrade.cli.main import cli

#: what click gives an option declared without a default: a sentinel in recent versions, None in older ones
NO_DEFAULT = getattr(click.core, "UNSET", None)


def _options() -> list[tuple[str, click.Option]]:
    context = click.Context(cli)
    found = []
    for name in cli.list_commands(context):
        command = cli.get_command(context, name)
        assert command is not None
        found += [(name, p) for p in command.params if isinstance(p, click.Option)]
    return found


def test_every_option_default_is_shown_in_its_help() -> None:
    hidden = [
        f"{name} {option.opts[-1]} (default {option.default!r})"
        for name, option in _options()
        if option.default is not None
        and option.default is not NO_DEFAULT
        and not option.is_flag
        and not option.required
        and not option.show_default
        and "default" not in (option.help or "")
    ]
    assert hidden == []


@pytest.mark.parametrize(
    ("command", "says"), [("grade", "eval_reports"), ("gate", "tracegrade-gate")], ids=["grade", "gate"]
)
def test_the_report_directory_is_named_in_help(command: str, says: str) -> None:
    shown = CliRunner().invoke(cli, [command, "--help"], terminal_width=200)
    assert shown.exit_code == 0
    (line,) = [s for s in shown.output.splitlines() if s.strip().startswith("--out")]
    assert says in line and "written" in line
