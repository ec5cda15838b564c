"""Every command that takes --store works on a lake (real PostgreSQL catalog, real Parquet data): grading and
recording runs, listing, diffing and gating them, exporting cases, importing files, a worker pass, the web UI
and the MCP server.

What the same commands do on a DuckDB file is tested elsewhere; here the point is that a lake location
reaches each of them, what needs its data path asks for it, and recorded rows are visible once.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from tests.support import pg_cluster
from tests.support.grading_cli import read_report, run_cli, write_config
from tests.support.grading_traces import AgentRun, fill_store
from tests.support.pg_cluster import PgServer
from tests.support.waiting import wait_until
from tracegrade.models import EvalCase, EvalSet, Invocation, ToolCall
from tracegrade.models.config import CriteriaConfig, CriterionConfig, EvalConfig
from tracegrade.store.lake import LakeStore

pg_server = pg_cluster.pg_server  # the session's PostgreSQL (a fixture)
OTLP_FILE = Path(__file__).parent / "data" / "otlp" / "langgraph_openinference_langchain.otlp.json"
CONFIG = EvalConfig(
    criteria=CriteriaConfig(
        tool_name_match=CriterionConfig.tool_name_match(),
        contains_keywords=CriterionConfig.contains_keywords(["order"]),
    )
)


@pytest.fixture
def lake(pg_server: PgServer, tmp_path: Path) -> tuple[str, Path]:
    """A lake holding three mapped traces (two of them eval cases), a config and an eval set beside it."""
    location, data = f"ducklake:postgres:{pg_server.new_database()}", tmp_path / "lake-data"
    runs = [
        AgentRun(1, "cancel order 5", "order 5 cancelled", [("cancel", {"order": 5})], case_id="cancel"),
        AgentRun(2, "track order 6", "order 6 ships today", [("track", {"order": 6})], case_id="track"),
        AgentRun(3, "hi", "hello", [], start_offset_s=5),
    ]
    fill_store(LakeStore(location, data_path=data), runs).close()
    write_config(tmp_path / "config.json", CONFIG)
    cases = [
        EvalCase(eval_id=case, conversation=[Invocation.simple(query, None, [ToolCall(name=tool)])])
        for case, query, tool in (("cancel", "cancel order 5", "cancel"), ("track", "track order 6", "track"))
    ]
    EvalSet(eval_set_id="orders", eval_cases=cases).to_file(tmp_path / "evalset.json")
    return location, data


def _grade(location: str, tmp_path: Path, *extra: str | Path):
    """``tracegrade grade`` into an emptied ``tmp_path/out`` (read_report finds its report alone there)."""
    config, out = tmp_path / "config.json", tmp_path / "out"
    for old in out.glob("*"):
        old.unlink()
    return run_cli("grade", "--store", location, "--config", config, "--out", out, "--format", "json", *extra)


def _sql(location: str, query: str) -> list[dict]:
    result = run_cli("sql", "--store", location, "--format", "json", query)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_grade_records_runs_that_runs_diff_and_gate_read(lake: tuple[str, Path], tmp_path: Path) -> None:
    location, data = lake
    refused = _grade(location, tmp_path, "--evalset", tmp_path / "evalset.json")
    assert refused.exit_code == 2
    assert "recording the run in a lake needs its data path: add --lake-data PATH" in refused.output
    unrecorded = _grade(location, tmp_path, "--evalset", tmp_path / "evalset.json", "--no-record")
    assert unrecorded.exit_code == 0, unrecorded.output  # grading alone only reads the lake

    first = _grade(location, tmp_path, "--evalset", tmp_path / "evalset.json", "--lake-data", data)
    assert first.exit_code == 0, first.output
    first_id = read_report(tmp_path / "out").metadata["run_id"]
    second = _grade(location, tmp_path, "--where", "tool_calls >= 0", "--lake-data", data)
    second_id = read_report(tmp_path / "out").metadata["run_id"]
    assert second.exit_code == 1  # the greeting has no "order" in it

    listed = run_cli("runs", "--store", location, "--format", "json")
    assert listed.exit_code == 0, listed.output
    assert [(r["run_id"], r["kind"], r["total_cases"], r["passed_cases"]) for r in json.loads(listed.stdout)] == [
        (second_id, "reference_free", 3, 2),
        (first_id, "eval_set", 2, 2),
    ]
    counts = _sql(location, "SELECT run_id, count(*) AS n FROM eval_case_results GROUP BY run_id ORDER BY run_id")
    assert counts == sorted([{"run_id": first_id, "n": 2}, {"run_id": second_id, "n": 3}], key=lambda r: r["run_id"])
    compared = run_cli("diff", "--store", location, first_id, second_id)
    assert compared.exit_code == 0, compared.output
    assert "cancel" in compared.stdout
    gated = run_cli(
        "gate", "--store", location, "--baseline", "latest~1", "--candidate", "latest", "--out", tmp_path / "g"
    )
    # an eval-set run and a reference-free run share no case id: read from the lake, compared, and refused
    assert gated.exit_code == 2, gated.output
    assert f"Baseline `{first_id}` → candidate `{second_id}`" in gated.stdout and "share no case" in gated.stderr


def test_export_cases_from_a_lake_grades_back_as_passing(lake: tuple[str, Path], tmp_path: Path) -> None:
    location, _ = lake
    cases = tmp_path / "exported.json"
    exported = run_cli("export-cases", "--store", location, "--where", "tool_calls > 0", "-o", cases)
    assert exported.exit_code == 0, exported.output
    assert sorted(c.conversation[0].user_content.get_text() for c in EvalSet.from_file(cases).eval_cases) == [
        "cancel order 5",
        "track order 6",
    ]
    graded = _grade(location, tmp_path, "--evalset", cases, "--no-record")
    assert graded.exit_code == 0, graded.output


def test_import_writes_a_file_into_a_lake_once(lake: tuple[str, Path]) -> None:
    location, data = lake
    before = _sql(location, "SELECT count(*) AS n FROM spans")[0]["n"]
    sent = json.loads(OTLP_FILE.read_text(encoding="utf-8"))
    spans = sum(len(s["spans"]) for r in sent["resourceSpans"] for s in r["scopeSpans"])
    first = run_cli("import", "--store", location, "--lake-data", data, OTLP_FILE)
    assert first.exit_code == 0, first.output
    assert f"{spans} spans imported, 0 duplicates skipped" in first.stdout
    again = run_cli("import", "--store", location, "--lake-data", data, OTLP_FILE)
    assert f"0 spans imported, {spans} duplicates skipped" in again.stdout
    assert _sql(location, "SELECT count(*) AS n FROM traces") == [{"n": 4}]  # three before, one imported
    assert _sql(location, "SELECT count(*) AS n FROM spans") == [{"n": before + spans}]


def test_worker_once_grades_the_lake_and_its_jobs_show_in_sql(lake: tuple[str, Path], tmp_path: Path) -> None:
    location, data = lake
    rules = tmp_path / "rules.json"
    rules.write_text(
        json.dumps(
            {
                "rules": [
                    {
                        "name": "orders",
                        "settle_seconds": 0,
                        "include_eval_runs": True,
                        "criteria": {"contains_keywords": {"keywords": ["order"]}},
                    }
                ]
            }
        ),
        encoding="utf-8",
    )
    refused = run_cli("worker", "--rules", rules, "--store", location, "--once")
    assert refused.exit_code == 2 and "grading in a lake needs its data path" in refused.output
    ran = run_cli("worker", "--rules", rules, "--store", location, "--lake-data", data, "--once")
    assert ran.exit_code == 0, ran.output
    assert "ran 3 job(s); jobs by status: {'done': 3}" in ran.stdout
    jobs = _sql(
        location, "SELECT j.trace_id, r.passed FROM grading_jobs j JOIN eval_results r USING (run_id, trace_id)"
    )
    assert sorted((j["trace_id"], j["passed"]) for j in jobs) == [
        (f"{1:032x}", True),
        (f"{2:032x}", True),
        (f"{3:032x}", False),
    ]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_ui_serves_a_lake_read_only(lake: tuple[str, Path], tmp_path: Path) -> None:
    location, data = lake
    assert _grade(location, tmp_path, "--evalset", tmp_path / "evalset.json", "--lake-data", data).exit_code == 0
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRACEGRADE_")}
    ui = subprocess.Popen(
        [sys.executable, "-m", "tracegrade.cli.main", "ui", "--store", location, "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
    )
    try:

        def get(path: str) -> dict | None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as response:
                    return json.loads(response.read())
            except OSError:
                return None

        wait_until(lambda: get("/ui/api/traces") is not None, timeout=60, what="the UI on the lake")
        traces = get("/ui/api/traces")
        assert traces is not None and len(traces["traces"]) == 3
        runs = get("/ui/api/runs")
        assert runs is not None and [(r["kind"], r["total_cases"]) for r in runs["runs"]] == [("eval_set", 2)]
    finally:
        ui.terminate()
        ui.wait(30)


def test_mcp_answers_from_a_lake(lake: tuple[str, Path], tmp_path: Path) -> None:
    from tests.test_mcp_server import TOOLS, _session_calls

    location, data = lake
    assert _grade(location, tmp_path, "--evalset", tmp_path / "evalset.json", "--lake-data", data).exit_code == 0
    calls = [
        ("list_traces", {"tool": "track"}),
        ("run_sql", {"sql": "SELECT count(*) AS n FROM eval_results"}),
        ("list_runs", {}),
    ]
    tools, results = asyncio.run(_session_calls("stdio", location, None, calls))  # type: ignore[arg-type]
    assert tools == TOOLS
    assert not any(r.is_error for r in results), [r.content for r in results if r.is_error]
    tracked, sql, runs = [r.structured_content for r in results]
    assert [t["trace_id"] for t in tracked["traces"]] == [f"{2:032x}"]
    assert sql["rows"] == [[4]]  # two cases, two criteria each
    assert [(r["kind"], r["total_cases"]) for r in runs["runs"]] == [("eval_set", 2)]
