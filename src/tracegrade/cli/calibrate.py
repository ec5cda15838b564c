"""``tracegrade calibrate --labels FILE --config CONFIG``: how far each LLM judge of a config agrees with humans.

The labels file is JSON lines, one labelled item each::

    {"id": "refund-1", "question": "…", "response": "…", "expected_response": "…", "label": "pass"}
    {"trace_id": "4bf92f35…", "score": 0.75}
    {"case_id": "paris", "label": "fail", "criterion": "safety"}
    {"id": "greeting", "selector": {"where": "user_query = 'hi'"}, "label": true}

The human verdict is ``label`` (pass/fail, true/false, 1/0) or ``score`` (a number in [0, 1]: a graded scale).
What the judge grades is ``response`` (with the optional ``question`` and ``expected_response``), or else a
trace in ``--store``: ``trace_id`` (or a unique prefix), ``case_id`` (its newest trace) or ``selector`` (one of
those keys, or ``where``: a SQL predicate over ``traces`` that must match one trace). ``criterion`` (a slot or
result name) keeps the label to one criterion; without it, it applies to every judged criterion.

Results are added to ``--out`` (default: the config's ``calibration_file``, else ``.tracegrade/calibration.json``,
where runs look for them) and, when a store is given (``--store`` or ``TRACEGRADE_STORE``), to its
``calibrations`` table too (:mod:`tracegrade.evaluation.calibration_records`). Exit code 1 when a criterion's
kappa is below its ``min_agreement``.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from tracegrade.cli.common import UsageProblem, friendly_errors
from tracegrade.cli.store_access import lake_data_option, store_options
from tracegrade.errors import FileFormatError
from tracegrade.evaluation.calibration import (
    LabelledItem,
    calibrate,
    calibration_path,
    enforce_calibration,
    judged_criteria,
    save_calibrations,
)
from tracegrade.models.config import EvalConfig
from tracegrade.models.dataset import EvalCase
from tracegrade.models.execution import ExecutionResult

__all__ = ["command", "load_labels"]

_KEYS = frozenset(
    (
        "id",
        "case_id",
        "trace_id",
        "selector",
        "question",
        "response",
        "expected_response",
        "label",
        "score",
        "criterion",
    )
)
_SELECTOR_KEYS = ("trace_id", "case_id", "where")
_LABELS = {"pass": 1.0, "fail": 0.0, "true": 1.0, "false": 0.0, "1": 1.0, "0": 0.0}


@click.command("calibrate")
@store_options
@lake_data_option
@click.option("--labels", "labels_path", required=True, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--config", "config_path", required=True, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--criterion", "only", multiple=True, help="Calibrate only this slot or criterion (repeatable).")
@click.option("--out", "out_path", type=click.Path(dir_okay=False, path_type=Path), help="Calibration file to add to.")
@click.option("--levels", type=click.IntRange(2, 101), default=5, show_default=True, help="Graded scale's levels.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@friendly_errors
def command(
    store_path: Path,
    token: str | None,
    lake_data: Path | None,
    labels_path: Path,
    config_path: Path,
    only: tuple[str, ...],
    out_path: Path | None,
    levels: int,
    fmt: str,
) -> None:
    """Measure each LLM-judged criterion of --config against human labels and store the calibration."""
    config = EvalConfig.from_file(config_path)
    criteria = judged_criteria(config, only)
    if not criteria:
        wanted = f" among {', '.join(only)}" if only else ""
        raise UsageProblem(f"{config_path} enables no LLM-judged criterion{wanted}: there is no judge to calibrate")
    items = load_labels(labels_path, store_path, token)
    entries = asyncio.run(calibrate(config, items, only, levels))
    out = out_path or calibration_path(config)
    written = save_calibrations(out, entries)
    click.echo(json.dumps(entries, indent=2, default=str) if fmt == "json" else _text(entries), nl=fmt == "json")
    click.echo(f"wrote {written}", err=True)
    if click.get_current_context().get_parameter_source("store_path") is not ParameterSource.DEFAULT:
        _record_in_store(store_path, token, lake_data, entries, written)
    if out_path is not None and out_path != calibration_path(config):
        click.echo(f"note: runs of this config look in {calibration_path(config)} (set calibration_file)", err=True)
    checked = config.model_copy(update={"calibration_file": str(out), "calibration": "warn"})
    shortfalls = enforce_calibration([c for _, c in criteria], checked)
    for problems in shortfalls.values():
        for problem in problems:
            click.echo(problem, err=True)
    if shortfalls:
        sys.exit(1)


def _record_in_store(
    store_path: Path, token: str | None, lake_data: Path | None, entries: list[dict[str, Any]], written: Path
) -> None:
    """Also keep the calibrations in the store's ``calibrations`` table (a store given with --store or
    TRACEGRADE_STORE; a lake needs its data path)."""
    from tracegrade.cli.grading_store import open_grading_store
    from tracegrade.evaluation.calibration_records import record_calibrations
    from tracegrade.store.lake_location import is_lake_location, redacted

    if is_lake_location(store_path) and lake_data is None:
        click.echo(
            f"warning: the calibrations are in {written} but not in the lake: add --lake-data PATH (the path its "
            "receivers were given) to store them there too",
            err=True,
        )
        return
    with open_grading_store(store_path, token, lake_data=lake_data) as store:
        if store.sink is None:
            click.echo(
                f"warning: the calibrations are in {written} but not in {store_path}: `tracegrade serve` holds the "
                "store and records only grading runs; run calibrate again once it has stopped to store them",
                err=True,
            )
            return
        count = record_calibrations(store.sink, entries, store.tenant)
    click.echo(f"stored {count} calibration(s) in {redacted(store_path)} (table calibrations)", err=True)


def load_labels(path: Path, store_path: Path | None = None, token: str | None = None) -> list[LabelledItem]:
    """The labelled items of a JSON-lines file; items given by trace are read from the store at ``store_path``.

    Every problem of the file is reported at once (:class:`~tracegrade.errors.FileFormatError`, by line).
    """
    if not path.exists():
        raise UsageProblem(f"labels file {path} does not exist")
    problems: list[tuple[str, str]] = []
    parsed: list[tuple[str, dict[str, Any]]] = []
    for number, line in enumerate(path.read_text("utf-8").splitlines(), 1):
        if not line.strip():
            continue
        where = f"line {number}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            problems.append((where, f"not JSON: {exc.msg}"))
            continue
        problem = _check_record(record)
        if problem:
            problems.append((where, problem))
        else:
            parsed.append((where, record))
    if not parsed and not problems:
        problems.append(("$", "no labelled items"))
    if problems:
        raise FileFormatError(str(path), problems, kind="labels file")
    traces = _resolve_traces([(w, r) for w, r in parsed if "response" not in r], store_path, token, path)
    return [_item(where, record, traces.get(where)) for where, record in parsed]


def _check_record(record: Any) -> str | None:
    if not isinstance(record, dict):
        return "each line must be a JSON object"
    unknown = sorted(set(record) - _KEYS)
    if unknown:
        return f"unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(_KEYS))}"
    if ("label" in record) == ("score" in record):
        return "give exactly one human verdict: label (pass/fail, true/false, 1/0) or score (0-1)"
    if "label" in record and str(record["label"]).lower() not in _LABELS:
        return f"label must be pass/fail, true/false or 1/0, got {record['label']!r}"
    score = record.get("score", 0.0)
    if isinstance(score, bool) or not isinstance(score, int | float) or not 0 <= score <= 1:
        return f"score must be a number in [0, 1], got {score!r}"
    if "response" in record:
        if not isinstance(record["response"], str):
            return "response must be a string"
        return None if any(k in record for k in ("id", "case_id", "trace_id")) else "an inline response needs an id"
    selector = record.get("selector", {k: record[k] for k in ("trace_id", "case_id") if k in record})
    if not isinstance(selector, dict) or len(selector) != 1 or next(iter(selector)) not in _SELECTOR_KEYS:
        return "give a response, or one trace to judge: trace_id, case_id, or selector {trace_id|case_id|where: …}"
    return None


def _resolve_traces(
    wanted: list[tuple[str, dict[str, Any]]], store_path: Path | None, token: str | None, labels: Path
) -> dict[str, ExecutionResult]:
    """The stored execution of each item given by trace (keyed by its line), read in one store session."""
    if not wanted:
        return {}
    from tracegrade.cli.show import resolve_trace_id
    from tracegrade.cli.store_access import reading_store
    from tracegrade.evaluation.selection import load_executions

    if store_path is None:
        raise UsageProblem(f"{labels} names traces: give the store holding them with --store")
    with reading_store(store_path, token) as store:
        ids: dict[str, str] = {}
        for where, record in wanted:
            selector = record.get("selector") or {k: record[k] for k in ("trace_id", "case_id") if k in record}
            ((key, value),) = selector.items()
            try:
                ids[where] = _trace_for(store, key, str(value), resolve_trace_id)
            except UsageProblem as exc:
                raise UsageProblem(f"{labels} {where}: {exc.message}") from None
        executions = load_executions(store, list(ids.values()))
    missing = [w for w, t in ids.items() if t not in executions]
    if missing:
        raise UsageProblem(f"{labels} {', '.join(missing)}: the trace's trajectory is not built yet; try again shortly")
    return {where: executions[trace] for where, trace in ids.items()}


def _trace_for(store: Any, key: str, value: str, resolve_trace_id: Any) -> str:
    if key == "trace_id":
        return str(resolve_trace_id(store, value))
    if key == "case_id":
        sql, params = "SELECT trace_id FROM traces WHERE case_id = ? ORDER BY start_time DESC LIMIT 1", [value]
    else:
        sql, params = f"SELECT trace_id FROM traces WHERE ({value}) LIMIT 2", []
    try:
        rows = store.query(sql, params).rows
    except Exception as exc:
        raise UsageProblem(f"selector {key} {value!r} cannot be run over the traces table: {exc}") from None
    if not rows:
        raise UsageProblem(f"no trace matches {key} {value!r}")
    if len(rows) > 1:
        raise UsageProblem(f"where {value!r} matches several traces; narrow it to one (or give trace_id)")
    return str(rows[0][0])


def _item(where: str, record: dict[str, Any], stored: ExecutionResult | None) -> LabelledItem:
    item_id = str(record.get("id") or record.get("case_id") or record.get("trace_id") or where)
    if stored is None:
        execution = ExecutionResult(actual_response=record["response"], user_query=record.get("question"))
    else:
        execution = stored
    question = record.get("question") or execution.user_query or ""
    case = EvalCase.single_turn(item_id, str(question), expected_response=record.get("expected_response"))
    graded = "score" in record
    human = float(record["score"]) if graded else _LABELS[str(record["label"]).lower()]
    return LabelledItem(item_id, execution, case, human, graded, record.get("criterion"))


def _text(entries: list[dict[str, Any]]) -> str:
    """Each criterion's agreement as a few lines of text."""

    def num(value: Any) -> str:
        return "n/a" if value is None else f"{value:.3f}"

    lines: list[str] = []
    for e in entries:
        lines.append(f"{e['criterion']} (slot {e['slot']}, judge {e['judge_model']}, prompt {e['prompt_version']})")
        excluded = e["excluded"]
        lines.append(
            f"  {e['items']} of {e['labelled_items']} items judged: accuracy {num(e['accuracy'])}, "
            f"kappa {num(e['kappa'])}, spearman {num(e['spearman'])}"
        )
        if e["scale"]:
            lines.append(
                f"  {len(e['scale'])}-level scale: weighted kappa linear {num(e['kappa_linear'])}, "
                f"quadratic {num(e['kappa_quadratic'])}"
            )
        c = e["confusion"]
        lines.append("  human \\ judge   pass   fail")
        for h in ("pass", "fail"):
            lines.append(f"  {h:<13} {c[f'human_{h}']['judge_pass']:>6} {c[f'human_{h}']['judge_fail']:>6}")
        sc = e["self_consistency"]
        if sc:
            lines.append(
                f"  self-consistency over {sc['samples_per_item']} samples: {sc['unanimous_rate']:.0%} of items "
                f"unanimous on pass/fail, mean range {sc['mean_range']:.3f}, mean sd {sc['mean_stdev']:.3f}"
            )
        else:
            lines.append("  self-consistency: one sample per item (set num_samples >= 2 to measure it)")
        for x in excluded[:5]:
            lines.append(f"  excluded {x['id']}: {x['reason']}")
        if len(excluded) > 5:
            lines.append(f"  … and {len(excluded) - 5} more excluded")
    return "\n".join(lines) + "\n"
