"""Matching eval cases to stored traces for offline grading.

Strategies, tried in order for each case:

1. **case id** — the ``tracegrade.case.id`` that ``AgentEvaluator`` stamps on its turn root spans
   (the newest run of that case when it was run several times; ``run_id`` narrows it, and traces of the
   graded eval set are preferred over traces of another set that reused the case id);
2. **selector** — ``case.metadata["selector"]``: ``{"trace_id": id or [ids]}``, ``{"conversation_id": …}``
   or ``{"where": "<SQL predicate over traces>"}``;
3. **first user message** — traces whose ``user_query`` equals the case's first user message (for a
   multi-turn case, the conversation that trace belongs to).

A multi-turn case gets the traces of one conversation (or run) in time order, one per turn. A case with no
matching trace, or with several where one was expected, gets an error that says why; matching never
raises for one case, so grading goes on for the others. Case-id and selector-trace-id lookups are one
query for the whole eval set.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tracegrade.errors import StoreError, did_you_mean
from tracegrade.evaluation.selection import QueryableStore
from tracegrade.models.dataset import EvalCase
from tracegrade.store.rows import sql_string_in

__all__ = ["QueryableStore", "TraceMatch", "match_case", "match_cases", "selector_problems"]

_ORDER = "ORDER BY start_time, trace_id"
_SELECTOR_KEYS = ("trace_id", "conversation_id", "where")


@dataclass
class TraceMatch:
    """The traces (in turn order) that stand for one case, how they were found, or why none were.

    ``ambiguous`` marks an error that is only that several traces matched where one was expected (per turn):
    graded with ``num_runs > 1``, each of them is a trial of the case.
    """

    case: EvalCase
    trace_ids: list[str] = field(default_factory=list)
    strategy: str | None = None
    error: str | None = None
    ambiguous: bool = False


def match_case(
    store: QueryableStore, case: EvalCase, run_id: str | None = None, eval_set_id: str | None = None
) -> TraceMatch:
    """Find the traces for one case (see :func:`match_cases`)."""
    return match_cases(store, [case], run_id, eval_set_id)[0]


def match_cases(
    store: QueryableStore, cases: Sequence[EvalCase], run_id: str | None = None, eval_set_id: str | None = None
) -> list[TraceMatch]:
    """One :class:`TraceMatch` per case, in order; never raises for a missing or ambiguous match."""
    stamped = _stamped_traces(store, [c.eval_id for c in cases], run_id)
    known_ids = _existing_trace_ids(store, [t for c in cases for t in _selector_trace_ids(c)])
    matches = []
    for case in cases:
        turns = _expected_turns(case)
        match = (
            _by_case_id(case, stamped.get(case.eval_id, []), turns, eval_set_id)
            or _by_selector(store, case, turns, known_ids)
            or _by_first_message(store, case, turns)
        )
        matches.append(match or _unmatched(case))
    return matches


def _unmatched(case: EvalCase) -> TraceMatch:
    return TraceMatch(
        case,
        error=(
            f"no trace matches case {case.eval_id!r}: no trace carries tracegrade.case.id={case.eval_id!r}, "
            "the case has no metadata.selector, and no trace's user query equals its first user message "
            f"{_short(case.first_user_text())!r}"
        ),
    )


def _rows(store: QueryableStore, sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in store.query(sql, params).rows]


# ---------------------------------------------------------------------------------------- case id


def _stamped_traces(store: QueryableStore, case_ids: list[str], run_id: str | None) -> dict[str, list[tuple[Any, ...]]]:
    """``case_id -> [(trace_id, run_id, turn_index, eval_set_id), …]`` oldest first, in one query."""
    if not case_ids:
        return {}
    in_ids, id_params = sql_string_in(dict.fromkeys(case_ids))
    sql = f"SELECT trace_id, run_id, turn_index, eval_set_id, case_id FROM traces WHERE case_id IN {in_ids}"
    params: list[Any] = [*id_params]
    if run_id:
        sql += " AND run_id = ?"
        params.append(run_id)
    grouped: dict[str, list[tuple[Any, ...]]] = defaultdict(list)
    for row in _rows(store, f"{sql} {_ORDER}", params):
        grouped[row[4]].append(row[:4])
    return grouped


def _by_case_id(
    case: EvalCase, rows: list[tuple[Any, ...]], turns: int | None, eval_set_id: str | None
) -> TraceMatch | None:
    if not rows:
        return None
    same_set = [r for r in rows if eval_set_id and r[3] == eval_set_id]
    rows = same_set or rows
    newest_run = rows[-1][1]  # the run whose last trace is newest
    picked = sorted((r for r in rows if r[1] == newest_run), key=lambda r: r[2] if r[2] is not None else 0)
    ids = [r[0] for r in picked]
    if len({r[2] for r in picked}) != len(picked):
        return TraceMatch(
            case,
            ids,
            "case_id",
            f"ambiguous: case {case.eval_id!r} matched {len(picked)} traces of run {newest_run!r} with repeated "
            "turn indexes; pass the run id (--run-id) of the run to grade",
            ambiguous=True,
        )
    return _check_turns(TraceMatch(case, ids, "case_id"), turns)


# --------------------------------------------------------------------------------------- selector


def _selector_trace_ids(case: EvalCase) -> list[str]:
    selector = case.metadata.get("selector")
    if not isinstance(selector, dict) or "trace_id" not in selector:
        return []
    ids = selector["trace_id"]
    return [ids] if isinstance(ids, str) else [str(t) for t in ids] if isinstance(ids, list) else []


def _existing_trace_ids(store: QueryableStore, trace_ids: list[str]) -> set[str]:
    if not trace_ids:
        return set()
    in_ids, params = sql_string_in(dict.fromkeys(trace_ids))
    return {r[0] for r in _rows(store, f"SELECT trace_id FROM traces WHERE trace_id IN {in_ids}", params)}


def selector_problems(case: EvalCase) -> list[tuple[str, str]]:
    """Why the case's ``metadata.selector`` cannot pick traces, as ``(path under the selector, what is wrong)``
    pairs; empty when it can (or when the case has none). Needs no store: a ``where`` predicate is bound against
    the store's table definition. ``validate`` and grading refuse a case with problems; matching reports them."""
    from tracegrade.criteria.trajectory_db import predicate_problem

    selector = case.metadata.get("selector")
    if not selector:  # absent, or empty: the case is matched by its id or first message
        return []
    unknown = [key for key in selector if key not in _SELECTOR_KEYS] if isinstance(selector, dict) else []
    if unknown:
        return [(f".{key}", f"unknown key {key!r}{did_you_mean(key, _SELECTOR_KEYS)}") for key in unknown]
    if not isinstance(selector, dict) or len(selector) != 1:
        return [("", f"must be an object with exactly one of trace_id, conversation_id or where; got {selector!r}")]
    if "trace_id" in selector and not _selector_trace_ids(case):
        return [(".trace_id", "must be a trace id or a list of them")]
    if "conversation_id" in selector and not isinstance(selector["conversation_id"], str):
        return [(".conversation_id", "must be a conversation id (a string)")]
    if "where" in selector:
        if not isinstance(selector["where"], str) or not selector["where"].strip():
            return [(".where", "must be a SQL predicate over the traces table (a string)")]
        problem = predicate_problem(selector["where"])
        if problem is not None:
            return [(".where", f"not a valid predicate over the traces table{problem.located()}: {problem.message}")]
    return []


def _by_selector(store: QueryableStore, case: EvalCase, turns: int | None, known_ids: set[str]) -> TraceMatch | None:
    selector = case.metadata.get("selector")
    if not selector:
        return None
    where = f"case {case.eval_id!r}: metadata.selector"
    problems = selector_problems(case)
    if problems:
        return TraceMatch(case, strategy="selector", error="; ".join(f"{where}{at}: {what}" for at, what in problems))
    if "trace_id" in selector:
        ids = _selector_trace_ids(case)
        missing = [t for t in ids if t not in known_ids]
        if missing:
            return TraceMatch(case, strategy="selector", error=f"{where}.trace_id: not in the store: {missing}")
        return _check_turns(TraceMatch(case, ids, "selector"), turns)
    if "conversation_id" in selector:
        sql, params = f"SELECT trace_id FROM traces WHERE conversation_id = ? {_ORDER}", [selector["conversation_id"]]
        what = f"conversation_id {selector['conversation_id']!r}"
    else:
        sql, params = f"SELECT trace_id FROM traces WHERE ({selector['where']}) {_ORDER}", []
        what = f"the predicate {selector['where']!r}"
    try:
        rows = _rows(store, sql, params)
    except StoreError as exc:
        return TraceMatch(case, strategy="selector", error=f"{where}: {what} cannot run over traces: {exc}")
    if not rows:
        return TraceMatch(case, strategy="selector", error=f"{where}: no trace matches {what}")
    return _check_turns(TraceMatch(case, [r[0] for r in rows], "selector"), turns)


# ------------------------------------------------------------------------------ first user message


def _by_first_message(store: QueryableStore, case: EvalCase, turns: int | None) -> TraceMatch | None:
    text = case.first_user_text()
    if not text:
        return None
    rows = _rows(store, f"SELECT trace_id, conversation_id FROM traces WHERE user_query = ? {_ORDER}", [text])
    if not rows:
        return None
    if turns == 1:
        if len(rows) > 1:
            shown = ", ".join(r[0] for r in rows[:5]) + (", …" if len(rows) > 5 else "")
            return TraceMatch(
                case,
                [r[0] for r in rows],
                "first_message",
                f"ambiguous: {len(rows)} traces have the user query {_short(text)!r} ({shown}) where one was "
                "expected; add metadata.selector (trace_id, conversation_id or where) to the case to pick one",
                ambiguous=True,
            )
        return TraceMatch(case, [rows[0][0]], "first_message")
    conversations = list(dict.fromkeys(r[1] for r in rows if r[1]))
    if len(conversations) != 1:
        found = (
            f"{len(conversations)} conversations ({', '.join(conversations[:5])})"
            if conversations
            else ("traces that belong to no conversation")
        )
        return TraceMatch(
            case,
            [r[0] for r in rows],
            "first_message",
            f"{'ambiguous' if len(conversations) > 1 else 'unmatched'}: multi-turn case {case.eval_id!r}: its "
            f"first user message matches {found}; add metadata.selector.conversation_id to the case",
        )
    ids = [r[0] for r in _rows(store, f"SELECT trace_id FROM traces WHERE conversation_id = ? {_ORDER}", conversations)]
    return _check_turns(TraceMatch(case, ids, "first_message"), turns)


def _expected_turns(case: EvalCase) -> int | None:
    """How many traces the case stands for: one per turn; None (any number) for a simulated conversation."""
    if case.is_simulated:
        return None
    return max(1, len(case.conversation))


def _check_turns(match: TraceMatch, turns: int | None) -> TraceMatch:
    if turns is None:
        return match
    found = len(match.trace_ids)
    if turns == 1 and found > 1:
        match.error = (
            f"ambiguous: {found} traces match case {match.case.eval_id!r} by {match.strategy} where one was "
            "expected; narrow the selector (or pass --run-id)"
        )
        match.ambiguous = True
    elif turns > 1 and found != turns:
        match.error = (
            f"case {match.case.eval_id!r} has {turns} turns but {found} trace{'s' if found != 1 else ''} "
            f"matched by {match.strategy}; each turn must be one trace"
        )
    return match


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
