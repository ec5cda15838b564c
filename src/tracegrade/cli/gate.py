"""``tracegrade gate --baseline RUN --candidate RUN``: a CI gate that fails only on a regression it can defend.

Exit codes: 0 when the candidate did not regress (also when the evidence is inconclusive: the summary
says so and why), 1 on a significant regression, a drop larger than ``--max-drop`` or (``--strict``) any
case that went from pass to fail, 2 for bad input, two runs that share no case among it (a baseline of another
eval set would otherwise pass every change) or whose shared cases all have a criterion that errored (a judge that
was down). A Markdown summary (for a pull-request comment; also appended to ``$GITHUB_STEP_SUMMARY`` when set) and
a JUnit file are written into ``--out``.
"""

from __future__ import annotations

import os
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import click

from tracegrade.cli.common import UsageProblem, friendly_errors
from tracegrade.cli.run_refs import load_runs
from tracegrade.cli.store_access import store_options
from tracegrade.evaluation.compare import CASES, RunComparison, compare_runs, empty_runs
from tracegrade.json_output import json_text
from tracegrade.output_files import write_text_file
from tracegrade.reporters.text import clean_text

__all__ = ["command", "junit_xml"]


@click.command("gate")
@store_options
@click.option("--baseline", required=True, help="Run id or prefix, latest, latest~N, or a report JSON file.")
@click.option("--candidate", required=True, help="Run id or prefix, latest, latest~N, or a report JSON file.")
@click.option("--alpha", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=0.05, show_default=True)
@click.option(
    "--max-drop",
    type=click.FloatRange(0, 1),
    help="Also fail on an observed drop of the case pass rate or a criterion's mean score larger than this.",
)
@click.option("--strict", is_flag=True, help="Fail on any case that went from pass to fail.")
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("tracegrade-gate"),
    show_default=True,
    help="Directory summary.md and junit.xml are written into.",
)
@click.option("--format", "fmt", type=click.Choice(["markdown", "json"]), default="markdown", show_default=True)
@friendly_errors
def command(
    store_path: Path,
    token: str | None,
    baseline: str,
    candidate: str,
    alpha: float,
    max_drop: float | None,
    strict: bool,
    out_dir: Path,
    fmt: str,
) -> None:
    """Compare a candidate run with a baseline; exit 1 only on a regression that is significant at --alpha."""
    (base_name, base), (cand_name, cand) = load_runs([baseline, candidate], store_path, token)
    result = compare_runs(
        base, cand, alpha=alpha, max_drop=max_drop, strict=strict, baseline_name=base_name, candidate_name=cand_name
    )
    # printed to a terminal too: control characters and bidi overrides from case names become visible escapes
    markdown = clean_text(result.to_markdown())
    reports = (baseline, candidate)  # those that are report files are never written over
    summary = write_text_file(out_dir / "summary.md", markdown, inputs=reports)
    junit = write_text_file(out_dir / "junit.xml", junit_xml(result), inputs=reports)
    _append_step_summary(markdown)
    click.echo(json_text(result.to_dict()) if fmt == "json" else markdown, nl=False)
    click.echo(f"\nwrote {summary} and {junit}", err=True)
    if result.paired_cases == 0 and result.ungraded:  # shared cases, none with a verdict in both: its doubt is last
        raise UsageProblem(f"nothing was compared: {result.reasons[-1]}")
    if result.paired_cases == 0:
        empty = empty_runs(base, cand, (base_name, cand_name))
        if empty:  # not a baseline of another eval set: a run that graded nothing
            raise UsageProblem(
                f"{' and '.join(empty)} {'has' if len(empty) == 1 else 'have'} no case results: nothing was "
                "compared; gate a run that graded its eval set"
            )
        raise UsageProblem(
            f"{base_name} and {cand_name} share no case (no eval id graded in both): nothing was compared; "
            "gate a candidate against a baseline of the same eval set"
        )
    if result.verdict == "fail":
        sys.exit(1)


def _append_step_summary(markdown: str) -> None:
    """Append ``markdown`` to ``$GITHUB_STEP_SUMMARY`` when it is set. A failure is a warning on stderr: the verdict
    and its exit code stand (exit 1 there would read as a regression)."""
    step_summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if not step_summary:
        return
    try:
        with open(step_summary, "a", encoding="utf-8") as fh:
            fh.write(markdown)
    except OSError as exc:
        click.echo(
            f"warning: the summary was not appended to GITHUB_STEP_SUMMARY={step_summary}: "
            f"{exc.strerror or exc}; point it at a writable file, or unset it",
            err=True,
        )


def junit_xml(result: RunComparison) -> str:
    """One test case per metric and, with ``strict``, per flipped case; inconclusive ones are skipped."""
    suite = ET.Element("testsuite", name="tracegrade gate", tests="0", failures="0", skipped="0")
    properties = ET.SubElement(suite, "properties")
    for key, value in (
        ("baseline", result.baseline),
        ("candidate", result.candidate),
        ("alpha", f"{result.alpha:g}"),
        ("max_drop", "" if result.max_drop is None else f"{result.max_drop:g}"),
        ("paired_cases", str(result.paired_cases)),
        ("verdict", result.verdict),
    ):
        ET.SubElement(properties, "property", name=key, value=value)
    failures = skipped = 0
    for m in result.metrics:
        case = ET.SubElement(suite, "testcase", classname="tracegrade.gate", name=m.name)
        case.set("time", "0")
        ET.SubElement(case, "system-out").text = (
            f"pass rate {m.pass_rate_baseline:.3f} -> {m.pass_rate_candidate:.3f} "
            f"({m.pass_to_fail} pass->fail, {m.fail_to_pass} fail->pass, McNemar p adj. {m.mcnemar_p_adjusted:.3g}); "
            f"mean delta {m.delta:+.3f} [{m.low:+.3f}, {m.high:+.3f}] over {m.pairs} paired cases"
        )
        if m.significant_regression or m.exceeds_max_drop:
            failures += 1
            why = "significant regression" if m.significant_regression else "drop larger than --max-drop"
            ET.SubElement(case, "failure", message=f"{m.name}: {why}", type="regression")
        elif m.name == CASES and result.verdict == "inconclusive":
            skipped += 1
            ET.SubElement(case, "skipped", message="; ".join(result.reasons))
    if result.strict:
        for flip in result.flips:
            if flip.direction != "pass->fail":
                continue
            case = ET.SubElement(suite, "testcase", classname="tracegrade.gate.flips", name=flip.eval_id, time="0")
            failures += 1
            ET.SubElement(case, "failure", message="pass -> fail", type="flip").text = flip.divergence or ""
    suite.set("tests", str(len(suite.findall("testcase"))))
    suite.set("failures", str(failures))
    suite.set("skipped", str(skipped))
    # names and trajectories come from eval sets and traces: control characters (which XML 1.0 forbids) and lone
    # surrogates (which UTF-8 cannot hold) become visible escapes; the markup itself holds none
    return clean_text('<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suite, encoding="unicode") + "\n")
