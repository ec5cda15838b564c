"""MCP defects a QA pass found, each checked through the official MCP SDK's client against a real server
(``tracegrade mcp`` on stdio, ``/mcp`` of a real ``tracegrade serve``): GET /mcp answers 405 (the endpoint is
stateless and offers no SSE stream), ``run_sql`` on stdio stops at the web UI's SQL time limit, ``grade`` checks
the trace selection first and names its own arguments and the config's slots in its errors, and an argument a
tool does not take is refused."""

from __future__ import annotations

import os
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.grading_traces import AgentRun, fill_store, keywords_config
from tests.support.server_process import ServerProcess
from tracegrade.models.config import CriterionConfig

pytest.importorskip("mcp")

TRACE = f"{1:032x}"
# the web UI's SQL time limit, lowered for the stdio server under test (the same constant decides both)
LAUNCH_WITH_SQL_LIMIT = (
    "import tracegrade.ui.app as ui; ui.SQL_TIMEOUT = 2.0; from tracegrade.cli.main import main; main()"
)
LAUNCH = "from tracegrade.cli.main import main; main()"
RUNAWAY = "select count(*) from range(100000000000)"  # over a minute unless stopped


@pytest.fixture(scope="module")
def store_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("mcp-qa") / "store.duckdb"
    fill_store(path, [AgentRun(1, "Where is my refund?", "Your refund was sent.")]).close()
    return path


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with ServerProcess(tmp_path_factory.mktemp("mcp-qa-http") / "store.duckdb") as server:
        yield server


async def _stdio_calls(
    store: Path, calls: list[tuple[str, dict[str, Any]]], launch: str = LAUNCH, timeout: float | None = None
) -> list[Any]:
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    env = {k: v for k, v in os.environ.items() if not k.startswith("TRACEGRADE_")}
    params = StdioServerParameters(command=sys.executable, args=["-c", launch, "mcp", "--store", str(store)], env=env)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        return [await session.call_tool(name, arguments, read_timeout_seconds=timeout) for name, arguments in calls]


async def _http_call(url: str, name: str, arguments: dict[str, Any]) -> Any:
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async with streamable_http_client(f"{url}/mcp") as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        return await session.call_tool(name, arguments)


def _text(result: Any) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


def _texts(results: list[Any]) -> list[str]:
    assert all(r.is_error for r in results), [_text(r) for r in results if not r.is_error]
    return [_text(r) for r in results]


def test_get_and_delete_on_mcp_answer_405_allowing_post_and_log_nothing(served: ServerProcess) -> None:
    url = f"{served.http_url}/mcp"
    for method in ("GET", "DELETE"):
        request = urllib.request.Request(url, headers={"Accept": "text/event-stream"}, method=method)
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=10).close()
        assert refused.value.code == 405, method
        assert refused.value.headers["Allow"] == "POST"
    log = served.log_path.read_text(errors="replace")
    assert "Error in standalone SSE" not in log and "Traceback" not in log


async def test_an_unknown_argument_is_refused_naming_it_and_the_accepted_ones(
    store_file: Path, served: ServerProcess
) -> None:
    over_http = await _http_call(served.http_url, "list_traces", {"bogus": 1})
    stdio = await _stdio_calls(
        store_file,
        [
            ("list_traces", {"bogus": 1, "limit": 5}),
            ("grade", {"config": keywords_config("refund").model_dump(mode="json"), "trace_id": [TRACE]}),
            ("store_schema", {"tables": "all"}),
        ],
    )
    listing, grading, schema = _texts([over_http, *stdio])[1:]
    for text in (_text(over_http), listing):
        assert "unknown argument 'bogus'" in text and "text, status, service" in text and "limit, cursor" in text
    assert "unknown argument 'trace_id'" in grading and "trace_ids, where, limit" in grading
    assert "unknown argument 'tables'" in schema and "takes no arguments" in schema


async def test_stdio_run_sql_stops_at_the_web_uis_sql_time_limit(store_file: Path) -> None:
    [stopped] = await _stdio_calls(
        store_file, [("run_sql", {"sql": RUNAWAY})], launch=LAUNCH_WITH_SQL_LIMIT, timeout=30
    )
    assert stopped.is_error and "ran longer than its time limit of 2 s" in _text(stopped)


async def test_grade_checks_the_selection_first_and_names_its_own_arguments(store_file: Path) -> None:
    keywords = keywords_config("refund").model_dump(mode="json")
    judge = {"criteria": {"llm_judge": CriterionConfig.llm_judge().model_dump(mode="json", exclude_none=True)}}
    results = await _stdio_calls(
        store_file,
        [
            ("grade", {"config": keywords, "limit": -5}),
            ("grade", {"config": keywords, "where": "1=1) OR (1=1"}),
            ("grade", {"config": keywords, "where": "nosuchcol = 1"}),
            ("grade", {"config": keywords, "trace_ids": ["nope", TRACE]}),
            ("grade", {"limit": -5}),  # no config: the selection's own error, not the criteria's
            ("grade", {"where": "nosuchcol = 1"}),
            ("grade", {"trace_ids": ["nope"]}),
            ("grade", {"config": keywords, "trace_ids": []}),
            ("grade", {"config": judge}),
            ("grade", {}),
        ],
    )
    limit, paren, column, unknown, bare_limit, bare_column, bare_unknown, empty, judged, default = _texts(results)
    for text in (limit, bare_limit):
        assert ": limit must be at least 1, got -5" in text, text
    assert ": where '1=1) OR (1=1' closes a parenthesis" in paren, paren
    for text in (column, bare_column):
        assert ": where 'nosuchcol = 1' is not a valid condition on the traces table" in text, text
        assert "nosuchcol" in text.split("table", 1)[1]  # the store's own reason follows
    for text in (unknown, bare_unknown):
        assert "trace_ids names traces the store does not hold: 'nope'" in text and TRACE not in text
    assert "trace_ids is empty" in empty
    assert "--" not in "".join((limit, paren, column))
    assert "config.criteria.llm_judge needs an eval case's expectations" in judged
    assert "final_response_match_v2" not in judged
    assert "the default criteria (trajectory, rouge_match) need an eval case's expectations" in default
    for text in (judged, default):
        assert "give config with a reference-free criterion" in text and "contains_keywords" in text
        assert "or give eval_set" in text
    [graded] = await _stdio_calls(store_file, [("grade", {"config": keywords, "trace_ids": [TRACE], "limit": 1})])
    assert not graded.is_error and graded.structured_content["summary"]["passed_cases"] == 1
