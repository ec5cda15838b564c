"""An eval set or config sent inline to MCP ``grade`` is read as the same document in a file is: ADK's eval
sets and configs are taken (``/mcp`` takes documents inline only, so ADK users had no way to grade theirs there),
and a broken document is refused with every problem at its JSON path, as ``tracegrade validate`` lists them,
rather than with pydantic's own report. Checked through the official MCP SDK's client against ``/mcp`` of a real
``tracegrade serve``, and against the same documents read from files."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.grading_traces import AgentRun, fill_store
from tests.support.server_process import ServerProcess
from tracegrade.errors import ConfigError, EvalSetError
from tracegrade.models import EvalConfig, EvalSet

pytest.importorskip("mcp")

QUERY = "Where is my refund?"
RESPONSE = "Your refund was sent."
# ADK's eval set form (genai contents with parts, an invocation id), as ADK's own tools write it
ADK_EVAL_SET = {
    "eval_set_id": "adk-support",
    "eval_cases": [
        {
            "eval_id": "refund",
            "conversation": [
                {
                    "invocation_id": "inv-1",
                    "user_content": {"role": "user", "parts": [{"text": QUERY}]},
                    "final_response": {"role": "model", "parts": [{"text": RESPONSE}]},
                    "intermediate_data": {"tool_uses": []},
                }
            ],
        }
    ],
}
ADK_CONFIG = {"criteria": {"response_match_score": 0.5}}  # ADK's test_config.json: rouge_match
BROKEN_CONFIG = {"criteria": {"contains_keywords": {"keywords": ["refund"], "thresold": 1.0}}}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    store = tmp_path_factory.mktemp("mcp-inline") / "store.duckdb"
    fill_store(store, [AgentRun(1, QUERY, RESPONSE)]).close()
    with ServerProcess(store) as server:
        yield server


def _grade(server: ServerProcess, arguments: dict[str, Any]) -> Any:
    """One MCP ``grade`` call at ``/mcp``; the SDK's CallToolResult."""
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async def run() -> Any:
        async with streamable_http_client(f"{server.http_url}/mcp") as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            return await s.call_tool("grade", arguments)

    return asyncio.run(run())


def _text(result: Any) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


def test_an_adk_eval_set_and_config_sent_inline_are_graded_as_from_files(served: ServerProcess, tmp_path: Path) -> None:
    (tmp_path / "adk.evalset.json").write_text(json.dumps(ADK_EVAL_SET))
    (tmp_path / "test_config.json").write_text(json.dumps(ADK_CONFIG))
    from_files = EvalSet.from_file(tmp_path / "adk.evalset.json"), EvalConfig.from_file(tmp_path / "test_config.json")
    assert [c.eval_id for c in from_files[0].eval_cases] == ["refund"]

    result = _grade(served, {"eval_set": ADK_EVAL_SET, "config": ADK_CONFIG})

    assert not result.is_error, _text(result)
    graded = json.loads(_text(result))
    assert [(c["eval_id"], c["status"]) for c in graded["cases"]] == [("refund", "pass")]
    assert graded["summary"]["passed_cases"] == 1


def test_a_broken_inline_document_is_refused_with_each_problem_at_its_path_as_its_file_is(
    served: ServerProcess, tmp_path: Path
) -> None:
    (tmp_path / "config.json").write_text(json.dumps(BROKEN_CONFIG))
    with pytest.raises(ConfigError) as from_file:
        EvalConfig.from_file(tmp_path / "config.json")
    broken_set = {"eval_set_id": "s", "eval_cases": [{"eval_id": "a", "conversaton": []}]}
    (tmp_path / "set.json").write_text(json.dumps(broken_set))
    with pytest.raises(EvalSetError) as set_from_file:
        EvalSet.from_file(tmp_path / "set.json")

    config_refused = _grade(served, {"config": BROKEN_CONFIG})
    set_refused = _grade(served, {"eval_set": broken_set})

    assert config_refused.is_error and set_refused.is_error
    for refused, error in ((config_refused, from_file.value), (set_refused, set_from_file.value)):
        text = _text(refused)
        assert "errors.pydantic.dev" not in text and "validation error" not in text, text
        assert "given as " in text  # the document is named by the argument it came in
        for where, what in error.problems:  # the same problems, at the same paths, as its file
            assert f"at {where}: {what}" in text, text
    assert "did you mean 'threshold'?" in _text(config_refused)
    assert "did you mean 'conversation'?" in _text(set_refused)
