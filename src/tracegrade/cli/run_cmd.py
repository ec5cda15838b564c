"""``tracegrade run``: a live run from the command line — drive an agent through an eval set, grade each case
and write the reports (``AgentEvaluator``). Ctrl-C stops it cleanly: the cases that finished are reported,
marked incomplete, with one line saying so and exit code 130."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from tracegrade.cli.common import UsageProblem, friendly_errors, no_config_default
from tracegrade.errors import RunInterrupted

__all__ = ["command"]

EXIT_INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for a command stopped by Ctrl-C


@click.command("run")
@click.argument("agent")
@click.option(
    "--evalset", "evalset_path", required=True, type=click.Path(dir_okay=False, path_type=Path), help="Eval set to run."
)
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="EvalConfig file (default: trajectory and rouge_match, no LLM judge).",
)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Report directory (default: the config's reporter.output_dir).",
)
@click.option("-v", "--verbose", is_flag=True, help="Print each case as it finishes.")
@friendly_errors
def command(agent: str, evalset_path: Path, config_path: Path | None, out_dir: Path | None, verbose: bool) -> None:
    """Run AGENT (a module or .py file defining graph, compiled_graph, agent_graph, app or agent) through
    --evalset and write the reports the config's reporter asks for.

    Exit code 0 when every case passes, 1 when one fails, 2 for bad input, 130 when stopped by Ctrl-C (the
    finished cases are then reported, marked incomplete).
    """
    from tracegrade.evaluation.agent_loading import load_agent
    from tracegrade.evaluation.checks import checked_config, checked_eval_set
    from tracegrade.evaluation.evaluator import AgentEvaluator, create_eval_app

    # every input checked before the agent is loaded (importing it may be slow or have effects)
    eval_set = checked_eval_set(evalset_path)
    config = checked_config(config_path) if config_path else no_config_default()
    try:
        app, collector = create_eval_app(load_agent(agent))
    except (ImportError, AttributeError, OSError) as exc:
        raise UsageProblem(f"cannot load the agent {agent!r}: {exc}") from None
    try:
        report = AgentEvaluator(app, collector, config).evaluate_sync(eval_set, verbose=verbose, output_dir=out_dir)
    except RunInterrupted as exc:
        click.echo(str(exc), err=True)
        sys.exit(EXIT_INTERRUPTED)
    sys.exit(0 if report.passed else 1)
