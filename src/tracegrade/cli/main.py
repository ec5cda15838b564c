"""The ``tracegrade`` command: a click group whose subcommands load lazily from one module each."""

from __future__ import annotations

import importlib
import importlib.util
import sys

import click

__all__ = ["cli", "main"]

# command name -> "module:attribute"; each module holds one command (see cli/<name>.py).
COMMANDS: dict[str, str] = {
    "run-example": "tracegrade.cli.run_example:command",
    "validate": "tracegrade.cli.validate:command",
    "schema": "tracegrade.cli.schema:command",
    "report": "tracegrade.cli.report:command",
    "serve": "tracegrade.cli.serve:command",
    "sql": "tracegrade.cli.sql:command",
    "traces": "tracegrade.cli.traces:command",
    "show": "tracegrade.cli.show:command",
    "import": "tracegrade.cli.import_cmd:command",
    "export": "tracegrade.cli.export:command",
    "grade": "tracegrade.cli.grade:command",
    "runs": "tracegrade.cli.runs:command",
    "diff": "tracegrade.cli.diff:command",
    "export-cases": "tracegrade.cli.export_cases:command",
    "worker": "tracegrade.cli.worker:command",
}


class LazyGroup(click.Group):
    """A group that imports a subcommand's module only when that subcommand runs (fast start-up)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(n for n in COMMANDS if self._available(n))

    @staticmethod
    def _available(name: str) -> bool:
        module = COMMANDS[name].split(":")[0]
        return importlib.util.find_spec(module) is not None

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None or not self._available(cmd_name):
            return None
        module, attr = target.split(":")
        return getattr(importlib.import_module(module), attr)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="tracegrade")
def cli() -> None:
    """tracegrade: OpenTelemetry-native evaluation of LLM agents."""


def main() -> None:
    try:
        cli(standalone_mode=True)
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
