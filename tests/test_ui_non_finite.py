"""A run holding a score that is not finite (a NaN judge spread, an infinite duration) is read by the UI's JSON API
as strict JSON, which a browser's or any client's parser accepts: NaN and Infinity are not JSON tokens."""

from __future__ import annotations

import json
import math
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from tests.support.grading_traces import AgentRun, fill_store
from tests.support.ui_client import ui_client
from tracegrade.evaluation.run_records import record_report
from tracegrade.models.results import CriterionResult, EvalCaseResult, EvalReport


def _strict(text: str) -> Any:
    def refuse(token: str) -> Any:
        raise AssertionError(f"{token} is not JSON")

    return json.loads(text, parse_constant=refuse)


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[TestClient]:
    store = fill_store(tmp_path / "store.duckdb", [AgentRun(1, "question", "answer")])
    undefined = CriterionResult(criterion="judge", score=math.nan, passed=False, details={"spread": math.inf})
    for run_id in ("nan-a", "nan-b"):
        case = EvalCaseResult(eval_id="c1", passed=False, criterion_results=[undefined], duration_seconds=math.inf)
        record_report(store, EvalReport.create("odd", [case]), "live", run_id)
    async with ui_client(store) as opened:
        yield opened


@pytest.mark.parametrize("path", ["/ui/api/runs/nan-a", "/ui/api/runs", "/ui/api/diff?a=nan-a&b=nan-b"])
async def test_non_finite_numbers_reach_clients_as_strict_json(client: TestClient, path: str) -> None:
    response = await client.get(path)
    assert response.status == 200, await response.text()
    answer = _strict(await response.text())
    if path == "/ui/api/runs/nan-a":
        (case,) = answer["report"]["results"]
        assert case["criterion_results"][0]["score"] in (None, "NaN")
        assert case["criterion_results"][0]["details"]["spread"] in (None, "Infinity")


async def test_the_run_page_shows_a_run_with_an_undefined_score(client: TestClient) -> None:
    response = await client.get("/ui/runs/nan-a")
    assert response.status == 200, await response.text()
    assert "c1" in await response.text()
