"""`tracegrade sql` spells DuckDB's types as DuckDB does, in every format, on a file and through a running server.

Before: the table showed NaN and the infinities as Python prints them (``nan``, ``inf``) and booleans as ``True``;
CSV wrote booleans as ``True``/``False`` (DuckDB's ``COPY … (FORMAT csv)`` writes ``true``/``false``); intervals
were Python's ``timedelta`` text in CSV (``1 day, 2:03:04``, which no SQL engine reads) and seconds in JSON and on
the wire; DECIMALs wider than a float went to JSON as another number (``1.2345678901234568e+29``); a fixed-size
ARRAY was a Python tuple in CSV (``(1, 2, 3)``); and through a server, CSV and the table wrote timestamps with a
``T`` and decimals without their scale (``1.5`` for ``1.50``), unlike the same query on the file.
"""

from __future__ import annotations

import csv
import io
import json
import urllib.request
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

from tracegrade.cli.main import cli
from tracegrade.store import TraceStore
from tracegrade.store.results import interval_text

_TOKEN = "s3cret-token-long-enough"

# the types whose spelling changed, one column each; every format must come out alike on a file and through a server
MIXED = """
SELECT 'NaN'::DOUBLE AS nan, 'inf'::DOUBLE AS inf, true AS yes, INTERVAL '1 day 2 hours 3 minutes 4 seconds' AS iv,
    1.50::DECIMAL(10,2) AS dec, 123456789012345678901234567890.123::DECIMAL(38,3) AS wide,
    TIMESTAMPTZ '2024-01-02 03:04:05.123456+00' AS tz, TIMESTAMP '2024-01-02 03:04:05' AS ts, DATE '2024-02-29' AS d,
    [1, 2, 3]::INTEGER[3] AS arr, {'i': INTERVAL 90 MINUTES, 'f': 'NaN'::DOUBLE} AS st
"""


@pytest.fixture(scope="module")
def store_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("sql_types") / "store.duckdb"
    TraceStore(path).close()
    return path


def _sql(store_path: Path, *args: str, token: str | None = None) -> str:
    token_args = ["--token", token] if token else []
    result = CliRunner().invoke(
        cli, ["sql", "--store", str(store_path), *token_args, *args], env={"COLUMNS": "200"}, catch_exceptions=False
    )
    assert result.exit_code == 0, result.stderr
    return result.stdout


def _table_cells(out: str) -> list[list[str]]:
    return [[cell.strip() for cell in line.strip("│").split("│")] for line in out.splitlines() if line.startswith("│")]


def test_the_table_shows_nan_infinities_and_booleans_as_duckdb_does(store_path: Path) -> None:
    query = "SELECT 'NaN'::DOUBLE AS a, 'inf'::DOUBLE AS b, '-inf'::DOUBLE AS c, true AS d, false AS e, 0.25 AS f"
    # the spelling of CSV and JSON (DuckDB reads it back: 'Infinity'::DOUBLE), not Python's nan and inf
    assert _table_cells(_sql(store_path, query)) == [["NaN", "Infinity", "-Infinity", "true", "false", "0.25"]]


def test_csv_writes_booleans_and_intervals_as_duckdbs_copy_does(store_path: Path, tmp_path: Path) -> None:
    query = (
        "SELECT * FROM (VALUES (1, true, INTERVAL '1 day 2 hours 3 minutes 4 seconds'),"
        " (2, false, INTERVAL '-1 day -2 hours'), (3, NULL, INTERVAL '0.5 seconds'), (4, true, INTERVAL 0 SECONDS))"
        " AS t(n, b, iv) ORDER BY n"
    )
    ours = _sql(store_path, "--format", "csv", query)
    copied = tmp_path / "duckdb.csv"
    duckdb.execute(f"COPY ({query}) TO '{copied}' (FORMAT csv, HEADER)")
    assert ours == copied.read_text()
    assert ours.splitlines()[1:3] == ["1,true,1 day 02:03:04", "2,false,-1 day -02:00:00"]
    written = tmp_path / "ours.csv"
    written.write_text(ours)
    columns = "{'n': 'INTEGER', 'b': 'BOOLEAN', 'iv': 'INTERVAL'}"
    read_back = duckdb.sql(f"SELECT b, iv FROM read_csv('{written}', header = true, columns = {columns}) ORDER BY n")
    assert read_back.fetchall() == duckdb.sql(f"SELECT b, iv FROM ({query}) ORDER BY n").fetchall()


@pytest.mark.parametrize(
    "interval",
    ["0 seconds", "1 day", "-1 day", "2 days", "-2 days -3 hours", "0.5 seconds", "-0.5 seconds", "1 day 0.000001 s"],
)
def test_interval_text_is_duckdbs_own(interval: str) -> None:
    [(text, value)] = duckdb.sql(f"SELECT INTERVAL '{interval}'::VARCHAR, INTERVAL '{interval}'").fetchall()
    assert interval_text(value) == text


def test_json_writes_intervals_as_csv_does_and_wide_decimals_exactly(store_path: Path) -> None:
    row = json.loads(_sql(store_path, "--format", "json", MIXED))[0]
    csv_row = _sql(store_path, "--format", "csv", MIXED).splitlines()[1]
    assert row["iv"] == "1 day 02:03:04" and ",1 day 02:03:04," in csv_row
    assert row["st"] == {"i": "01:30:00", "f": "NaN"}
    assert row["dec"] == 1.5  # a float holds it: a number
    assert row["wide"] == "123456789012345678901234567890.123"  # a float does not: its digits
    [(wide,)] = duckdb.sql("SELECT 123456789012345678901234567890.123::DECIMAL(38,3)").fetchall()
    assert Decimal(row["wide"]) == wide
    assert row["arr"] == [1, 2, 3] and ',"[1, 2, 3]",' in csv_row


@pytest.fixture(scope="module")
def served(store_path: Path) -> Iterator[str]:
    """A real `tracegrade serve` holding the store: the sql command goes through its POST /v1/query."""
    from .support.server_process import ServerProcess

    with ServerProcess(store_path, extra_args=("--token", _TOKEN)) as server:
        yield server.http_url


@pytest.mark.parametrize("fmt", ["table", "csv", "json"])
def test_every_format_through_a_server_is_what_the_file_gives(store_path: Path, fmt: str, served: str) -> None:
    direct_path = store_path.with_name("direct.duckdb")  # a store of its own: the server holds the other
    if not direct_path.exists():
        TraceStore(direct_path).close()
    direct = _sql(direct_path, "--format", fmt, MIXED)
    remote = _sql(store_path, "--format", fmt, MIXED, token=_TOKEN)
    assert remote == direct
    if fmt == "csv":
        fields = next(csv.DictReader(io.StringIO(direct)))
        assert fields.pop("tz").startswith("2024-01-02 ")  # in the session's time zone, with a space as DuckDB's
        assert fields == {
            "nan": "NaN",
            "inf": "Infinity",
            "yes": "true",
            "iv": "1 day 02:03:04",
            "dec": "1.50",
            "wide": "123456789012345678901234567890.123",
            "ts": "2024-01-02 03:04:05",
            "d": "2024-02-29",
            "arr": "[1, 2, 3]",
            "st": '{"i": "01:30:00", "f": "NaN"}',
        }


def test_the_server_answers_an_interval_as_duckdb_writes_it(store_path: Path, served: str) -> None:
    request = urllib.request.Request(
        f"{served}/v1/query",
        data=json.dumps({"sql": "SELECT INTERVAL '1 day 2 hours 3 minutes 4 seconds' AS iv"}).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {_TOKEN}"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        answer = json.loads(response.read())
    assert answer["types"] == ["INTERVAL"] and answer["rows"] == [["1 day 02:03:04"]]
