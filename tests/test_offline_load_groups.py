"""Grading an eval set from the store one group of cases at a time: each group's traces are loaded in one query
and freed once its cases are graded, and the report is the one grading everything at once gives."""

from __future__ import annotations

import random

import pytest

from tests.support.store_records import FIXTURES, store_fixtures
from tracegrade.evaluation import offline
from tracegrade.evaluation.case_export import cases_from_traces
from tracegrade.evaluation.offline import TraceGrader, _load_groups
from tracegrade.evaluation.selection import TraceSelection, iter_executions
from tracegrade.models.config import CriteriaConfig, CriterionConfig, EvalConfig
from tracegrade.models.dataset import EvalCase
from tracegrade.store import TraceStore

CONFIG = EvalConfig(
    criteria=CriteriaConfig(
        trajectory=CriterionConfig.trajectory(check_args=True),
        contains_keywords=CriterionConfig.contains_keywords(["weather"], threshold=0.5),
    )
)


def test_groups_cover_every_case_in_order_within_the_limit() -> None:
    rng = random.Random(5)
    pool = [f"t{n}" for n in range(30)]
    for _ in range(300):
        trials = [
            [rng.sample(pool, rng.randint(1, 4)) for _ in range(rng.randint(0, 2))] for _ in range(rng.randint(0, 25))
        ]
        most = rng.randint(1, 8)
        groups = _load_groups(trials, most)
        assert [i for start, stop in groups for i in range(start, stop)] == list(range(len(trials)))
        for start, stop in groups:
            ids = {t for case in trials[start:stop] for trial in case for t in trial}
            assert stop > start and (len(ids) <= most or stop - start == 1)  # only a case too big alone exceeds it
        for start, stop in groups[:-1]:  # a group ends only where the next case would not fit
            with_next = {t for case in trials[start : stop + 1] for trial in case for t in trial}
            assert len(with_next) > most


def _rows(report) -> list[tuple[object, ...]]:
    return [
        (r.eval_id, r.passed, r.error, r.trace_ids, [(c.criterion, c.score, c.details) for c in r.criterion_results])
        for r in report.results
    ]


def test_grading_in_groups_gives_the_report_of_one_load(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    with TraceStore(tmp_path / "store.duckdb") as store:
        store_fixtures(store)
        eval_set = cases_from_traces(store, TraceSelection(), name="fixtures")
        unmatched = EvalCase.single_turn("nowhere", "hi")
        unmatched.metadata["selector"] = {"trace_id": "0" * 32}
        eval_set.eval_cases.insert(1, unmatched)
        loads: list[list[str]] = []

        def counted(store_, trace_ids, chunk=2000, **kwargs):
            loads.append(list(trace_ids))
            return iter_executions(store_, trace_ids, chunk, **kwargs)

        monkeypatch.setattr(offline, "iter_executions", counted)
        grader = TraceGrader(store, CONFIG)
        whole = grader.grade_eval_set_sync(eval_set)
        assert len(loads) == 1
        loads.clear()
        monkeypatch.setattr(offline, "LOAD_CHUNK", 1)
        grouped = grader.grade_eval_set_sync(eval_set)
    matched = len(eval_set.eval_cases) - 1
    assert len(loads) == matched and all(len(ids) == 1 for ids in loads)  # one query per trace, each freed after
    assert _rows(grouped) == _rows(whole)
    assert len(whole.results) == matched + 1 >= len(FIXTURES) + 1
    assert whole.results[1].error and whole.results[1].eval_id == "nowhere"
