"""``tracegrade grade``: grade stored traces against an eval set, or reference-free with a selection."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from tracegrade.cli.common import (
    HTTP_URL,
    UsageProblem,
    friendly_errors,
    logged_errors,
    no_config_default,
    refuse_unreachable_judges,
)
from tracegrade.cli.grading_store import open_grading_store
from tracegrade.cli.progress import ProgressBar
from tracegrade.cli.report_output import FORMATS, parse_formats, write_reports
from tracegrade.cli.store_access import chosen_tenant, lake_data_option, store_options
from tracegrade.errors import StoreError
from tracegrade.evaluation.calibration import enforce_calibration
from tracegrade.evaluation.checks import checked_config, checked_eval_set
from tracegrade.evaluation.engine import compile_criteria
from tracegrade.evaluation.offline import TraceGrader
from tracegrade.evaluation.run_records import new_run_id
from tracegrade.evaluation.selection import TraceSelection, selection_where
from tracegrade.models.config import EvalConfig
from tracegrade.models.expectations import run_succeeded
from tracegrade.models.results import EvalReport

__all__ = ["command"]


@click.command("grade")
@store_options
@lake_data_option
@click.option("--evalset", "evalset_path", type=click.Path(dir_okay=False, path_type=Path), help="Eval set to grade.")
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
    default=Path("eval_reports"),
    show_default=True,
    help="Directory the report files --format asks for (json, html, junit) are written into.",
)
@click.option(
    "--format", "formats", default="console,json", show_default=True, help="Comma-separated: " + ",".join(FORMATS)
)
@click.option("--run-id", help="Match case ids only within this recorded AgentEvaluator run.")
@click.option("--where", help="Reference-free: SQL predicate over the traces table.")
@click.option("--since", help="Reference-free: only traces started since (30m, 2h, 7d or an ISO time).")
@click.option("--sample", type=float, help="Reference-free: grade this fraction of the selected traces (0-1].")
@click.option("--limit", type=int, help="Reference-free: at most this many traces (newest first).")
@click.option("--record/--no-record", default=True, show_default=True, help="Record the run in the store.")
@click.option("-v", "--verbose", is_flag=True, help="Console: list every case in full (default: failing ones).")
@click.option(
    "--emit-otlp",
    metavar="ENDPOINT",
    type=HTTP_URL,
    help="Send each criterion result as a gen_ai.evaluation.result event on its trace to this OTLP/HTTP endpoint.",
)
@click.option(
    "--calibration",
    type=click.Choice(["fail", "warn"]),
    help="A judge below its criterion's min_agreement fails the run, or only warns (default: the config's).",
)
@friendly_errors
def command(
    store_path: Path | str,
    token: str | None,
    lake_data: Path | None,
    evalset_path: Path | None,
    config_path: Path | None,
    out_dir: Path,
    formats: str,
    run_id: str | None,
    where: str | None,
    since: str | None,
    sample: float | None,
    limit: int | None,
    record: bool,
    verbose: bool,
    emit_otlp: str | None,
    calibration: str | None,
) -> None:
    """Grade traces in a store with the criteria of --config.

    With --evalset, each case is matched to its traces (stamped case id, the case's selector, or its first
    user message) and graded against it. Without it, traces picked by --where/--since/--sample/--limit are
    graded with the criteria that need no expectations. Without --config, an eval set is graded with
    trajectory and rouge_match, which need no LLM judge (reference-free grading needs a config). Exit code 1
    when any case fails (a case marked metadata.xfail fails as expected, as pytest's strict xfail: it is
    reported XFAIL and fails the run only by passing); 2 for bad input, a selection that matches no trace
    included (nothing is graded or recorded then).
    """
    chosen = parse_formats(formats)
    reference_free = evalset_path is None
    if not reference_free and any(v is not None for v in (where, since, sample, limit)):
        raise UsageProblem("--where/--since/--sample/--limit select traces for reference-free grading; drop --evalset")
    # Check every input before touching the store, so bad input writes nothing; with the checks `validate` makes,
    # so that what it refuses is refused here with the same message.
    eval_set = None if reference_free else checked_eval_set(evalset_path)  # type: ignore[arg-type]
    config = checked_config(config_path) if config_path else _no_config_default(reference_free)
    refuse_unreachable_judges(config)
    if calibration:
        config = config.model_copy(update={"calibration": calibration})
    # refuses a config that enables no criterion, or whose judges fall short of their min_agreement
    enforce_calibration(compile_criteria(config), config)
    selection = TraceSelection(where=where, since=since, sample=sample, limit=limit)
    try:
        selection_where(selection)
    except ValueError as exc:
        raise UsageProblem(str(exc)) from None

    with open_grading_store(store_path, token, writable=record, lake_data=lake_data) as store:
        if reference_free:
            _check_predicate(store.reader, selection)
        with ProgressBar("grading", unit="cases") as bar:
            grader = TraceGrader(store.reader, config, progress=bar.update)
            if eval_set is not None:
                report = grader.grade_eval_set_sync(eval_set, run_id=run_id)
            else:
                report = grader.grade_traces_sync(selection)
        if not report.results:  # reference-free only: every case of an eval set gets a result, matched or not
            raise UsageProblem(_nothing_selected(store_path, selection))
        if record:
            report.metadata["run_id"] = new_run_id()
        _, unwritten = write_reports(report, config.reporter, out_dir, chosen, verbose)
        if emit_otlp or config.emit_evaluation_events:
            _emit_events(report, store.reader, emit_otlp)
        if record:
            try:
                recorded = store.record(
                    report, "reference_free" if reference_free else "eval_set", report.metadata["run_id"]
                )
            except StoreError as exc:
                raise UsageProblem(
                    f"the reports were written to {out_dir}, but the run was not recorded: {exc}"
                ) from None
            click.echo(f"recorded as run {recorded}", err=True)
    if unwritten:  # the run is recorded (the grading is not lost), but a report asked for is missing: a failure
        raise UsageProblem("the run was graded, but not every report asked for was written: " + "; ".join(unwritten))
    # a case marked metadata.xfail must fail (pytest's strict xfail): then it does not fail the run, a pass does
    sys.exit(0 if run_succeeded(report.results) else 1)


def _no_config_default(reference_free: bool) -> EvalConfig:
    """The criteria of ``grade`` without --config (:func:`~tracegrade.cli.common.no_config_default`); reference-free
    grading has none: every default criterion compares a trace with an eval case."""
    if reference_free:
        raise UsageProblem(
            "reference-free grading (no --evalset) needs --config: the default criteria compare a trace with an "
            "eval case, and these traces have none; give a config enabling a criterion that needs no expectation, "
            'e.g. {"criteria": {"contains_keywords": {"keywords": ["refund"]}}} (no judge) or safety / '
            "rubric_based (an LLM judge), or grade against an eval set with --evalset"
        )
    return no_config_default()


def _nothing_selected(store_path: Path | str, selection: TraceSelection) -> str:
    """Why a reference-free run graded nothing, naming the options that selected no trace and how to widen them."""
    given = [
        f"--{option} {value!r}"
        for option, value in (("where", selection.where), ("since", selection.since), ("sample", selection.sample))
        if value is not None
    ]
    tenant = chosen_tenant()
    if not given:
        if tenant is not None:  # a mistyped --tenant, more likely than an empty store
            return (
                f"tenant {tenant!r} has no traces in {store_path}; nothing graded and no run recorded (check --tenant: "
                '`tracegrade sql "SELECT tenant, count(*) FROM traces GROUP BY tenant"` lists the tenants with traces)'
            )
        return f"{store_path} holds no traces; nothing graded and no run recorded (send or import traces first)"
    whose = f" of tenant {tenant!r}" if tenant is not None else ""
    return (
        f"no trace{whose} in {store_path} matched {' and '.join(given)}; nothing graded and no run recorded: widen the "
        "selection (a broader --where, an earlier --since, a larger --sample; `tracegrade traces` lists what the store "
        "holds)"
    )


def _check_predicate(reader: object, selection: TraceSelection) -> None:
    where, params = selection_where(selection)
    try:
        reader.query(f"SELECT count(*) FROM traces WHERE {where}", params)  # type: ignore[attr-defined]
    except Exception as exc:
        raise UsageProblem(
            f"--where {selection.where!r} is not a valid predicate over the traces table: {exc}"
        ) from None


def _emit_events(report: EvalReport, reader: object, endpoint: str | None) -> None:
    """The report's criterion results as events on their traces' root spans (``endpoint`` None: OTEL_* settings)."""
    from tracegrade.evaluation.evaluation_events import EvaluationEventEmitter, root_spans

    emitter = EvaluationEventEmitter(endpoint=endpoint)
    where = endpoint or "the OTLP endpoint of OTEL_EXPORTER_OTLP_*"
    with logged_errors("opentelemetry.exporter") as failures:  # the exporter logs a failed send, never raises
        try:
            roots = root_spans(reader, [t for r in report.results for t in r.trace_ids])  # type: ignore[arg-type]
            count = emitter.emit_report(report, roots)
        finally:
            emitter.close()
    if failures:  # reported as a failed reporter is: on stderr, the grading's exit code unchanged
        click.echo(f"evaluation events to {where} failed: {failures[0]}", err=True)
        return
    click.echo(f"sent {count} evaluation events to {where}", err=True)
