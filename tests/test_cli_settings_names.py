"""Every command's option named like a receiver setting (``--store``, ``--token``, ``--host`` …) reads the
environment variable `serve` reads for it and has the setting's default: the CLI never restates them."""

from __future__ import annotations

import click
import pytest

from tracegrade.cli.main import cli
from tracegrade.ingest.settings import ENV_VARS, ServeSettings

FIELDS = ServeSettings.model_fields


def _setting_options() -> list[tuple[str, str, click.Option]]:
    """``(command, setting, option)`` for each option of each command whose flag names a setting."""
    found = []
    for name in cli.list_commands(None):  # type: ignore[arg-type]
        command = cli.get_command(None, name)  # type: ignore[arg-type]
        assert command is not None
        for param in command.params:
            if not isinstance(param, click.Option):
                continue
            setting = param.opts[0].removeprefix("--").replace("-", "_")
            if setting in FIELDS:
                found.append((name, setting, param))
    return found


OPTIONS = _setting_options()


def test_the_shared_options_are_found() -> None:
    names = {(command, setting) for command, setting, _ in OPTIONS}
    expected = {("serve", "store"), ("traces", "store"), ("traces", "token"), ("ui", "host"), ("maintain", "store")}
    assert expected <= names


@pytest.mark.parametrize(("command", "setting", "option"), OPTIONS, ids=[f"{c}--{s}" for c, s, _ in OPTIONS])
def test_an_option_named_like_a_setting_has_its_variable_and_default(
    command: str, setting: str, option: click.Option
) -> None:
    assert option.envvar in (None, ENV_VARS[setting])
    default = FIELDS[setting].default
    if command != "serve" and default is not None and not FIELDS[setting].is_required():
        assert option.default == default
