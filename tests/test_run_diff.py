"""``tracegrade diff``: a planted regression (a stored trajectory changes between two grading runs)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.grading_cli import eval_runs, run_cli, write_config
from tests.support.grading_traces import BASE_NS, AgentRun, fill_store
from tracegrade.evaluation.run_diff import diff_reports
from tracegrade.models import EvalCase, EvalSet, Invocation, ToolCall
from tracegrade.models.config import CriteriaConfig, CriterionConfig, EvalConfig
from tracegrade.models.span import SpanRecord
from tracegrade.store import TraceStore

CONFIG = EvalConfig(
    criteria=CriteriaConfig(
        tool_name_match=CriterionConfig.tool_name_match(),
        trajectory=CriterionConfig.trajectory(check_args=True),
        contains_keywords=CriterionConfig.contains_keywords(["order"]),
    )
)
TRACK = f"{2:032x}"


def _setup(tmp_path: Path) -> Path:
    runs = [
        AgentRun(1, "cancel order 5", "order 5 cancelled", [("cancel", {"order": 5})], case_id="cancel"),
        AgentRun(2, "track order 6", "order 6 ships today", [("track", {"order": 6})], case_id="track"),
    ]
    fill_store(tmp_path / "store.duckdb", runs).close()
    write_config(tmp_path / "config.json", CONFIG)
    cases = [
        EvalCase(
            eval_id="cancel", conversation=[Invocation.simple("x", None, [ToolCall(name="cancel", args={"order": 5})])]
        ),
        EvalCase(
            eval_id="track", conversation=[Invocation.simple("x", None, [ToolCall(name="track", args={"order": 6})])]
        ),
    ]
    EvalSet(eval_set_id="orders", eval_cases=cases).to_file(tmp_path / "evalset.json")
    return tmp_path


def _grade(ws: Path) -> str:
    result = run_cli(
        "grade",
        "--store",
        ws / "store.duckdb",
        "--evalset",
        ws / "evalset.json",
        "--config",
        ws / "config.json",
        "--out",
        ws / "out",
        "--format",
        "json",
    )
    assert result.exit_code in (0, 1), result.output
    listed = json.loads(run_cli("runs", "--store", ws / "store.duckdb", "--format", "json").stdout)
    return listed[0]["run_id"]  # newest first


def _plant_extra_tool_call(store_path: Path) -> None:
    """The agent behind trace TRACK now also refunds: one more tool span, trajectory rebuilt."""
    with TraceStore(store_path) as store:
        (root,) = store.query("SELECT span_id FROM spans WHERE trace_id = ? AND parent_span_id IS NULL", [TRACK]).rows[
            0
        ]
        start = BASE_NS + 50_000_000
        store.write(
            [
                SpanRecord(
                    trace_id=TRACK,
                    span_id="00000000000fffff",
                    name="refund",
                    start_ns=start,
                    end_ns=start + 1000,
                    parent_span_id=root,
                    resource={"service.name": "support-bot"},
                    attributes={
                        "tracegrade.span.kind": "tool",
                        "tracegrade.tool.name": "refund",
                        "tracegrade.tool.arguments": '{"order": 6}',
                    },
                )
            ]
        )
        store.rebuild_trajectories([TRACK])


def test_diff_shows_the_planted_regression(tmp_path: Path) -> None:
    ws = _setup(tmp_path)
    run_a = _grade(ws)
    _plant_extra_tool_call(ws / "store.duckdb")
    run_b = _grade(ws)
    assert run_a != run_b and len(eval_runs(ws / "store.duckdb")) == 2

    result = run_cli("diff", "--store", ws / "store.duckdb", run_a, run_b, "--format", "json")
    assert result.exit_code == 0, result.output
    diff = json.loads(result.stdout)
    cases = {c["eval_id"]: c for c in diff["cases"]}
    assert diff["summary"]["regressed"] == 1 and diff["summary"]["unchanged"] == 1
    track = cases["track"]
    assert (track["kind"], track["status_a"], track["status_b"]) == ("regressed", "pass", "fail")
    changed = {c["criterion"]: c for c in track["criteria"] if c["kind"] != "unchanged"}
    assert list(changed) == ["tool_trajectory_avg_score"]
    assert changed["tool_trajectory_avg_score"]["score_a"] > changed["tool_trajectory_avg_score"]["score_b"]
    assert changed["tool_trajectory_avg_score"]["kind"] == "regressed"
    assert track["trajectory_changes"] == ["tool calls: ['track'] -> ['track', 'refund']"]
    assert cases["cancel"]["kind"] == "unchanged" and cases["cancel"]["trajectory_changes"] == []

    table = run_cli("diff", "--store", ws / "store.duckdb", run_a, run_b, "--fail-on-regression")
    assert table.exit_code == 1
    assert "1 regressed" in table.stdout and "'refund'" in table.stdout  # rich wraps long cells

    backwards = json.loads(run_cli("diff", "--store", ws / "store.duckdb", run_b, run_a, "--format", "json").stdout)
    assert {c["eval_id"]: c["kind"] for c in backwards["cases"]} == {"track": "improved", "cancel": "unchanged"}


def test_unknown_run_is_a_clear_error(tmp_path: Path) -> None:
    ws = _setup(tmp_path)
    run_a = _grade(ws)
    result = run_cli("diff", "--store", ws / "store.duckdb", run_a, "run-nope")
    assert result.exit_code == 2 and "no grading run 'run-nope'" in result.stderr


def test_diff_reports_added_and_removed_cases() -> None:
    from tracegrade.models.results import CriterionResult, EvalCaseResult, EvalReport

    def report(*ids: str) -> EvalReport:
        results = [EvalCaseResult.success(i, [CriterionResult.success("c", 1.0, 0.5)]) for i in ids]
        return EvalReport.create("s", results)

    diff = diff_reports(report("a", "b"), report("b", "c"))
    assert {c.eval_id: c.kind for c in diff.cases} == {"a": "removed", "b": "unchanged", "c": "added"}
