"""Reference-free grading of stored production traces: selection, deterministic sampling, skipped criteria."""

from __future__ import annotations

import pytest

from tests.support.grading_traces import AgentRun, fill_store
from tracegrade.errors import NoCriteriaError
from tracegrade.evaluation.offline import TraceGrader
from tracegrade.evaluation.selection import TraceSelection, in_sample, selected_trace_ids
from tracegrade.models.config import CriteriaConfig, CriterionConfig, EvalConfig

TRACES = 120
CONFIG = EvalConfig(
    criteria=CriteriaConfig(
        trajectory=CriterionConfig.trajectory(),  # needs an expectation: skipped
        contains_keywords=CriterionConfig.contains_keywords(["refund"]),
    )
)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory):
    runs = [
        AgentRun(
            n,
            f"question {n}",
            "your refund is on its way" if n % 3 else "sorry, I cannot help",
            [("lookup", {"n": n})],
            service="billing" if n % 2 else "support",
            start_offset_s=n,
        )
        for n in range(1, TRACES + 1)
    ]
    with fill_store(tmp_path_factory.mktemp("reffree") / "store.duckdb", runs) as opened:
        yield opened


def grade(store, selection: TraceSelection, config: EvalConfig = CONFIG):
    return TraceGrader(store, config).grade_traces_sync(selection)


def test_reference_free_grades_with_usable_criteria_and_skips_the_rest(store) -> None:
    report = grade(store, TraceSelection(where="service_name = 'billing'"))
    assert len(report.results) == TRACES // 2
    assert report.metadata["skipped_criteria"] == ["tool_trajectory_avg_score"]
    for result in report.results:
        keywords = result.get_criterion_result("contains_keywords")
        trajectory = result.get_criterion_result("tool_trajectory_avg_score")
        assert trajectory.skipped and "needs an expectation" in trajectory.reason
        assert result.passed == ("refund" in result.actual_response)
        assert keywords.passed == result.passed and not keywords.skipped
        assert result.trace_ids and result.eval_id == f"trace-{result.trace_ids[0]}"
    stats = report.summary.criterion_stats
    assert stats["tool_trajectory_avg_score"].skipped == TRACES // 2 and stats["tool_trajectory_avg_score"].total == 0
    assert 0 < report.summary.failed_cases < TRACES // 2


def test_sampling_is_deterministic_by_trace_id_and_nested(store) -> None:
    everything = set(selected_trace_ids(store, TraceSelection()))
    half = selected_trace_ids(store, TraceSelection(sample=0.5))
    assert half == selected_trace_ids(store, TraceSelection(sample=0.5))  # stable across runs
    quarter = set(selected_trace_ids(store, TraceSelection(sample=0.25)))
    assert quarter < set(half) < everything  # a larger rate keeps what a smaller one picked
    assert 0.3 * TRACES < len(half) < 0.7 * TRACES
    assert set(half) == {t for t in everything if in_sample(t, 0.5)}  # SQL and Python agree
    assert set(selected_trace_ids(store, TraceSelection(sample=1.0))) == everything
    graded = grade(store, TraceSelection(sample=0.5))
    assert [r.trace_ids[0] for r in graded.results] == half


def test_limit_takes_the_newest_and_since_filters_by_time(store) -> None:
    newest = selected_trace_ids(store, TraceSelection(limit=5))
    assert newest == [f"{n:032x}" for n in range(TRACES, TRACES - 5, -1)]
    after = selected_trace_ids(store, TraceSelection(since="2026-01-01T00:01:50Z"))  # offsets >= 110 s
    assert sorted(after) == [f"{n:032x}" for n in range(110, TRACES + 1)]


def test_only_reference_needing_criteria_is_refused(store) -> None:
    config = EvalConfig(criteria=CriteriaConfig(trajectory=CriterionConfig.trajectory()))
    with pytest.raises(NoCriteriaError, match="tool_trajectory_avg_score need expectations"):
        grade(store, TraceSelection(), config)


@pytest.mark.parametrize(
    ("selection", "message"),
    [
        (TraceSelection(sample=0.0), "--sample must be a fraction in \\(0, 1\\]"),
        (TraceSelection(sample=1.5), "--sample must be a fraction"),
        (TraceSelection(since="yesterday-ish"), "cannot read --since"),
        (TraceSelection(limit=0), "--limit must be at least 1"),
    ],
)
def test_bad_selection_values(store, selection: TraceSelection, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        grade(store, selection)


def test_lean_loading_grades_like_the_full_execution(store) -> None:
    """The default engine with built-in criteria loads only what they read; any other factory gets the full
    stored execution. Both must agree on every score and on what the trace did."""
    from tracegrade.evaluation.engine import default_evaluator_factory

    selection = TraceSelection(sample=0.5)
    lean = TraceGrader(store, CONFIG).grade_traces_sync(selection)
    full = TraceGrader(store, CONFIG, evaluator_factory=default_evaluator_factory).grade_traces_sync(selection)

    def seen(report):
        return [
            (
                r.eval_id,
                r.passed,
                r.actual_response,
                r.actual_tool_calls,
                r.node_visits,
                r.agent_token_usage,
                [(c.criterion, c.score, c.passed, c.skipped) for c in r.criterion_results],
            )
            for r in report.results
        ]

    assert seen(lean) == seen(full) and len(lean.results) > 10
