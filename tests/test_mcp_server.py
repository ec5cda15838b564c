"""The MCP tools driven by the official MCP SDK's clients, over both transports: ``tracegrade mcp`` on stdio,
and ``/mcp`` of a real ``tracegrade serve`` over streamable HTTP behind its bearer token. Every tool is listed,
answers from a real store file (traces mapped by the real mapper, runs graded by the real TraceGrader), and
our errors (refused SQL, unknown trace) come back as tool errors the model can read."""

from __future__ import annotations

import os
import shutil
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from tests.support.grading_traces import AgentRun, fill_store, keywords_config
from tests.support.server_process import ServerProcess
from tracegrade.evaluation.offline import TraceGrader, TraceSelection
from tracegrade.evaluation.run_records import record_report

TOOLS = {
    "list_traces",
    "get_trajectory",
    "get_span",
    "run_sql",
    "store_schema",
    "list_runs",
    "failing_cases",
    "diff_runs",
    "grade",
}


@pytest.fixture(scope="module")
def store_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """Four traces (two answer with "refund"), graded twice: run A wants "refund", run B wants "your"."""
    path = tmp_path_factory.mktemp("mcp") / "store.duckdb"
    runs = [
        AgentRun(1, "Where is my refund?", "Your refund was sent.", tools=[("lookup_order", {"id": 1})]),
        AgentRun(2, "Refund status?", "Refund approved.", tools=[("lookup_order", {"id": 2})], start_offset_s=1),
        AgentRun(3, "Hello", "Your welcome message.", start_offset_s=2),
        AgentRun(4, "Weather?", "Sunny.", tools=[("forecast", {"city": "Oslo"})], start_offset_s=3),
    ]
    store = fill_store(path, runs)
    try:
        run_ids = [
            record_report(store, TraceGrader(store, config).grade_traces_sync(TraceSelection()), "reference_free", rid)
            for rid, config in (("run-a", keywords_config("refund")), ("run-b", keywords_config("your")))
        ]
    finally:
        store.close()
    return path, run_ids


TOKEN = "mcp-s3cret"


@pytest.fixture(scope="module")
def served_store(store_file: tuple[Path, list[str]], tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A copy of the store behind a real ``tracegrade serve`` with a bearer token; its HTTP URL."""
    copy = tmp_path_factory.mktemp("mcp-http") / "store.duckdb"
    shutil.copyfile(store_file[0], copy)
    with ServerProcess(copy, extra_args=("--token", TOKEN)) as server:
        yield server.http_url


@pytest.fixture(params=["stdio", "http"])
def transport(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def _session_calls(
    transport: str, store: Path, served: Any, calls: list[tuple[str, dict[str, Any]]]
) -> tuple[set[str], list[Any]]:
    if transport == "http":
        client = create_mcp_http_client(headers={"Authorization": f"Bearer {TOKEN}"})
        async with (
            client,
            streamable_http_client(f"{served()}/mcp", http_client=client) as (read, write),
            ClientSession(read, write) as session,
        ):
            return await _calls(session, calls)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRACEGRADE_")}
    params = StdioServerParameters(
        command=sys.executable,
        args=["-c", "from tracegrade.cli.main import main; main()", "mcp", "--store", str(store)],
        env=env,
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        return await _calls(session, calls)


async def _calls(session: ClientSession, calls: list[tuple[str, dict[str, Any]]]) -> tuple[set[str], list[Any]]:
    await session.initialize()
    tools = {t.name for t in (await session.list_tools()).tools}
    return tools, [await session.call_tool(name, arguments) for name, arguments in calls]


@pytest.fixture
def served(request: pytest.FixtureRequest) -> Any:
    """Starts the served copy only for the HTTP transport's tests."""
    return lambda: request.getfixturevalue("served_store")


async def test_every_tool_is_listed_and_answers_from_the_store(
    store_file: tuple[Path, list[str]], transport: str, served: Any
) -> None:
    path, (run_a, run_b) = store_file
    tools, results = await _session_calls(
        transport,
        path,
        served,
        [
            ("list_traces", {"text": "REFUND"}),
            ("list_traces", {"tool": "forecast"}),
            ("get_trajectory", {"trace_id": f"{1:032x}", "include_spans": True}),
            ("run_sql", {"sql": "SELECT count(*) AS n FROM tool_calls WHERE name = 'lookup_order'"}),
            ("store_schema", {}),
            ("list_runs", {}),
            ("failing_cases", {"run_id": run_a}),
            ("diff_runs", {"run_a": run_a, "run_b": run_b}),
            ("grade", {"config": keywords_config("sunny").model_dump(mode="json"), "trace_ids": [f"{4:032x}"]}),
        ],
    )
    assert tools == TOOLS
    assert not any(r.is_error for r in results), [r.content for r in results if r.is_error]
    refunds, forecasts, trajectory, sql, schema, runs, failing, diff, graded = [r.structured_content for r in results]
    assert {t["user_query"] for t in refunds["traces"]} == {"Where is my refund?", "Refund status?"}
    assert [t["trace_id"] for t in forecasts["traces"]] == [f"{4:032x}"]
    execution = trajectory["execution"]
    assert [c["name"] for c in execution["tool_calls"]] == ["lookup_order"]
    assert execution["user_query"] == "Where is my refund?"
    assert len(trajectory["spans"]) == 4 and {r["run_id"] for r in trajectory["runs"]} == {run_a, run_b}
    assert sql["rows"] == [[2]]
    assert {"traces", "spans", "tool_calls", "eval_runs"} <= set(schema["tables"])
    assert [r["run_id"] for r in runs["runs"]] == [run_b, run_a]
    # run A wants "refund": the greeting and the weather answer fail, each with the criterion's reason
    assert sorted(c["trace_ids"][0] for c in failing["cases"]) == [f"{3:032x}", f"{4:032x}"]
    assert all(c["failing_criteria"][0]["criterion"] == "contains_keywords" for c in failing["cases"])
    assert all(c["failing_criteria"][0]["details"]["missing"] == ["refund"] for c in failing["cases"])
    # run B wants "your": trace 3 improves, trace 2 regresses
    kinds = {c["eval_id"]: c["kind"] for c in diff["cases"]}
    assert kinds[f"trace-{3:032x}"] == "improved" and kinds[f"trace-{2:032x}"] == "regressed"
    assert graded["summary"]["total_cases"] == 1 and graded["summary"]["passed_cases"] == 1


async def test_refused_sql_and_unknown_ids_come_back_as_tool_errors(
    store_file: tuple[Path, list[str]], transport: str, served: Any
) -> None:
    path, _ = store_file
    _, results = await _session_calls(
        transport,
        path,
        served,
        [
            ("run_sql", {"sql": "DELETE FROM spans"}),
            ("run_sql", {"sql": "SELECT * FROM read_csv('/etc/passwd')"}),
            ("get_trajectory", {"trace_id": "f" * 32}),
            ("failing_cases", {"run_id": "no-such-run"}),
            ("list_traces", {"status": "sideways"}),
        ],
    )
    assert all(r.is_error for r in results)
    texts = [r.content[0].text for r in results]
    assert "DELETE statements are not allowed" in texts[0]
    assert "read_csv() is not allowed" in texts[1]
    assert f"no trace {'f' * 32}" in texts[2]
    assert "no grading run 'no-such-run'" in texts[3]
    assert "status must be one of 'ok', 'error', 'span_error'" in texts[4]


def test_mcp_over_http_refuses_a_request_without_the_token(served_store: str) -> None:
    body = b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}'
    for headers in ({}, {"Authorization": "Bearer wrong"}):
        request = urllib.request.Request(
            f"{served_store}/mcp",
            data=body,
            headers={"Content-Type": "application/json", "Accept": "application/json, text/event-stream", **headers},
            method="POST",
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=30)
        assert refused.value.code == 401


async def test_local_grade_reads_regular_files_only_and_says_why_not(
    store_file: tuple[Path, list[str]], tmp_path: Path
) -> None:
    path, _ = store_file
    config_file = tmp_path / "config.json"
    keywords_config("sunny").to_file(config_file)
    _, results = await _session_calls(
        "stdio",
        path,
        None,
        [
            ("grade", {"config_path": str(tmp_path)}),
            ("grade", {"eval_set_path": "/dev/null"}),  # a device: /dev/zero would be read without end
            ("grade", {"config_path": str(config_file), "trace_ids": [f"{4:032x}"]}),
        ],
    )
    directory, device, graded = results
    assert directory.is_error and f"config_path {tmp_path} is a directory" in directory.content[0].text
    assert device.is_error and "eval_set_path /dev/null is not a regular file" in device.content[0].text
    assert not graded.is_error and graded.structured_content["summary"]["passed_cases"] == 1
