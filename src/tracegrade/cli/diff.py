"""``tracegrade diff RUN_A RUN_B``: per case and criterion, what regressed, what improved, what changed, and apart
the cases a criterion errored on (no verdict: neither regressed nor improved, and ``--fail-on-regression`` does not
fail on them); per criterion the paired statistics (mean delta with its bootstrap interval, exact McNemar) and the
flipped cases with the call where their trajectories part (see :mod:`tracegrade.evaluation.compare`)."""

from __future__ import annotations

import sys
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from tracegrade.cli.common import friendly_errors
from tracegrade.cli.run_refs import load_runs
from tracegrade.cli.store_access import store_options, terminal_text
from tracegrade.cycle_pause import no_cycle_collection
from tracegrade.evaluation.compare import RunComparison, compare_runs
from tracegrade.evaluation.run_diff import KINDS, RunDiff, diff_reports
from tracegrade.json_output import json_text

__all__ = ["command"]

_STYLE = {"regressed": "bold red", "improved": "green", "changed": "yellow", "added": "cyan", "removed": "magenta"}
_NO_VERDICT = "an error (a judge that failed, a missing schema...) is no verdict on the agent"


@click.command("diff")
@store_options
@click.argument("run_a")
@click.argument("run_b")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.option("--all", "show_all", is_flag=True, help="Also list unchanged cases.")
@click.option(
    "--fail-on-regression",
    is_flag=True,
    help="Exit with code 1 when any case regressed (not for a case a criterion errored on: that is no verdict).",
)
@click.option("--alpha", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=0.05, show_default=True)
@friendly_errors
def command(
    store_path: Path,
    token: str | None,
    run_a: str,
    run_b: str,
    fmt: str,
    show_all: bool,
    fail_on_regression: bool,
    alpha: float,
) -> None:
    """Compare two runs: recorded ids or unique prefixes (see `tracegrade runs`), latest, latest~N, or report
    JSON files."""
    (name_a, report_a), (name_b, report_b) = load_runs([run_a, run_b], store_path, token)
    # what the comparison builds holds no cycle: beside two runs' outcomes (millions of objects), the full collections
    # its allocations set off, each walking them all, were most of diff_reports' time (bench/RESULTS.md)
    with no_cycle_collection():
        diff = diff_reports(report_a, report_b, name_a, name_b)
        stats = compare_runs(report_a, report_b, alpha=alpha, baseline_name=name_a, candidate_name=name_b)
        text = json_text({**diff.to_dict(), "statistics": stats.to_dict()}) if fmt == "json" else ""
    if fmt == "json":
        click.echo(text)
    else:
        _print(diff, show_all)
        _print_errored(diff)
        _print_statistics(stats)
    if fail_on_regression and diff.count("errored"):  # said on stderr: stdout may be the JSON
        click.echo(
            f"--fail-on-regression: {diff.count('errored')} case(s) a criterion errored on are not counted as "
            f"regressions: {_NO_VERDICT}; fix the cause and grade them again",
            err=True,
        )
    if fail_on_regression and diff.count("regressed"):
        sys.exit(1)


def _plain(text: str, style: str = "") -> Text:
    """Text as stored, never read as markup: case names, run ids, tool names and arguments come from eval sets and
    traces, and ``[/]`` in one made rich raise instead of printing the diff."""
    return Text(terminal_text(text), style=style)


def _print(diff: RunDiff, show_all: bool) -> None:
    console = Console()
    counts = {k: diff.count(k) for k in KINDS}
    console.print(
        Text.assemble(
            _plain(diff.run_a, "bold"),
            " -> ",
            _plain(diff.run_b, "bold"),
            ": " + ", ".join(f"{v} {k}" for k, v in counts.items()),
        )
    )
    table = Table("case", "change", "status", "criteria", "trajectory", show_lines=True)
    for case in diff.cases:
        if case.kind == "errored" or (case.kind == "unchanged" and not show_all):  # errored ones: listed apart
            continue
        crit = "\n".join(
            f"{c.criterion}: {_fmt(c.score_a, c.skipped_a)} -> {_fmt(c.score_b, c.skipped_b)} ({c.kind})"
            for c in case.criteria
            if c.kind != "unchanged"
        )
        style = _STYLE.get(case.kind, "")
        table.add_row(
            _plain(case.name or case.eval_id),
            _plain(case.kind, style),
            f"{case.status_a or '(added)'} -> {case.status_b or '(removed)'}",
            _plain(crit),
            _plain("\n".join(case.trajectory_changes)),
        )
    console.print(table)


def _print_errored(diff: RunDiff) -> None:
    """The cases a criterion errored on, each error with the run it happened in: they have no verdict to diff."""
    errored = [case for case in diff.cases if case.kind == "errored"]
    if not errored:
        return
    console = Console()
    console.print(
        f"errored: {len(errored)} case(s) not compared, a criterion errored on them; {_NO_VERDICT}, so they count "
        "as neither regressed nor improved (fix the cause and grade them again)",
        style="yellow",
    )
    for case in errored:
        for change in case.criteria:
            for run, error in ((diff.run_a, change.error_a), (diff.run_b, change.error_b)):
                if error is not None:
                    line = f"  {case.name or case.eval_id}: {change.criterion} errored in {run}: {error}"
                    console.print(_plain(line))


def _print_statistics(stats: RunComparison) -> None:
    """Per metric the paired statistics, then every flipped case and where its trajectory parted."""
    console = Console()
    table = Table(
        "metric",
        "paired",
        "pass rate",
        "pass->fail / fail->pass",
        "McNemar p (adj.)",
        "mean delta",
        f"{1 - stats.alpha:.0%} interval",
        title="Paired statistics",
    )
    for m in stats.metrics:
        style = "bold red" if m.significant_regression else ""
        table.add_row(
            _plain(m.name, style),
            str(m.pairs),
            f"{m.pass_rate_baseline:.0%} -> {m.pass_rate_candidate:.0%}",
            f"{m.pass_to_fail} / {m.fail_to_pass}",
            f"{m.mcnemar_p_adjusted:.3g}",
            f"{m.delta:+.3f}",
            Text(f"[{m.low:+.3f}, {m.high:+.3f}]"),
        )
    console.print(table)
    for flip in stats.flips:
        style = "red" if flip.direction == "pass->fail" else "green"
        criteria = f" ({', '.join(flip.criteria)})" if flip.criteria else ""
        where = flip.divergence or "same trajectory"
        console.print(
            Text.assemble((flip.direction, style), " ", _plain(f"{flip.name or flip.eval_id}{criteria}: {where}"))
        )
    verdict_style = {"pass": "green", "fail": "bold red", "inconclusive": "yellow"}[stats.verdict]
    console.print(f"verdict at alpha {stats.alpha:g}: [{verdict_style}]{stats.verdict}[/]")
    for reason in stats.reasons:
        console.print(_plain(f"  {reason}"))


def _fmt(score: float | None, skipped: bool = False) -> str:
    """A criterion's score in one run: ``-`` when it was not there, ``skipped`` when it did not apply."""
    return "-" if score is None else "skipped" if skipped else f"{score:.2f}"
