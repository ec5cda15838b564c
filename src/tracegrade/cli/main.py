"""The ``tracegrade`` command: a click group whose subcommands load lazily from one module each."""

from __future__ import annotations

import importlib
import os
import sys

import click

__all__ = ["cli", "main"]

# command name -> ("module:attribute", one-line summary). `tracegrade --help` lists the summaries from here,
# so it imports no command module (they pull in duckdb, pyarrow, pydantic…); each module holds one command.
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("tracegrade.cli.run_cmd:command", "Run an agent through an eval set (a live run) and grade it."),
    "validate": ("tracegrade.cli.validate:command", "Check eval-set and config files and explain every problem."),
    "schema": ("tracegrade.cli.schema:command", "Print the JSON Schema of an eval set, config or report."),
    "report": ("tracegrade.cli.report:command", "Re-render a saved report as console, html, junit or json."),
    "serve": ("tracegrade.cli.serve:command", "Receive OTLP traces and logs (gRPC and HTTP) into a store."),
    "sql": ("tracegrade.cli.sql:command", "Run one read-only SQL query over the store."),
    "traces": ("tracegrade.cli.traces:command", "List recent traces, newest first."),
    "show": ("tracegrade.cli.show:command", "Show one trace's trajectory as a tree."),
    "import": ("tracegrade.cli.import_cmd:command", "Import OTLP files (JSON, JSON lines, protobuf) into the store."),
    "export": ("tracegrade.cli.export:command", "Export store tables as parquet, or spans and logs as OTLP."),
    "grade": ("tracegrade.cli.grade:command", "Grade stored traces with the criteria of a config."),
    "runs": ("tracegrade.cli.runs:command", "List recorded grading runs, newest first."),
    "diff": ("tracegrade.cli.diff:command", "Compare two recorded runs: regressions, improvements, changes."),
    "gate": ("tracegrade.cli.gate:command", "CI gate: fail only on a significant regression vs a baseline."),
    "calibrate": ("tracegrade.cli.calibrate:command", "Measure LLM judges' agreement with human labels."),
    "export-cases": ("tracegrade.cli.export_cases:command", "Write one eval case per selected trace."),
    "worker": ("tracegrade.cli.worker:command", "Keep grading settled traces through durable jobs."),
    "forget": ("tracegrade.cli.forget:command", "Delete traces on request, for good (spans arriving later too)."),
    "maintain": ("tracegrade.cli.maintain:command", "Compact a lake store: merge files, expire snapshots."),
    "build": ("tracegrade.cli.build:command", "Build a lake's trajectories from its catalog's build queue."),
    "rebuild": ("tracegrade.cli.rebuild:command", "Map stored traces again: those an older mapper built, or all."),
    "convert": ("tracegrade.cli.convert:command", "Write an eval set or config as ADK's files or tracegrade's."),
    "init": ("tracegrade.cli.init_cmd:command", "Scaffold an evaluation project whose pytest passes at once."),
    "ui": ("tracegrade.cli.ui_cmd:command", "Browse a store in a read-only web UI."),
    "mcp": ("tracegrade.mcp_server:command", "Serve read-only store tools to coding agents over MCP."),
}


class LazyGroup(click.Group):
    """A group that imports a subcommand's module only when that subcommand runs (fast start-up)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        module, attr = COMMANDS[cmd_name][0].split(":")
        return getattr(importlib.import_module(module), attr)

    def invoke(self, ctx: click.Context) -> object:
        """Run the command; Ctrl-C ends it with one line and exit code 130 (128 + SIGINT, as shells report
        it), not click's "Aborted!" and exit code 1, which reads as "a case failed" to a CI script."""
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt as exc:
            click.echo(f"\n{exc}" if str(exc) else "\ninterrupted", err=True)
            raise click.exceptions.Exit(130) from None

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list from the summaries above: click's default would import every command."""
        rows = [(name, COMMANDS[name][1]) for name in self.list_commands(ctx)]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="tracegrade")
def cli() -> None:
    """tracegrade: OpenTelemetry-native evaluation of LLM agents."""
    # Here, before any command runs, so that every command refuses a misspelt TRACEGRADE_* variable rather
    # than silently falling back to the default it was meant to override (./tracegrade.duckdb for the store).
    from tracegrade.cli.common import UsageProblem
    from tracegrade.env_vars import misspelled_env_vars

    typos = misspelled_env_vars(os.environ)
    if typos:
        raise UsageProblem("; ".join(typos))


def main() -> None:
    from tracegrade.standard_output import flush_stdout, guard_stdout

    guard_stdout()  # output redirected to a full disk fails the command instead of arriving cut
    try:
        cli(standalone_mode=True)
    except KeyboardInterrupt:
        sys.exit(130)
    finally:
        flush_stdout()


if __name__ == "__main__":
    main()
