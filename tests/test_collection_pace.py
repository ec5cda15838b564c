"""Offline grading collects the oldest garbage generation less often and sets long-lived objects aside
(``fewer_full_collections``): the reports are the ones grading with CPython's own collection gives, and the
thresholds and the collector's frozen objects come back after (overlapping scopes too)."""

from __future__ import annotations

import asyncio
import gc

import pytest

from tests.support.store_records import FIXTURES, store_fixtures
from tracegrade.evaluation import collection_pace
from tracegrade.evaluation.case_export import cases_from_traces
from tracegrade.evaluation.collection_pace import FULL_COLLECTION_EVERY, fewer_full_collections
from tracegrade.evaluation.offline import TraceGrader
from tracegrade.evaluation.selection import TraceSelection
from tracegrade.models.config import CriteriaConfig, CriterionConfig, EvalConfig
from tracegrade.store import TraceStore

CONFIG = EvalConfig(
    criteria=CriteriaConfig(
        trajectory=CriterionConfig.trajectory(check_args=True),
        node_order=CriterionConfig.node_order(),
        contains_keywords=CriterionConfig.contains_keywords(["weather"], threshold=0.5),
    )
)


def _scores(report) -> list[tuple[object, ...]]:
    return [
        (r.eval_id, r.passed, r.actual_tool_calls, [(c.criterion, c.score, c.details) for c in r.criterion_results])
        for r in report.results
    ]


def test_reports_are_those_of_the_default_thresholds(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    with TraceStore(tmp_path / "store.duckdb") as store:
        store_fixtures(store)
        eval_set = cases_from_traces(store, TraceSelection(), name="fixtures")
        grader = TraceGrader(store, CONFIG)
        before = gc.get_threshold()
        frozen: list[int] = []
        monkeypatch.setattr("tracegrade.evaluation.offline.SET_ASIDE_EVERY", 2)
        real_freeze = gc.freeze

        def freeze() -> None:
            real_freeze()
            frozen.append(gc.get_freeze_count())

        monkeypatch.setattr(gc, "freeze", freeze)
        paced = grader.grade_eval_set_sync(eval_set), grader.grade_traces_sync(TraceSelection())
        assert gc.get_threshold() == before and gc.get_freeze_count() == 0
        assert len(frozen) > 2 and all(count > 0 for count in frozen)  # objects were set aside, then handed back
        # the plain path: thresholds untouched, nothing set aside
        monkeypatch.setattr(collection_pace, "FULL_COLLECTION_EVERY", 0)
        monkeypatch.setattr(collection_pace, "SET_ASIDE_LONG_LIVED", False)
        frozen.clear()
        plain = grader.grade_eval_set_sync(eval_set), grader.grade_traces_sync(TraceSelection())
        assert not frozen
    assert [_scores(r) for r in paced] == [_scores(r) for r in plain]
    assert len(paced[0].results) == len(eval_set.eval_cases) >= len(FIXTURES)


def test_overlapping_scopes_restore_the_thresholds_once_the_last_ends() -> None:
    before = gc.get_threshold()
    seen: list[tuple[int, int, int]] = []

    async def grade(pause: float) -> None:
        with fewer_full_collections():
            await asyncio.sleep(pause)
            seen.append(gc.get_threshold())

    async def both() -> None:
        await asyncio.gather(grade(0.01), grade(0.05))

    asyncio.run(both())
    assert seen == [(before[0], before[1], max(before[2], FULL_COLLECTION_EVERY))] * 2
    assert gc.get_threshold() == before


def test_objects_someone_else_froze_stay_frozen_and_nothing_is_set_aside_outside_a_scope(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[str] = []
    real_freeze, real_unfreeze = gc.freeze, gc.unfreeze
    monkeypatch.setattr(gc, "freeze", lambda: calls.append("freeze") or real_freeze())
    monkeypatch.setattr(gc, "unfreeze", lambda: calls.append("unfreeze") or real_unfreeze())
    collection_pace.set_aside_long_lived()
    assert calls == []
    with fewer_full_collections():
        collection_pace.set_aside_long_lived()
    assert calls == ["freeze", "unfreeze"] and gc.get_freeze_count() == 0
    calls.clear()
    real_freeze()  # someone else's
    try:
        with fewer_full_collections():
            collection_pace.set_aside_long_lived()
        assert calls == [] and gc.get_freeze_count() > 0  # theirs stay frozen: not ours to hand back
    finally:
        real_unfreeze()


def test_what_a_block_builds_is_set_aside_with_the_collector_paused_meanwhile() -> None:
    with fewer_full_collections():
        before = gc.get_freeze_count()
        with collection_pace.building_long_lived():
            assert not gc.isenabled()
            built = [{"call": n} for n in range(1000)]
        assert gc.isenabled() and gc.get_freeze_count() >= before + len(built)
        with pytest.raises(KeyError), collection_pace.building_long_lived():
            raise KeyError("a load that fails")
        assert gc.isenabled()  # a failed block does not leave the collector off
        gc.disable()  # someone else's choice: the block leaves it as it found it
        try:
            with collection_pace.building_long_lived():
                pass
            assert not gc.isenabled()
        finally:
            gc.enable()
    assert gc.get_freeze_count() == 0
    with collection_pace.building_long_lived():  # outside a scope it changes nothing
        assert gc.isenabled()
    assert gc.get_freeze_count() == 0
