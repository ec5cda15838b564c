"""Offline grading collects the oldest garbage generation less often (``fewer_full_collections``): the reports are
the ones grading with CPython's own thresholds gives, and the thresholds come back after (overlapping scopes too)."""

from __future__ import annotations

import asyncio
import gc

import pytest

from tests.support.store_records import FIXTURES, decode_fixture
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
        for path in FIXTURES:
            spans, logs = decode_fixture(path)
            store.rebuild_trajectories(sorted(store.write(spans, logs).trace_ids))
        eval_set = cases_from_traces(store, TraceSelection(), name="fixtures")
        grader = TraceGrader(store, CONFIG)
        before = gc.get_threshold()
        paced = grader.grade_eval_set_sync(eval_set), grader.grade_traces_sync(TraceSelection())
        assert gc.get_threshold() == before
        monkeypatch.setattr(collection_pace, "FULL_COLLECTION_EVERY", 0)  # the plain path: thresholds untouched
        plain = grader.grade_eval_set_sync(eval_set), grader.grade_traces_sync(TraceSelection())
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
