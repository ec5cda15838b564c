"""QA of the query gate's caps on built values (``store/built_values.py``), on DuckDB 1.5 and 2.

Named arguments: DuckDB 2 binds ``name := value`` by name, in any order, and the gate read a call's arguments by
position, so ``range(step := 1, stop := 30000000, start := 0)`` (30 million items) was measured as a range of step 0,
and ``bitstring(length := n, bitstring := '1')`` as one of length 1: both ran. DuckDB 1.5 reads the same call by
position, so one query meant two things. A sized call with named arguments is now refused on both (DuckDB accepts
no names in printf or format).

A range of dates or times in an expression (a time axis: ``unnest(generate_series(TIMESTAMP …, INTERVAL 1 HOUR))``)
was refused saying that an argument "is not written in the query", which it is; the refusal now says it is not
written as an integer, and the same series in FROM, which streams, runs.

Text is counted in UTF-8 bytes, what DuckDB holds: ``repeat('😀', 90000)`` was counted as 90,000 characters and
built 360 KB, four times the cap; a fill or format character, and a bar's blocks (three bytes each), likewise.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.server_otlp import post
from tests.support.server_process import ServerProcess
from tests.support.server_requests import query, send_span
from tracegrade.errors import ConfigError, QueryRefused
from tracegrade.models.config import EvalConfig
from tracegrade.store import TraceStore

# (what, SQL, the call refused): each size past its cap once read by name (as DuckDB 2 reads it), within it by position
NAMED: list[tuple[str, str, str]] = [
    ("range", "SELECT len(range(step := 1, stop := 30000, start := 0))", "range"),
    ("generate_series", "SELECT len(generate_series(step := 1, stop := 30000, start := 0))", "generate_series"),
    ("bitstring", "SELECT bit_length(bitstring(length := 800000, bitstring := '1'))", "bitstring"),
    (
        "bitstring_agg",
        "SELECT bit_length(bitstring_agg(i::INT, max := 800000, min := 0)) FROM range(3) t(i)",
        "bitstring_agg",
    ),
]
# (what, within the cap in ASCII, past it in UTF-8 bytes): the same call with a wider character
WIDE: list[tuple[str, str, str]] = [
    ("repeat", "SELECT length(repeat('x', 30000))", "SELECT length(repeat('😀', 30000))"),
    ("lpad's fill", "SELECT length(lpad('a', 60000, '-'))", "SELECT length(lpad('a', 60000, 'é'))"),
    ("rpad's string", "SELECT length(rpad('ab', 60000, ' '))", "SELECT length(rpad('aé', 60000, ' '))"),
    ("format's fill", "SELECT length(format('{:*>30000}', 1))", "SELECT length(format('{:😀>30000}', 1))"),
    ("bar's blocks", "SELECT length(repeat('x', 40000))", "SELECT length(bar(1, 0, 1, 40000))"),
]
TIME_AXIS = "generate_series(TIMESTAMP '2026-01-01', TIMESTAMP '2026-01-02', INTERVAL 1 HOUR)"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TraceStore]:
    with TraceStore(tmp_path_factory.mktemp("qa19") / "s.duckdb") as opened:
        yield opened


@pytest.mark.parametrize(("what", "sql", "function"), NAMED, ids=[n[0] for n in NAMED])
def test_named_arguments_do_not_move_a_size_past_the_gate(store, what, sql, function):
    with pytest.raises(QueryRefused) as refused:
        store.query(sql)
    message = str(refused.value)
    assert message.startswith(f"{function}() at line 1, column "), message
    assert "its arguments are named (" in message and "write the arguments in order, without names" in message


def test_a_sql_assertion_with_named_size_arguments_is_refused_when_the_config_loads(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    bomb = {"name": "series", "query": "SELECT name FROM tool_calls\nWHERE len(range(step := 1, stop := 30000)) > 0"}
    path.write_text(json.dumps({"criteria": {"sql_assertions": [bomb]}}))
    with pytest.raises(ConfigError, match=r"'series'[\s\S]*range\(\) at line 2, column 11 .*arguments are named"):
        EvalConfig.from_file(path)


def test_a_named_argument_bomb_is_answered_400_by_a_server_which_keeps_serving(tmp_path: Path) -> None:
    with ServerProcess(tmp_path / "store.duckdb") as running:
        send_span(running.http_url)
        sql = NAMED[0][1]
        reply = post(f"{running.http_url}/v1/query", json.dumps({"sql": sql}).encode(), "application/json")
        assert reply.status == 400, reply.body
        assert reply.json()["message"].startswith("range() at line 1, column 12 "), reply.body
        assert query(running.http_url, "SELECT count(*) FROM spans") == [[1]]


def test_a_time_axis_in_an_expression_is_refused_as_not_integers_and_runs_in_from(store):
    with pytest.raises(QueryRefused) as refused:
        store.query(f"SELECT unnest({TIME_AXIS}) AS hour")
    message = str(refused.value)
    assert message.startswith("generate_series() at line 1, column 15 "), message
    assert "an argument is not written in the query as an integer" in message and "FROM range(n)" in message
    assert store.query(f"SELECT count(*), min(generate_series)::VARCHAR FROM {TIME_AXIS}").rows == [
        (25, "2026-01-01 00:00:00")
    ]


@pytest.mark.parametrize(("what", "narrow", "wide"), WIDE, ids=[w[0] for w in WIDE])
def test_text_is_counted_in_utf8_bytes_against_the_cap(store, what, narrow, wide):
    assert store.query(narrow).rows[0][0] > 0
    with pytest.raises(QueryRefused, match=r"it would build [\d,]+ bytes"):
        store.query(wide)
