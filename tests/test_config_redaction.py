"""Credentials in judge and simulator endpoint URLs (``api_base``) stay out of reports and stored runs."""

from __future__ import annotations

from pathlib import Path

import duckdb

from tests.support.grading_cli import read_report, run_cli, write_config
from tests.support.grading_traces import AgentRun, fill_store
from tracegrade.models import EvalCase, EvalSet, Invocation, ToolCall
from tracegrade.models.config import CriteriaConfig, CriterionConfig, EvalConfig, UserSimulatorConfig
from tracegrade.store.lake_location import redacted

PASSWORD = "hunter2-DO-NOT-LEAK"
QUERY_KEY = "AIzaQUERY-DO-NOT-LEAK"


def test_redacted_hides_url_passwords_and_secret_query_parameters_only() -> None:
    assert redacted(f"https://bob:{PASSWORD}@judge.example:8443/v1?key={QUERY_KEY}&alt=sse") == (
        "https://bob:***@judge.example:8443/v1?key=***&alt=sse"
    )
    assert redacted(f"https://h/v1?alt=json&api_key={QUERY_KEY}") == "https://h/v1?alt=json&api_key=***"
    assert redacted("http://127.0.0.1:4318/v1?model=x") == "http://127.0.0.1:4318/v1?model=x"


def test_api_base_credentials_are_kept_out_of_the_report_files_and_the_store(tmp_path: Path) -> None:
    fill_store(
        tmp_path / "store.duckdb", [AgentRun(1, "track order 6", "order 6 ships", [("track", {})], case_id="t")]
    ).close()
    case = EvalCase(
        eval_id="t", conversation=[Invocation.simple("track order 6", None, [ToolCall(name="track")], None)]
    )
    EvalSet(eval_set_id="orders", eval_cases=[case]).to_file(tmp_path / "evalset.json")
    judge_url = f"https://bob:{PASSWORD}@judge.example/v1?key={QUERY_KEY}"
    config = EvalConfig(
        criteria=CriteriaConfig(
            tool_name_match=CriterionConfig.tool_name_match(),
            # disabled: recorded in config_used, never called
            llm_judge=CriterionConfig(enabled=False, judge_model="openai/judge", api_base=judge_url),
        ),
        user_simulator_config=UserSimulatorConfig(api_base=f"http://sim:{PASSWORD}@127.0.0.1:9/v1"),
    )
    write_config(tmp_path / "config.json", config)
    out = tmp_path / "out"
    result = run_cli(
        "grade", "--store", tmp_path / "store.duckdb", "--evalset", tmp_path / "evalset.json",
        "--config", tmp_path / "config.json", "--out", out, "--format", "json,junit,html",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    used = read_report(out).config_used
    # which endpoint judged stays readable; only the credentials go
    assert used["criteria"]["llm_judge"]["api_base"] == "https://bob:***@judge.example/v1?key=***"
    assert used["user_simulator_config"]["api_base"] == "http://sim:***@127.0.0.1:9/v1"
    written = [path.read_text(encoding="utf-8") for path in out.iterdir()]
    assert len(written) == 3
    assert not any(PASSWORD in text or QUERY_KEY in text for text in written)
    stored = duckdb.connect(str(tmp_path / "store.duckdb"), read_only=True)
    try:
        (config_text, report_text) = stored.execute("SELECT config::VARCHAR, report::VARCHAR FROM eval_runs").fetchone()
    finally:
        stored.close()
    for text in (config_text, report_text):
        assert PASSWORD not in text and QUERY_KEY not in text and "judge.example" in text
