"""One function call must not build a value past every limit: DuckDB looks for an interrupt only between chunks and
does not count a function's output against memory_limit, so ``SELECT length(repeat('x', 2000000000))`` took 4 GB
and a scalar ``len(range(30000000))`` 2 GB and half a minute before any time limit could stop them. The gate now
refuses, before anything runs, a call whose output is sized by an argument unless that size is an integer written
in the query within a cap; each rule is tried on a store opened directly, the bombs through a real
``tracegrade serve`` (which keeps serving), and in a SQL assertion's config."""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from tests.support.grading_cli import run_cli
from tests.support.server_otlp import get_text, post
from tests.support.server_process import ServerProcess
from tests.support.server_requests import query, send_span
from tracegrade.errors import ConfigError, QueryRefused
from tracegrade.models.config import EvalConfig
from tracegrade.store import TraceStore
from tracegrade.store.built_values import MAX_BUILT_CHARS, MAX_BUILT_ITEMS

CHARS, ITEMS = f"{MAX_BUILT_CHARS:,}", f"{MAX_BUILT_ITEMS:,}"

# (what, SQL, the function named, "line L, column C" of the call, the cap said)
BOMBS: list[tuple[str, str, str, str, str]] = [
    ("repeat of a string", "SELECT length(repeat('x', 2000000000))", "repeat", "line 1, column 15", CHARS),
    ("repeat of a blob", "SELECT octet_length(repeat('\\xAA'::BLOB, 1000000))", "repeat", "line 1, column 21", CHARS),
    ("repeat of a list", "SELECT len(repeat([1, 2, 3], 100000))", "repeat", "line 1, column 12", CHARS),
    ("lpad", "SELECT length(lpad('a', 500000000, 'x'))", "lpad", "line 1, column 15", CHARS),
    ("rpad on a second line", "SELECT 1,\n  rpad('a', 200000, ' ')", "rpad", "line 2, column 3", CHARS),
    ("scalar range", "SELECT len(range(30000000))", "range", "line 1, column 12", ITEMS),
    ("scalar range of start and stop", "SELECT len(range(5, 20000))", "range", "line 1, column 12", ITEMS),
    ("scalar generate_series", "SELECT len(generate_series(1, 10001))", "generate_series", "line 1, column 12", ITEMS),
    ("list_resize", "SELECT len(list_resize([1], 100000000))", "list_resize", "line 1, column 12", ITEMS),
    (
        "array_resize, its alias",
        "SELECT len(array_resize([1], 100000000, 0))",
        "array_resize",
        "line 1, column 12",
        ITEMS,
    ),
    ("printf width", "SELECT length(printf('%2000000000d', 1))", "printf", "line 1, column 15", CHARS),
    ("printf precision", "SELECT length(printf('%.500000f', 1.5))", "printf", "line 1, column 15", CHARS),
    ("format width", "SELECT length(format('{:>200000000}', 1))", "format", "line 1, column 15", CHARS),
    ("bar width", "SELECT length(bar(1, 0, 1, 100000000))", "bar", "line 1, column 15", CHARS),
    ("bitstring length", "SELECT bit_length(bitstring('1', 2000000000))", "bitstring", "line 1, column 19", CHARS),
    (
        "equi_width_bins",
        "SELECT len(equi_width_bins(0, 1000000, 100000000, false))",
        "equi_width_bins",
        "line 1, column 12",
        ITEMS,
    ),
    ("bitstring_agg", "SELECT bit_length(bitstring_agg(1, 0, 800000000))", "bitstring_agg", "line 1, column 19", CHARS),
    (
        "calls adding up in one row",
        "SELECT repeat('x', 60000) || repeat('y', 60000)",
        "repeat",
        "line 1, column 8",
        CHARS,
    ),
]
# sizes not written in the query: from a column, a subquery, a parameter-like expression, an argument of printf
NOT_WRITTEN: list[tuple[str, str, str]] = [
    ("repeat count from a column", "SELECT repeat('x', n) FROM (VALUES (3)) t(n)", "repeat"),
    ("repeat count from a subquery", "SELECT repeat('x', (SELECT 2000000000))", "repeat"),
    ("repeat count computed", "SELECT repeat('x', 1000 * 1000 * 1000)", "repeat"),
    ("repeat of a column's value", "SELECT repeat(name, 3) FROM (VALUES ('ab')) t(name)", "repeat"),
    ("scalar range of a column", "SELECT range(n) FROM (VALUES (3)) t(n)", "range"),
    ("lpad count from a column", "SELECT lpad('a', n, ' ') FROM (VALUES (3)) t(n)", "lpad"),
    ("printf width from an argument", "SELECT printf('%*d', 2000000000, 1)", "printf"),
    ("format width from an argument", "SELECT format('{:>{}}', 1, 2000000000)", "format"),
    ("printf of a column's format", "SELECT printf(f, 1) FROM (VALUES ('%5d')) t(f)", "printf"),
    ("list_resize size from a column", "SELECT list_resize([1], n) FROM (VALUES (3)) t(n)", "list_resize"),
    ("bitstring_agg without min and max", "SELECT bitstring_agg(i) FROM range(3) t(i)", "bitstring_agg"),
]
# the same bomb written so that case, quoting, qualification or nesting might hide it
DISGUISED: list[tuple[str, str]] = [
    ("capitals", "SELECT length(REPEAT('x', 2000000000))"),
    ("quoted name", "SELECT length(\"repeat\"('x', 2000000000))"),
    ("schema-qualified", "SELECT length(main.repeat('x', 2000000000))"),
    ("catalog-qualified", "SELECT length(system.main.repeat('x', 2000000000))"),
    ("a CAST and a string count", "SELECT length(repeat('x', CAST('2000000000' AS BIGINT)))"),
    ("in a CTE", "WITH big AS (SELECT repeat('x', 2000000000) AS v) SELECT length(v) FROM big"),
    ("in a lambda", "SELECT list_transform([1], x -> length(repeat('x', 2000000000)))"),
    ("in a lambda with its variable", "SELECT list_transform([2000000000], x -> length(repeat('x', x)))"),
    ("in a scalar subquery", "SELECT (SELECT length(repeat('x', 2000000000)))"),
    ("in ORDER BY", "SELECT 1 AS a ORDER BY length(repeat('x', 2000000000))"),
    ("in WHERE", "SELECT 1 WHERE length(repeat('x', 2000000000)) > 0"),
    ("as a table function's argument", "SELECT * FROM unnest(range(30000000))"),
    ("under EXPLAIN", "EXPLAIN SELECT len(range(30000000))"),
    ("generate_series, range's twin", "SELECT generate_series(1, 30000000)"),
    ("in GROUP BY", "SELECT count(*) FROM range(3) GROUP BY len(range(30000000))"),
]
# (SQL within the caps, its rows)
WITHIN: list[tuple[str, list[tuple]]] = [
    ("SELECT repeat('-', 40)", [("-" * 40,)]),
    ("SELECT repeat('ab', 50000)", [("ab" * 50000,)]),
    ("SELECT lpad(name, 20, ' ') FROM (VALUES ('ab')) t(name)", [(" " * 18 + "ab",)]),
    ("SELECT rpad(name, 4, '.') FROM (VALUES ('ab')) t(name)", [("ab..",)]),
    ("SELECT range(10)", [(list(range(10)),)]),
    ("SELECT range(10, 0, -3)", [([10, 7, 4, 1],)]),
    ("SELECT generate_series(1, 3)", [([1, 2, 3],)]),
    ("SELECT len(range(-(5), 9995))", [(10000,)]),
    ("SELECT list_resize([1, 2], 4, 0)", [([1, 2, 0, 0],)]),
    ("SELECT printf('%5d|%-4s|%.2f', 3, 'a', 1.5)", [("    3|a   |1.50",)]),
    ("SELECT format('{0:>5}|{0}|{{}}', 3)", [("    3|3|{}",)]),
    ("SELECT length(bar(0.5, 0, 1, 20)), length(bar(0.5, 0, 1))", [(20, 80)]),
    ("SELECT bitstring('1', 8)::VARCHAR", [("00000001",)]),
    ("SELECT equi_width_bins(0, 10, 2, false)", [([5.0, 10.0],)]),
    ("SELECT bitstring_agg(i::INT, 0, 7)::VARCHAR FROM range(3) t(i)", [("11100000",)]),
    ("SELECT count(*), max(range) FROM range(1000000)", [(1000000, 999999)]),  # the table function streams
    ("SELECT length(string_agg('x', '')) FROM range(1000000)", [(1000000,)]),  # the advised long string
]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TraceStore]:
    with TraceStore(tmp_path_factory.mktemp("built") / "s.duckdb") as opened:
        yield opened


@pytest.mark.parametrize(("what", "sql", "function", "where", "cap"), BOMBS, ids=[b[0] for b in BOMBS])
def test_each_bomb_is_refused_naming_the_call_its_place_the_rule_and_the_cap(store, what, sql, function, where, cap):
    with pytest.raises(QueryRefused) as refused:
        store.query(sql)
    message = str(refused.value)
    assert message.startswith(f"{function}() at {where} "), message
    assert "the rule:" in message or "in all" in message, message
    assert cap in message and ("FROM range(n)" in message or "lpad" in message or "min and max" in message), message


@pytest.mark.parametrize(("what", "sql", "function"), NOT_WRITTEN, ids=[n[0] for n in NOT_WRITTEN])
def test_a_size_not_written_in_the_query_is_refused(store, what, sql, function):
    with pytest.raises(QueryRefused, match=rf"^{function}\(\) at line 1, column \d+ .*is not written in the query"):
        store.query(sql)


@pytest.mark.parametrize(("what", "sql"), DISGUISED, ids=[d[0] for d in DISGUISED])
def test_case_quoting_qualification_and_nesting_do_not_hide_a_bomb(store, what, sql):
    with pytest.raises(QueryRefused, match=r"^(repeat|range|generate_series)\(\) at line 1, column \d+ .*was refused"):
        store.query(sql)


@pytest.mark.parametrize(("sql", "rows"), WITHIN, ids=[w[0] for w in WITHIN])
def test_uses_within_the_caps_run_and_give_duckdbs_answer(store, sql, rows):
    answer = store.query(sql).rows
    assert answer == rows
    assert answer == duckdb.connect().execute(sql).fetchall()  # the gate changes nothing about what runs


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, Path]]:
    tmp = tmp_path_factory.mktemp("built-serve")
    with ServerProcess(tmp / "store.duckdb") as running:
        send_span(running.http_url)
        yield running, tmp


@pytest.mark.parametrize(("what", "sql", "function", "where", "cap"), BOMBS, ids=[b[0] for b in BOMBS])
def test_the_server_answers_each_bomb_400_and_keeps_serving(server, what, sql, function, where, cap):
    running, _ = server
    reply = post(f"{running.http_url}/v1/query", json.dumps({"sql": sql}).encode(), "application/json")
    assert reply.status == 400, (what, reply.status, reply.body)
    assert reply.json()["message"].startswith(f"{function}() at {where} ")
    assert query(running.http_url, "SELECT count(*) FROM spans") == [[1]]


def test_the_ui_sql_page_and_the_cli_refuse_a_bomb_and_an_export_still_runs(server):
    running, tmp = server
    status, body = get_text(f"{running.http_url}/ui/api/sql?q={urllib.parse.quote('SELECT len(range(30000000))')}")
    assert status == 400 and "range() at line 1, column 12" in body, (status, body)
    refused = run_cli("sql", "--store", tmp / "store.duckdb", "SELECT length(repeat('x', 2000000000))")
    assert refused.exit_code != 0 and "repeat() at line 1, column 15" in refused.stderr, refused.stderr
    exported = run_cli("export", "--store", tmp / "store.duckdb", "-o", tmp / "export")
    assert exported.exit_code == 0, exported.stderr
    assert (tmp / "export" / "spans.parquet").stat().st_size > 0
    assert query(running.http_url, "SELECT repeat('-', 40)") == [["-" * 40]]


def test_a_sql_assertion_with_a_bomb_is_refused_when_the_config_loads(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    bomb = {"name": "huge", "query": "SELECT name FROM tool_calls\nWHERE length(repeat(name, 2000000000)) > 0"}
    path.write_text(json.dumps({"criteria": {"sql_assertions": [bomb]}}))
    with pytest.raises(ConfigError) as raised:
        EvalConfig.from_file(path)
    text = str(raised.value)
    assert "sql_assertions" in text and "'huge'" in text and "repeat()" in text and "not written in the query" in text
