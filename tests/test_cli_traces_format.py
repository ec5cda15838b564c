"""`tracegrade traces`: whole trace ids on one line at any width; --format table|json|csv."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tracegrade.cli.main import cli
from tracegrade.store import TraceStore

from .support.store_records import FIXTURES, make_span

LONG_QUERY = "Please compare the weather in Paris, Lyon, Marseille and Toulouse over the next ten days " * 3


def run(*args: str | Path, columns: int = 80) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False, env={"COLUMNS": str(columns)})
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(scope="module")
def store_path(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("traces-format") / "store.duckdb"
    code, out, err = run("import", "--store", path, *FIXTURES)
    assert code == 0, out + err
    long_one = make_span(
        950,
        1,
        name="tracegrade.turn a-case-id-that-is-long-too",
        status_code="ERROR",
        attributes={"tracegrade.case.id": "a-case-id-that-is-long-too", "tracegrade.turn.input": LONG_QUERY},
        resource={"service.name": "a-service-with-a-rather-long-name"},
    )
    with TraceStore(path) as store:
        store.rebuild_trajectories(store.write([long_one]).trace_ids)
    return path


def trace_ids(store_path: Path) -> list[str]:
    code, out, _ = run("traces", "--store", store_path, "--format", "json")
    assert code == 0
    return [row["trace_id"] for row in json.loads(out)]


@pytest.mark.parametrize("columns", [80, 120])
def test_table_keeps_every_trace_id_whole_on_one_line(store_path: Path, columns: int) -> None:
    ids = trace_ids(store_path)
    assert len(ids) == len(FIXTURES) + 1
    code, out, _ = run("traces", "--store", store_path, columns=columns)
    assert code == 0
    lines = out.splitlines()
    assert all(len(line) <= columns for line in lines)
    for trace_id in ids:
        assert sum(trace_id in line for line in lines) == 1, f"{trace_id} not whole on one line:\n{out}"
    # one line per trace plus header, rule and caption: nothing wraps
    assert len([line for line in lines if line.strip()]) == len(ids) + 3


def test_narrow_table_has_fewer_columns_than_a_wide_one(store_path: Path) -> None:
    headers = {}
    for columns in (80, 120, 200):
        _, out, _ = run("traces", "--store", store_path, columns=columns)
        headers[columns] = out.splitlines()[0].split()
    assert headers[80][:1] == ["trace_id"] and "tools" not in headers[80]
    assert len(headers[80]) < len(headers[120]) < len(headers[200])
    assert "service" in headers[200] and "root" in headers[200]


def test_json_and_csv_parse_with_every_column(store_path: Path) -> None:
    ids = trace_ids(store_path)
    code, out, _ = run("traces", "--store", store_path, "--format", "csv")
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [row["trace_id"] for row in rows] == ids
    long_row = next(row for row in rows if row["case_id"] == "a-case-id-that-is-long-too")
    assert long_row["user_query"] == LONG_QUERY and long_row["status"] == "ERROR"
    code, out, _ = run("traces", "--store", store_path, "--format", "json", "--limit", "2")
    assert code == 0 and [row["trace_id"] for row in json.loads(out)] == ids[:2]


def test_table_shows_user_text_literally(store_path: Path, tmp_path: Path) -> None:
    path = tmp_path / "markup.duckdb"
    span = make_span(960, 1, name="tracegrade.turn c1", attributes={"tracegrade.turn.input": "[bold]not markup[/bold]"})
    with TraceStore(path) as store:
        store.rebuild_trajectories(store.write([span]).trace_ids)
    code, out, _ = run("traces", "--store", path, columns=120)
    assert code == 0 and "[bold]not markup[/bold]" in out
