"""Offline grading reads a trace's lean execution (``traces.lean_execution``) unless a criterion reads LLM content.

Real framework traces (tests/data/otlp) are stored and mapped by the real mapper; the lean execution must be
the whole one without its LLM content, with the same token usage, and grading from it must give every score
the whole execution gives. Rows written before the column existed (NULL) are read whole.
"""

from __future__ import annotations

import duckdb
import pytest

from tests.support.store_records import FIXTURES, decode_fixture, store_fixtures
from tracegrade.evaluation.case_export import cases_from_traces
from tracegrade.evaluation.engine import default_evaluator_factory
from tracegrade.evaluation.offline import TraceGrader
from tracegrade.evaluation.selection import TraceSelection, iter_executions, selected_trace_ids
from tracegrade.models.config import CriteriaConfig, CriterionConfig, EvalConfig
from tracegrade.models.execution import LLM_CONTENT_FIELDS
from tracegrade.store import TraceStore

DETERMINISTIC = EvalConfig(
    criteria=CriteriaConfig(
        tool_name_match=CriterionConfig.tool_name_match(),
        trajectory=CriterionConfig.trajectory(check_args=True),
        node_order=CriterionConfig.node_order(),
        rouge_match=CriterionConfig.rouge_match(),
        contains_keywords=CriterionConfig.contains_keywords(["weather", "the"], threshold=0.5),
    )
)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory):
    with TraceStore(tmp_path_factory.mktemp("lean") / "store.duckdb") as opened:
        store_fixtures(opened)
        yield opened


def _whole_and_lean(store: TraceStore) -> list[tuple[object, object]]:
    ids = selected_trace_ids(store, TraceSelection())
    whole = list(iter_executions(store, ids))
    lean = list(iter_executions(store, ids, fields={"tool_calls", "actual_response"}))
    return list(zip(whole, lean))


def test_the_lean_execution_is_the_whole_one_without_its_llm_content(store) -> None:
    pairs = _whole_and_lean(store)
    assert len(pairs) >= len(FIXTURES)
    with_llm_calls = 0
    for whole, lean in pairs:
        assert lean.trace_id == whole.trace_id
        assert lean.execution is not None and whole.execution is not None
        with_llm_calls += bool(whole.execution.llm_calls)
        emptied = whole.execution.model_copy(update={name: [] for name in LLM_CONTENT_FIELDS})
        assert lean.execution == emptied
        assert lean.token_usage == whole.token_usage == whole.execution.token_usage
    assert with_llm_calls >= 3  # the fixtures hold LLM calls whose content the lean form leaves out


def _seen(report) -> list[tuple[object, ...]]:
    return [
        (
            r.eval_id,
            r.passed,
            r.actual_response,
            r.actual_tool_calls,
            r.actual_trajectory,
            r.node_visits,
            r.trace_ids,
            r.agent_token_usage,
            [(c.criterion, c.score, c.passed, c.skipped, c.details) for c in r.criterion_results],
        )
        for r in report.results
    ]


def test_an_eval_set_graded_from_lean_executions_scores_as_from_whole_ones(store) -> None:
    eval_set = cases_from_traces(store, TraceSelection(), name="fixtures")
    lean = TraceGrader(store, DETERMINISTIC).grade_eval_set_sync(eval_set)
    # a custom evaluator may read anything: the whole execution is loaded for it
    whole = TraceGrader(store, DETERMINISTIC, evaluator_factory=default_evaluator_factory).grade_eval_set_sync(eval_set)
    assert _seen(lean) == _seen(whole) and len(lean.results) == len(eval_set.eval_cases) >= len(FIXTURES)
    assert any(r.agent_token_usage.total_tokens for r in lean.results)
    # the LLM-call details stay in the store unless they were loaded
    assert any(r.node_details and r.messages for r in whole.results)
    assert not any(r.node_details or r.messages or r.node_responses for r in lean.results)


def test_rows_stored_before_the_grading_column_are_read_whole(store, tmp_path) -> None:
    eval_set = cases_from_traces(store, TraceSelection(), name="fixtures")
    before = TraceGrader(store, DETERMINISTIC).grade_eval_set_sync(eval_set)
    path = tmp_path / "old.duckdb"
    with TraceStore(path) as old:
        for fixture in FIXTURES:
            spans, logs = decode_fixture(fixture)
            written = old.write(spans, logs)
            old.rebuild_trajectories(sorted(written.trace_ids))
    con = duckdb.connect(str(path))  # as a store migrated from before schema version 9 holds its rows
    con.execute("UPDATE traces SET lean_execution = NULL WHERE trace_id IN (SELECT min(trace_id) FROM traces)")
    con.close()
    with TraceStore(path, read_only=True) as partly:  # one row built before, the others after: read in one group
        assert partly.query("SELECT count(*) FROM traces WHERE lean_execution IS NULL").rows == [(1,)]
        mixed = TraceGrader(partly, DETERMINISTIC).grade_eval_set_sync(eval_set)
    con = duckdb.connect(str(path))
    con.execute("UPDATE traces SET lean_execution = NULL")
    con.close()
    with TraceStore(path, read_only=True) as old:
        assert old.query("SELECT count(*) FROM traces WHERE lean_execution IS NOT NULL").rows == [(0,)]
        after = TraceGrader(old, DETERMINISTIC).grade_eval_set_sync(eval_set)
    assert _seen(after) == _seen(mixed) == _seen(before)
