"""What the pytest plugin does with a store and a baseline: find the baseline run, gate the session against it
with :func:`tracegrade.evaluation.compare.compare_runs`, record the session as a run.

A baseline is resolved as ``tracegrade gate`` resolves one (:mod:`tracegrade.cli.run_refs`): a saved report
JSON file, or in the store a run id (or unique prefix), ``latest`` or ``latest~N``. The gate fails the session
only on a regression that is significant at ``alpha`` (or larger than ``max_drop``, or with ``strict`` any
case that went from pass to fail); too little evidence is reported as inconclusive and passes.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from pathlib import Path

from tracegrade.evaluation.compare import RunComparison, compare_runs
from tracegrade.evaluation.run_outcomes import Run
from tracegrade.models.results import EvalReport
from tracegrade.reporters.text import one_line
from tracegrade.store.lake_location import is_lake_location
from tracegrade.store.store_option import store_named_by

__all__ = [
    "SESSION_RUN_KIND",
    "STORE_OPTION",
    "GateSettings",
    "all_flips_hint",
    "gate_lines",
    "gate_session",
    "load_baseline",
    "record_session",
]

SESSION_RUN_KIND = "live"  # a pytest session grades its agents live
STORE_OPTION = "--tracegrade-store"  # what the store's errors call the option naming it, in a pytest session


@dataclass(frozen=True)
class GateSettings:
    """The plugin's gate options (as ``tracegrade gate`` has them)."""

    alpha: float = 0.05
    max_drop: float | None = None
    strict: bool = False


def load_baseline(ref: str, store: str | Path | None, token: str | None) -> tuple[str, Run]:
    """``(display name, run)`` of the baseline ``ref``, a run looked up in ``store`` (a file or a lake) unless
    it names a report file; a TracegradeError says what is wrong with it."""
    from tracegrade.cli.common import UsageProblem
    from tracegrade.cli.run_refs import load_runs
    from tracegrade.errors import StoreMissingError

    if store is None:
        if not Path(ref).is_file():
            raise UsageProblem(
                f"no report file {ref!r}, and no store to look it up in as a run: give a JSON report (as "
                f"--tracegrade-report DIR writes it), or a run id, latest or latest~N with {STORE_OPTION} STORE"
            )
        return load_runs([ref], Path(), token)[0]
    try:
        with store_named_by(STORE_OPTION):
            return load_runs([ref], _location(store), token)[0]
    except StoreMissingError:
        # the CLI's hint (`tracegrade serve`, --lake-data) is not how a pytest session makes its store
        raise UsageProblem(_no_store_yet(store)) from None


def _no_store_yet(store: str | Path) -> str:
    """Why a baseline cannot be looked up in ``store``, which does not exist yet, and how a session creates it."""
    from tracegrade.env_vars import ENV_VARS
    from tracegrade.store.lake_location import redacted

    shown = redacted(store)
    if isinstance(_location(store), str):
        what = f"lake {shown} does not exist yet (its database holds no lake)"
        how = (
            f" with {ENV_VARS['lake_data']} set to the directory the lake keeps its files in (one path for every node)"
        )
    else:
        what, how = f"store {shown} does not exist yet", ""
    return (
        f"{what}, so it holds no run to gate against: a session run with {STORE_OPTION} {shown} and without "
        f"--tracegrade-baseline creates it and records its run{how}; later sessions gate against that run"
    )


def gate_session(baseline: tuple[str, Run], session: EvalReport, settings: GateSettings) -> RunComparison:
    """The session's report compared with the baseline's."""
    name, report = baseline
    return compare_runs(
        report,
        session,
        alpha=settings.alpha,
        max_drop=settings.max_drop,
        strict=settings.strict,
        baseline_name=name,
        candidate_name="this session",
    )


def gate_lines(result: RunComparison, see_all: str) -> list[tuple[str, bool]]:
    """The terminal summary's lines for a gate result, each with whether to show it in red. Flipped cases are
    listed as the Markdown summary lists them (regressions first, at most
    :data:`~tracegrade.evaluation.compare.MARKDOWN_FLIPS`); ``see_all`` says where to see them all (see
    :func:`all_flips_hint`)."""
    failed = result.verdict == "fail"
    lines = [
        (
            f"baseline {result.baseline}: gate {result.verdict} ({result.paired_cases} paired cases, "
            f"alpha {result.alpha:g}"
            + (f", max drop {result.max_drop:g}" if result.max_drop is not None else "")
            + ")",
            failed,
        )
    ]
    # a reason quotes case ids and a report's metadata, which a saved baseline may hold with a newline in them
    lines += [(f"  {one_line(reason)}", failed) for reason in result.reasons]
    for m in result.metrics:
        regressed = m.significant_regression or m.exceeds_max_drop
        mark = "REGRESSED " if regressed else "IMPROVED " if m.significant_improvement else ""
        lines.append(
            (
                f"  {mark}{m.name}: pass rate {m.pass_rate_baseline:.0%} -> "
                f"{m.pass_rate_candidate:.0%} ({m.pass_to_fail} pass->fail, {m.fail_to_pass} fail->pass, "
                f"McNemar p adj. {m.mcnemar_p_adjusted:.3g}), mean {m.mean_baseline:.3f} -> {m.mean_candidate:.3f}",
                regressed,
            )
        )
    shown, cut = result.listed_flips()
    for flip in shown:
        where = f" at {flip.divergence}" if flip.divergence else ""
        criteria = f" ({', '.join(flip.criteria)})" if flip.criteria else ""
        lines.append((f"  {one_line(flip.eval_id)}: {flip.direction}{criteria}{where}", failed and result.strict))
    if cut is not None:
        lines.append((f"  {cut}; {see_all}", False))
    if result.only_baseline or result.only_candidate:
        lines.append(
            (
                f"  not compared: {len(result.only_baseline)} case(s) only in the baseline, "
                f"{len(result.only_candidate)} only in this session",
                False,
            )
        )
    return lines


def all_flips_hint(baseline: str, recorded_run: str | None, store: str | None, report_json: str | None) -> str:
    """Where to see every case the session flipped against ``baseline`` (the gate's name for it: a run id or a
    report file): ``tracegrade diff`` of the baseline and the session's run recorded in ``store`` (else its JSON
    report), as a command to paste; when the session kept neither, how to keep one."""
    from tracegrade.store.lake_location import redacted

    session = recorded_run if recorded_run is not None else report_json
    if session is None:
        return "keep this session's report (--tracegrade-report DIR or --tracegrade-store STORE) to list them all"
    command = f"tracegrade diff {shlex.quote(baseline)} {shlex.quote(session)}"
    if store is not None and (recorded_run is not None or not Path(baseline).is_file()):  # a run in the store
        command += f" --store {shlex.quote(redacted(store))}"
    return f"`{command}` lists them all"


def _location(store: str | Path) -> str | Path:
    """``store`` as the store openers take it: a lake's location (``ducklake:postgres:...``) kept a string, for a
    conninfo is no path (Path would fold a URI's "//", and a lake would be looked for as a file), a file's a Path."""
    location = str(store)
    return location if is_lake_location(location) else Path(location)


def record_session(report: EvalReport, store: str | Path, token: str | None) -> str:
    """Record the session's report as a run in ``store`` (through the server holding it, if one does); the
    first session creates a store file that does not exist yet, its directories too. A lake
    (``ducklake:postgres:...``) is recorded in with its data path from ``TRACEGRADE_LAKE_DATA``, as the CLI takes
    it."""
    from tracegrade.cli.grading_store import open_grading_store
    from tracegrade.env_vars import ENV_VARS

    location = _location(store)
    with store_named_by(STORE_OPTION):
        if isinstance(location, str):  # a lake
            lake_data = os.environ.get(ENV_VARS["lake_data"]) or None
            with open_grading_store(location, token, lake_data=Path(lake_data) if lake_data else None) as opened:
                return opened.record(report, SESSION_RUN_KIND)
        if not location.exists():
            from tracegrade.store.backend import open_store

            # made as `tracegrade serve` and `import` make one: its missing parent directories too (a CI job's
            # first session on --tracegrade-store .tracegrade/runs.duckdb in a fresh checkout)
            open_store(location).close()
        with open_grading_store(location, token) as opened:
            return opened.record(report, SESSION_RUN_KIND)
