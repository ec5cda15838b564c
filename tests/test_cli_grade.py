"""``tracegrade grade`` and ``tracegrade runs`` on a store file: reports, exit codes, recorded runs, bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from tests.support.grading_cli import eval_runs, read_report, run_cli, write_config
from tests.support.grading_traces import AgentRun, fill_store
from tracegrade.evaluation.selection import in_sample
from tracegrade.models import EvalCase, EvalSet, Invocation, ToolCall
from tracegrade.models.config import REDACTED, CriteriaConfig, CriterionConfig, EvalConfig, UserSimulatorConfig

CONFIG = EvalConfig(
    criteria=CriteriaConfig(
        tool_name_match=CriterionConfig.tool_name_match(),
        node_order=CriterionConfig.node_order(),
        contains_keywords=CriterionConfig.contains_keywords(["order"]),
    )
)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    runs = [
        AgentRun(1, "cancel order 5", "order 5 cancelled", [("cancel", {"order": 5})], case_id="cancel"),
        AgentRun(2, "track order 6", "order 6 ships today", [("track", {"order": 6})], case_id="track"),
        AgentRun(3, "hi", "hello", [], start_offset_s=5),
    ]
    fill_store(tmp_path / "store.duckdb", runs).close()
    write_config(tmp_path / "config.json", CONFIG)
    cases = [
        EvalCase(
            eval_id="cancel",
            conversation=[
                Invocation.simple("cancel order 5", None, [ToolCall(name="cancel")], ["planner", "responder"])
            ],
        ),
        EvalCase(
            eval_id="track",
            conversation=[Invocation.simple("track order 6", None, [ToolCall(name="track")], ["planner", "responder"])],
        ),
    ]
    EvalSet(eval_set_id="orders", eval_cases=cases).to_file(tmp_path / "evalset.json")
    return tmp_path


def grade(ws: Path, *extra: str):
    return run_cli(
        "grade",
        "--store",
        ws / "store.duckdb",
        "--config",
        ws / "config.json",
        "--out",
        ws / "out",
        "--format",
        "json,junit",
        *extra,
    )


def test_grade_eval_set_writes_reports_records_the_run_and_exits_0(workspace: Path) -> None:
    result = grade(workspace, "--evalset", workspace / "evalset.json")
    assert result.exit_code == 0, result.output
    report = read_report(workspace / "out")
    assert [r.eval_id for r in report.results] == ["cancel", "track"] and report.passed
    assert len(list((workspace / "out").glob("*_junit.xml"))) == 1
    runs = eval_runs(workspace / "store.duckdb")
    assert runs == [(report.metadata["run_id"], "eval_set", 2, 2)]
    listed = run_cli("runs", "--store", workspace / "store.duckdb", "--format", "json")
    assert [r["run_id"] for r in json.loads(listed.stdout)] == [runs[0][0]]


def test_grade_exits_1_when_a_case_fails(workspace: Path) -> None:
    eval_set = EvalSet.from_file(workspace / "evalset.json")
    eval_set.eval_cases[1].conversation[0].expected_tool_trajectory = [ToolCall(name="refund")]
    eval_set.to_file(workspace / "evalset.json")
    result = grade(workspace, "--evalset", workspace / "evalset.json")
    assert result.exit_code == 1, result.output
    report = read_report(workspace / "out")
    assert [r.passed for r in report.results] == [True, False]


def test_reference_free_cli_with_sample_records_its_kind(workspace: Path) -> None:
    result = grade(workspace, "--sample", "0.5", "--where", "tool_calls >= 0")
    report = read_report(workspace / "out")
    everything = [f"{n:032x}" for n in (1, 2, 3)]
    assert sorted(r.trace_ids[0] for r in report.results) == [t for t in everything if in_sample(t, 0.5)]
    assert report.metadata["skipped_criteria"] == ["tool_name_match_score", "node_order_score"]
    assert all(r.get_criterion_result("node_order_score").skipped for r in report.results)
    assert result.exit_code == (0 if report.passed else 1)
    assert [r[1] for r in eval_runs(workspace / "store.duckdb")] == ["reference_free"]
    only_eval_sets = run_cli("runs", "--store", workspace / "store.duckdb", "--kind", "eval_set", "--format", "json")
    assert json.loads(only_eval_sets.stdout) == []


def test_no_record_leaves_the_store_alone(workspace: Path) -> None:
    result = grade(workspace, "--evalset", workspace / "evalset.json", "--no-record")
    assert result.exit_code == 0
    assert eval_runs(workspace / "store.duckdb") == []


def _bad_eval_set(ws: Path) -> list[str]:
    (ws / "broken.json").write_text('{"eval_set_id": "x", "eval_cases": [{"eval_id": 3,', encoding="utf-8")
    return ["--evalset", str(ws / "broken.json")]


def _wrong_eval_set(ws: Path) -> list[str]:
    (ws / "wrong.json").write_text('{"eval_set_id": "x", "eval_cases": [{"conversation": "no"}]}', encoding="utf-8")
    return ["--evalset", str(ws / "wrong.json")]


def _no_criteria(ws: Path) -> list[str]:
    write_config(ws / "config.json", EvalConfig(criteria=CriteriaConfig()))
    return ["--evalset", str(ws / "evalset.json")]


@pytest.mark.parametrize(
    ("make_args", "message"),
    [
        (lambda ws: ["--where", "no_such_column > 3"], "--where 'no_such_column > 3' is not a valid predicate"),
        (lambda ws: ["--where", "TRUE; DELETE FROM traces"], "is not a valid predicate"),
        (lambda ws: ["--since", "last tuesday"], "cannot read --since 'last tuesday'"),
        (lambda ws: ["--sample", "2"], "--sample must be a fraction in (0, 1], got 2.0"),
        (_bad_eval_set, "broken.json"),
        (_wrong_eval_set, "$.eval_cases[0].conversation"),
        (_no_criteria, "at $.criteria: no criterion is enabled"),  # what `validate` says
        (lambda ws: ["--evalset", str(ws / "evalset.json"), "--where", "TRUE"], "drop --evalset"),
        # a selection of no trace: no empty run (reported as ALL FAILED, and a gate's baseline) is recorded
        (
            lambda ws: ["--where", "service_name = 'nobody'"],
            """matched --where "service_name = 'nobody'"; nothing graded and no run recorded: widen the selection""",
        ),
        (lambda ws: ["--since", "2099-01-01", "--sample", "0.5"], "matched --since '2099-01-01' and --sample 0.5;"),
    ],
)
def test_bad_input_is_a_clear_error_and_writes_nothing(workspace: Path, make_args, message: str) -> None:
    grade(workspace, "--evalset", workspace / "evalset.json")  # one run recorded before
    before = eval_runs(workspace / "store.duckdb")
    out = workspace / "bad-out"
    result = run_cli(
        "grade",
        "--store",
        workspace / "store.duckdb",
        "--config",
        workspace / "config.json",
        "--out",
        out,
        *make_args(workspace),
    )
    assert result.exit_code == 2, result.output
    assert message in result.stderr
    assert "Traceback" not in result.output
    assert not out.exists()
    assert eval_runs(workspace / "store.duckdb") == before


def test_missing_store_is_an_error_and_creates_nothing(workspace: Path) -> None:
    missing = workspace / "nowhere" / "store.duckdb"
    result = run_cli(
        "grade",
        "--store",
        missing,
        "--evalset",
        workspace / "evalset.json",
        "--config",
        workspace / "config.json",
        "--out",
        workspace / "out",
    )
    assert result.exit_code == 2
    assert f"store not found: {missing}" in result.stderr
    assert not missing.parent.exists() and not (workspace / "out").exists()
    runs = run_cli("runs", "--store", missing)
    assert runs.exit_code == 2 and "store not found" in runs.stderr and not missing.exists()


def test_reference_free_grading_of_an_empty_store_says_so_and_records_nothing(tmp_path: Path) -> None:
    fill_store(tmp_path / "empty.duckdb", []).close()
    write_config(tmp_path / "config.json", CONFIG)
    result = run_cli("grade", "--store", tmp_path / "empty.duckdb", "--config", tmp_path / "config.json")
    assert result.exit_code == 2, result.output
    assert f"{tmp_path / 'empty.duckdb'} holds no traces; nothing graded and no run recorded" in result.stderr
    assert eval_runs(tmp_path / "empty.duckdb") == []


def test_reference_free_grading_of_a_tenant_without_traces_names_the_tenant(workspace: Path) -> None:
    # the store holds the default tenant's traces: a mistyped --tenant is no empty store
    store, config = workspace / "store.duckdb", workspace / "config.json"
    result = run_cli("grade", "--store", store, "--tenant", "nobody", "--config", config)
    assert result.exit_code == 2, result.output
    assert f"tenant 'nobody' has no traces in {store}; nothing graded and no run recorded (check --tenant" in (
        result.stderr
    )
    assert "holds no traces" not in result.stderr
    narrowed = run_cli("grade", "--store", store, "--tenant", "nobody", "--config", config, "--since", "1h")
    assert narrowed.exit_code == 2 and f"no trace of tenant 'nobody' in {store} matched --since" in narrowed.stderr
    assert eval_runs(store) == []


def test_an_eval_set_matching_no_trace_records_each_case_as_an_error(workspace: Path) -> None:
    """Unlike an empty selection, every case of an eval set is a result: one that matched nothing says why."""
    unmatched = EvalCase(eval_id="lost", conversation=[Invocation.simple("nobody asked this", None, [], None)])
    EvalSet(eval_set_id="orders", eval_cases=[unmatched]).to_file(workspace / "evalset.json")
    result = grade(workspace, "--evalset", workspace / "evalset.json")
    assert result.exit_code == 1, result.output
    (case,) = read_report(workspace / "out").results
    assert case.is_error and "no trace matches case 'lost'" in (case.error or "")
    assert [run[1:] for run in eval_runs(workspace / "store.duckdb")] == [("eval_set", 1, 0)]


def test_api_keys_in_the_config_are_not_recorded_in_reports_or_the_store(workspace: Path) -> None:
    secret = "sk-test-DO-NOT-LEAK-4242"
    config = CONFIG.model_copy(deep=True)
    config.criteria.llm_judge = CriterionConfig(
        enabled=False, judge_model="openai/judge", api_key=secret, api_base="http://127.0.0.1:9/v1"
    )
    config.user_simulator_config = UserSimulatorConfig(api_key=secret)
    write_config(workspace / "config.json", config)
    result = grade(workspace, "--evalset", workspace / "evalset.json")
    assert result.exit_code == 0, result.output
    report = read_report(workspace / "out")
    assert report.config_used["criteria"]["llm_judge"]["api_key"] == REDACTED
    assert report.config_used["user_simulator_config"]["api_key"] == REDACTED
    assert report.config_used["criteria"]["llm_judge"]["api_base"] == "http://127.0.0.1:9/v1"  # only keys go
    written = [path.read_text() for path in (workspace / "out").iterdir()]
    assert len(written) == 2 and not any(secret in text for text in written)
    stored = duckdb.connect(str(workspace / "store.duckdb"), read_only=True)
    try:
        (config_text, report_text) = stored.execute("SELECT config, report FROM eval_runs").fetchone()
    finally:
        stored.close()
    assert secret not in config_text and secret not in report_text and REDACTED in config_text


def test_a_console_reader_that_goes_away_does_not_cost_the_files_or_the_recorded_run(workspace: Path) -> None:
    # `tracegrade grade … | head`: the pipe is closed before the console report is printed
    command = [sys.executable, "-m", "tracegrade.cli.main", "grade", "--store", str(workspace / "store.duckdb")]
    command += ["--config", str(workspace / "config.json"), "--evalset", str(workspace / "evalset.json")]
    command += ["--out", str(workspace / "out"), "--format", "console,json,junit", "--verbose"]
    grading = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert grading.stdout is not None
    grading.stdout.close()
    _, stderr = grading.communicate(timeout=120)
    assert grading.returncode == 0, stderr.decode()
    assert b"Traceback" not in stderr and b"Exception ignored" not in stderr
    report = read_report(workspace / "out")
    assert report.passed and len(list((workspace / "out").glob("*_junit.xml"))) == 1
    assert eval_runs(workspace / "store.duckdb") == [(report.metadata["run_id"], "eval_set", 2, 2)]


def test_the_configs_reporter_settings_apply_beside_the_command_line_choices(workspace: Path) -> None:
    config = CONFIG.model_copy(deep=True)
    config.reporter.timestamp_files = False
    config.reporter.html = True  # the command line's --format decides which files: not this
    write_config(workspace / "config.json", config)
    result = grade(workspace, "--evalset", workspace / "evalset.json")
    assert result.exit_code == 0, result.output
    assert sorted(path.name for path in (workspace / "out").iterdir()) == ["orders.json", "orders_junit.xml"]
