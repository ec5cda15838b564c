"""Offline grading's memory: the JSON report is written case by case, the same bytes as dumping it whole; an eval
set's stored executions are parsed a block at a time as its cases ask for them and let go once graded; a chunk of
stored execution texts is let go text by text as it is parsed, an id listed twice still read each time. Each keeps
what the user gets: the reports and results of the plain path."""

from __future__ import annotations

import gc
import json
import weakref
from pathlib import Path

import pytest

from tests.support.store_records import store_fixtures
from tracegrade.evaluation import offline
from tracegrade.evaluation.case_export import cases_from_traces
from tracegrade.evaluation.offline import TraceGrader, _GroupExecutions
from tracegrade.evaluation.selection import TraceSelection, iter_executions
from tracegrade.models.config import CriteriaConfig, CriterionConfig, EvalConfig
from tracegrade.models.results import CriterionResult, EvalCaseResult, EvalReport
from tracegrade.reporters.json_reporter import JSONReporter
from tracegrade.store import TraceStore

CONFIG = EvalConfig(
    criteria=CriteriaConfig(
        trajectory=CriterionConfig.trajectory(check_args=True),
        contains_keywords=CriterionConfig.contains_keywords(["weather"], threshold=0.5),
    )
)

READ = frozenset({"tool_calls", "trajectory", "actual_response", "node_visits"})


@pytest.fixture
def store(tmp_path: Path):
    with TraceStore(tmp_path / "store.duckdb") as opened:
        store_fixtures(opened)
        yield opened


def _odd_report() -> EvalReport:
    """A report with what strict JSON rewrites (NaN, a lone surrogate), text beyond ASCII and a newline in a value."""
    results = [
        EvalCaseResult.success(
            f"case-{n}",
            [CriterionResult(criterion="c", score=float("nan") if n == 1 else 0.5, passed=n != 2, details={"n": n})],
            name=f"café {n}\nline two",
            metadata={"text": "a\ud800b" if n == 2 else "ok", "nested": {"list": [1, 2.5, None, {"k": []}]}},
        )
        for n in range(4)
    ]
    return EvalReport.create("set", results, "odd report", config_used={"x": {}}, metadata={"empty": []})


@pytest.mark.parametrize(
    "options",
    [{}, {"indent": None}, {"indent": 0}, {"indent": 4}, {"include_details": False, "include_actual_response": False}],
)
def test_json_written_case_by_case_is_the_text_of_the_whole(tmp_path: Path, options: dict[str, object]) -> None:
    reporter = JSONReporter(**options)  # type: ignore[arg-type]
    for report in (_odd_report(), _odd_report().model_copy(update={"results": []})):
        whole = reporter.to_json(report) + "\n"
        pieces = list(reporter.pieces(report))
        assert "".join(pieces) == reporter.render(report) == whole
        path = Path(reporter.save(report, tmp_path / "report.json"))
        assert path.read_bytes() == whole.encode("utf-8")
        assert len(json.loads(whole)["results"]) == len(report.results)
        # one piece per case: no piece holds a second case's text
        assert sum('"eval_id"' in piece for piece in pieces) == len(report.results)
        assert all(piece.count('"eval_id"') <= 1 for piece in pieces)


def test_grading_report_written_case_by_case_is_the_whole_text(store: TraceStore, tmp_path: Path) -> None:
    report = TraceGrader(store, CONFIG).grade_eval_set_sync(cases_from_traces(store, TraceSelection()))
    reporter = JSONReporter()
    assert Path(reporter.save(report, tmp_path / "r.json")).read_text("utf-8") == reporter.to_json(report) + "\n"


def test_an_eval_set_s_executions_are_let_go_once_their_last_case_has_them(
    store: TraceStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(offline, "PARSE_AHEAD", 1)
    ids = [row[0] for row in store.query("SELECT trace_id FROM traces ORDER BY trace_id").rows]
    assert len(ids) >= 3
    first, second, third = ids[:3]
    # the second trace is read by two trials (the second and third cases)
    group = _GroupExecutions(store, [[[first]], [[second]], [[second, third]]], READ)
    taken = group.take(first)
    assert taken.execution is not None
    gone = weakref.ref(taken.execution)
    del taken
    once = group.take(second)  # (the reading parsed it last: it holds on to it until it parses the next)
    gc.collect()
    assert gone() is None  # the group no longer holds the first case's execution
    again = group.take(second)
    assert again.execution is once.execution  # one parse for both readers
    kept = weakref.ref(once.execution)  # type: ignore[arg-type]
    del once, again
    assert group.take(third).trace_id == third
    gc.collect()
    assert kept() is None
    with pytest.raises(KeyError, match="not one of this group's traces"):
        group.take("0" * 32)  # every id read: an id the group never had is refused, not waited for


@pytest.mark.parametrize("ahead", [1, 2])
def test_grading_with_executions_parsed_as_needed_gives_the_report_of_parsing_them_all(
    store: TraceStore, monkeypatch: pytest.MonkeyPatch, ahead: int
) -> None:
    eval_set = cases_from_traces(store, TraceSelection())
    eval_set.eval_cases.append(eval_set.eval_cases[0].model_copy(update={"eval_id": "again"}))  # a trace read twice
    grader = TraceGrader(store, CONFIG)
    at_once = grader.grade_eval_set_sync(eval_set)
    monkeypatch.setattr(offline, "PARSE_AHEAD", ahead)  # one or two executions parsed at a time
    in_blocks = grader.grade_eval_set_sync(eval_set)
    strip = {"duration_seconds", "timestamp", "summary"}
    assert in_blocks.model_dump(exclude=strip | {"results"}) == at_once.model_dump(exclude=strip | {"results"})
    assert [r.model_dump(exclude={"duration_seconds"}) for r in in_blocks.results] == [
        r.model_dump(exclude={"duration_seconds"}) for r in at_once.results
    ]
    assert at_once.results[-1].trace_ids == at_once.results[0].trace_ids and not at_once.results[-1].error


def test_a_trace_listed_twice_gets_an_execution_each_time(store: TraceStore) -> None:
    ids = [row[0] for row in store.query("SELECT trace_id FROM traces ORDER BY trace_id").rows][:2]
    listed = [ids[0], ids[1], ids[0]]
    for fields in (READ, None):  # the lean execution and the whole one
        loaded = list(iter_executions(store, listed, fields=fields))
        assert [s.trace_id for s in loaded] == listed
        assert all(s.execution is not None for s in loaded)
        assert loaded[0].execution.model_dump() == loaded[2].execution.model_dump()  # type: ignore[union-attr]
