"""Eval case ids (and selector trace ids) reach the matching queries as data: a quote, a backslash or a LIKE wildcard
in an id (a NUL in a selector's trace id) matches its traces, in a store file and through ``tracegrade serve``'s query
endpoint alike. (A case id cannot hold a NUL: tests/test_eval_file_ids.py.)"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.grading_traces import AgentRun, fill_store
from tests.support.server_inprocess import running_server
from tracegrade.evaluation.matching import match_cases
from tracegrade.evaluation.selection import QueryableStore
from tracegrade.models import EvalCase, Invocation
from tracegrade.store import RemoteStore

ODD_IDS = ["50%_off", "it's", "back\\slash", "x') OR TRUE --"]


@pytest.fixture(scope="module")
def store_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("odd-ids") / "store.duckdb"
    runs = [AgentRun(n, f"question {n}", "answer", case_id=case_id, run_id="r") for n, case_id in enumerate(ODD_IDS, 1)]
    fill_store(path, runs).close()
    return path


@pytest.fixture(params=["file", "server"])
def store(request: pytest.FixtureRequest, store_file: Path) -> Iterator[QueryableStore]:
    if request.param == "file":
        from tracegrade.store import TraceStore

        with TraceStore(store_file, read_only=True) as opened:
            yield opened
        return
    with running_server(store_file) as server:
        yield RemoteStore(server.http_url)


def _case(eval_id: str, selector: dict[str, object] | None = None) -> EvalCase:
    return EvalCase(
        eval_id=eval_id,
        conversation=[Invocation.simple("not a stored question", None, [], None)],
        metadata={"selector": selector} if selector else {},
    )


def test_case_ids_with_quote_backslash_and_wildcards_match_their_stamped_traces(store: QueryableStore) -> None:
    matches = match_cases(store, [_case(case_id) for case_id in ODD_IDS], eval_set_id="support")
    assert [(m.trace_ids, m.strategy, m.error) for m in matches] == [
        ([f"{n:032x}"], "case_id", None) for n in range(1, len(ODD_IDS) + 1)
    ]


def test_selector_trace_ids_with_odd_characters_are_looked_up_as_data(store: QueryableStore) -> None:
    (found, odd) = match_cases(
        store, [_case("found", {"trace_id": f"{2:032x}"}), _case("odd", {"trace_id": ["q\0'", f"{1:032x}"]})]
    )
    assert (found.trace_ids, found.error) == ([f"{2:032x}"], None)
    assert odd.error is not None and 'not in the store: ["q\\x00\'"]' in odd.error
