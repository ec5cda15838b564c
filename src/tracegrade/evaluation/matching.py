"""Matching eval cases to stored traces for offline grading.

Strategies, tried in order for each case:

1. **case id** — the ``tracegrade.case.id`` that ``AgentEvaluator`` stamps on its turn root spans
   (the newest run of that case when it was run several times; ``run_id`` narrows it);
2. **selector** — ``case.metadata["selector"]``: ``{"trace_id": …}``, ``{"conversation_id": …}`` or
   ``{"where": "<SQL predicate over traces>"}``;
3. **first user message** — traces whose ``user_query`` equals the case's first user message (for a
   multi-turn case, the conversation that trace belongs to).

A case with no matching trace, or with several where one was expected, gets an error that says why.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from tracegrade.models.dataset import EvalCase

__all__ = ["QueryableStore", "TraceMatch", "match_case"]


class QueryableStore(Protocol):
    """Anything with ``query(sql, params)`` returning an object with ``columns`` and ``rows``."""

    def query(self, sql: str, params: Any = None) -> Any: ...


@dataclass
class TraceMatch:
    """The traces (in turn order) that stand for one case, how they were found, or why none were."""

    case: EvalCase
    trace_ids: list[str] = field(default_factory=list)
    strategy: str | None = None
    error: str | None = None


_ORDER = "ORDER BY start_time, trace_id"


def match_case(store: QueryableStore, case: EvalCase, run_id: str | None = None) -> TraceMatch:
    """Find the traces for ``case``; never raises for a missing or ambiguous match (see ``error``)."""
    turns = max(1, len(case.conversation))
    for strategy in (_by_case_id, _by_selector, _by_first_message):
        match = strategy(store, case, turns, run_id)
        if match is not None:
            return match
    return TraceMatch(
        case,
        error=(
            f"no trace matches case {case.eval_id!r}: no trace carries tracegrade.case.id={case.eval_id!r}, "
            "the case has no metadata.selector, and no trace's user query equals its first user message "
            f"{_short(case.first_user_text())!r}"
        ),
    )


def _rows(store: QueryableStore, sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
    return list(store.query(sql, params).rows)


def _by_case_id(store: QueryableStore, case: EvalCase, turns: int, run_id: str | None) -> TraceMatch | None:
    sql = "SELECT trace_id, run_id, turn_index FROM traces WHERE case_id = ?"
    params: list[Any] = [case.eval_id]
    if run_id:
        sql += " AND run_id = ?"
        params.append(run_id)
    rows = _rows(store, sql + " " + _ORDER, params)
    if not rows:
        return None
    newest_run = rows[-1][1]  # the run whose last trace is newest
    picked = sorted((r for r in rows if r[1] == newest_run), key=lambda r: r[2] if r[2] is not None else 0)
    ids = [r[0] for r in picked]
    if len({r[2] for r in picked}) != len(picked):
        return TraceMatch(
            case,
            ids,
            "case_id",
            f"case {case.eval_id!r} matched {len(picked)} traces of run {newest_run!r} with repeated turn "
            "indexes; pass a run id to choose one",
        )
    return _check_turns(TraceMatch(case, ids, "case_id"), turns)


def _by_selector(store: QueryableStore, case: EvalCase, turns: int, run_id: str | None) -> TraceMatch | None:
    selector = case.metadata.get("selector")
    if not selector:
        return None
    if not isinstance(selector, dict) or not selector.keys() & {"trace_id", "conversation_id", "where"}:
        return TraceMatch(
            case,
            strategy="selector",
            error=f"case {case.eval_id!r}: metadata.selector must be an object with trace_id, conversation_id "
            f"or where; got {selector!r}",
        )
    if "trace_id" in selector:
        ids = selector["trace_id"]
        ids = [ids] if isinstance(ids, str) else list(ids)
        found = {r[0] for r in _rows(store, "SELECT trace_id FROM traces WHERE list_contains(?, trace_id)", [ids])}
        missing = [t for t in ids if t not in found]
        if missing:
            return TraceMatch(case, strategy="selector", error=f"selector trace ids not in the store: {missing}")
        return _check_turns(TraceMatch(case, ids, "selector"), turns)
    if "conversation_id" in selector:
        rows = _rows(
            store, f"SELECT trace_id FROM traces WHERE conversation_id = ? {_ORDER}", [selector["conversation_id"]]
        )
        what = f"conversation_id {selector['conversation_id']!r}"
    else:
        rows = _rows(store, f"SELECT trace_id FROM traces WHERE ({selector['where']}) {_ORDER}", [])
        what = f"selector predicate {selector['where']!r}"
    if not rows:
        return TraceMatch(case, strategy="selector", error=f"no trace matches {what}")
    return _check_turns(TraceMatch(case, [r[0] for r in rows], "selector"), turns)


def _by_first_message(store: QueryableStore, case: EvalCase, turns: int, run_id: str | None) -> TraceMatch | None:
    text = case.first_user_text()
    if not text:
        return None
    rows = _rows(store, f"SELECT trace_id, conversation_id FROM traces WHERE user_query = ? {_ORDER}", [text])
    if not rows:
        return None
    if turns == 1:
        if len(rows) > 1:
            return TraceMatch(
                case,
                [r[0] for r in rows],
                "first_message",
                f"ambiguous: {len(rows)} traces have the user query {_short(text)!r} "
                f"({', '.join(r[0][:16] for r in rows[:5])}{'…' if len(rows) > 5 else ''}); add metadata.selector "
                "to the case (trace_id, conversation_id or where) to pick one",
            )
        return TraceMatch(case, [rows[0][0]], "first_message")
    conversations = {r[1] for r in rows if r[1]}
    if len(conversations) != 1:
        return TraceMatch(
            case,
            [r[0] for r in rows],
            "first_message",
            f"multi-turn case {case.eval_id!r}: the first user message matches "
            f"{len(conversations) or 'no'} conversation{'s' if len(conversations) != 1 else ''}; "
            "add metadata.selector.conversation_id",
        )
    conv = conversations.pop()
    ids = [r[0] for r in _rows(store, f"SELECT trace_id FROM traces WHERE conversation_id = ? {_ORDER}", [conv])]
    return _check_turns(TraceMatch(case, ids, "first_message"), turns)


def _check_turns(match: TraceMatch, turns: int) -> TraceMatch:
    found = len(match.trace_ids)
    if turns == 1 and found > 1:
        match.error = (
            f"ambiguous: {found} traces match case {match.case.eval_id!r} by {match.strategy} where one was expected"
        )
    elif turns > 1 and found != turns:
        match.error = (
            f"case {match.case.eval_id!r} has {turns} turns but {found} trace{'s' if found != 1 else ''} "
            f"matched by {match.strategy}"
        )
    return match


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
