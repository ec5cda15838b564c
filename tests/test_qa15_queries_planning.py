"""A query whose plan alone is costly is refused before DuckDB plans it: DuckDB's optimizer does not check for an
interrupt, so a join of ~100 tables (minutes of planning) or thousands of UNION branches (gigabytes) ran on past
``--query-timeout``, holding one of the receiver's query turns and a core; and megabytes of SQL cost seconds and
gigabytes to parse, check and plan before the time limit starts. Through a real ``tracegrade serve``, on
``/v1/query`` and the UI's SQL page, the receiver refuses them at once, still runs a query at the limits, and keeps
ingesting; a SQL assertion over too many tables is refused when its config is built."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from tests.support.server_otlp import post
from tests.support.server_process import ServerProcess
from tests.support.server_requests import query, send_span
from tests.support.waiting import wait_until
from tracegrade.evaluation.selection import TraceSelection, selected_trace_ids, selection_sql
from tracegrade.models.config import CriteriaConfig, SqlAssertion
from tracegrade.store import RemoteStore
from tracegrade.store.readonly import MAX_QUERY_CHARS, MAX_QUERY_RELATIONS, MAX_QUERY_SELECTS


def _joined(tables: int) -> str:
    """A self-join of ``spans`` chained on equalities: what the optimizer spends longest on."""
    names = ", ".join(f"spans s{i}" for i in range(tables))
    chain = " AND ".join(f"s{i}.trace_id = s{i + 1}.trace_id" for i in range(tables - 1))
    return f"SELECT count(*) AS n FROM {names} WHERE {chain}"


def _unioned(selects: int) -> str:
    return " UNION ALL ".join(f"SELECT {i} AS n" for i in range(selects))


TOO_MANY_TABLES = _joined(100)  # planned for 20 s and more past a 2 s time limit before the fix
TOO_MANY_SELECTS = _unioned(2_000)
MANY_IDS = [f"{i:032x}" for i in range(40_000)]
TOO_LONG = "SELECT count(*) FROM spans WHERE trace_id IN (" + ", ".join(f"'{i}'" for i in MANY_IDS) + ")"


def _post(url: str, path: str, sql: str) -> tuple[int, str]:
    reply = post(f"{url}{path}", json.dumps({"sql": sql}).encode(), "application/json")
    return reply.status, reply.body.decode()


@pytest.mark.parametrize("path", ["/v1/query", "/ui/api/sql"])
def test_the_receiver_refuses_queries_too_costly_to_plan_and_keeps_serving(tmp_path, path):
    with ServerProcess(tmp_path / "s.duckdb", extra_args=("--query-timeout", "10", "--max-queries", "1")) as server:
        status, body = _post(server.http_url, path, TOO_MANY_TABLES)
        assert status == 400, body
        assert f"reads 100 tables, views, subqueries or table functions (at most {MAX_QUERY_RELATIONS})" in body
        status, body = _post(server.http_url, path, TOO_MANY_SELECTS)
        assert status == 400, body
        assert f"has 2000 SELECTs (at most {MAX_QUERY_SELECTS}:" in body
        status, body = _post(server.http_url, path, TOO_LONG)
        assert status == 400, body
        assert f"is {len(TOO_LONG):,} characters long (at most {MAX_QUERY_CHARS:,})" in body
        # right at the limits a query still runs, and ingest goes on: a span sent now is read back
        assert query(server.http_url, _joined(MAX_QUERY_RELATIONS)) == [[0]]
        assert len(query(server.http_url, _unioned(MAX_QUERY_SELECTS))) == MAX_QUERY_SELECTS
        as_parameter = "SELECT count(*) FROM spans WHERE trace_id IN (SELECT unnest(from_json(?, '[\"VARCHAR\"]')))"
        assert query(server.http_url, as_parameter, [json.dumps(MANY_IDS)]) == [[0]]  # what the refusal advises
        trace_id = send_span(server.http_url)
        assert query(server.http_url, "SELECT count(*) FROM spans WHERE trace_id = ?", [trace_id]) == [[1]]


def test_a_sql_assertion_too_costly_to_plan_is_refused_when_its_config_is_built():
    joined = _joined(100).replace("spans", "tool_calls")
    with pytest.raises(ValidationError, match=rf"reads 100 tables.*\(at most {MAX_QUERY_RELATIONS}\)"):
        CriteriaConfig(sql_assertions=[SqlAssertion(name="planned-for-ever", query=joined)])


def test_a_selection_of_more_trace_ids_than_the_query_length_cap_goes_through_a_server(tmp_path):
    """``--trace-id`` lists (grade, export) reach a server as one JSON parameter, not as literal SQL that the
    1 MiB cap would refuse: 40,000 ids select the one trace stored."""
    with ServerProcess(tmp_path / "s.duckdb") as server:
        trace_id = send_span(server.http_url)
        wait_until(lambda: query(server.http_url, "SELECT count(*) FROM traces") == [[1]], "the trace's trajectory")
        wanted = TraceSelection(trace_ids=[*MANY_IDS, trace_id])
        assert len(selection_sql(wanted)[0]) < MAX_QUERY_CHARS
        with RemoteStore(server.http_url) as store:
            assert selected_trace_ids(store, wanted) == [trace_id]
