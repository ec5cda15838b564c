"""`tracegrade sql` writes NULL, the empty string, BLOBs and floats unambiguously in every format.

Before, ``--format csv`` wrote NULL and '' alike (an empty field), BLOBs as Python reprs (``b'\\x00'``, which no
program reads back), lists holding bytes likewise, and floats cut to 6 significant digits; the table showed NULL
and '' alike too. Now CSV spells them as PostgreSQL's ``COPY ... CSV`` does (NULL an empty unquoted field, ''
as ``""``), BLOBs in base64 as ``--format json`` does, floats in full; the table shows NULL as ``NULL``. The CSV
is read back by DuckDB's own CSV reader (``allow_quoted_nulls=false``: a quoted empty field is the empty string).
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

from tracegrade.cli.main import cli
from tracegrade.store import TraceStore

QUERY = """
SELECT * FROM (VALUES
    (1, NULL::VARCHAR, NULL::BLOB, NULL::DOUBLE, NULL::BLOB[]),
    (2, '', ''::BLOB, 0.1234567891, []::BLOB[]),
    (3, 'a,"b"' || chr(10) || 'c', '\\x00\\xFFab'::BLOB, 'NaN'::DOUBLE, ['\\x01'::BLOB, NULL]),
    (4, 'NULL', 'hi'::BLOB, -1e300, ['hi'::BLOB])
) AS t(n, s, b, f, l) ORDER BY n
"""
# what each row holds, as Python reads the query from DuckDB
EXPECTED_S = [None, "", 'a,"b"\nc', "NULL"]
EXPECTED_B = [None, b"", b"\x00\xffab", b"hi"]


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    path = tmp_path / "store.duckdb"
    TraceStore(path).close()
    return path


def _sql(store_path: Path, *args: str) -> str:
    result = CliRunner().invoke(cli, ["sql", "--store", str(store_path), *args], catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    return result.stdout


def test_csv_tells_null_from_the_empty_string_and_writes_blobs_in_base64(store_path: Path, tmp_path: Path) -> None:
    out = _sql(store_path, "--format", "csv", QUERY)
    lines = out.split("\n")
    assert lines[0] == "n,s,b,f,l"
    assert lines[1] == "1,,,,"  # NULL: nothing, unquoted
    assert lines[2] == '2,"","",0.1234567891,[]'  # the empty string and the empty BLOB: quoted
    assert "b'" not in out and "\\x" not in out  # no Python reprs
    written = tmp_path / "out.csv"
    written.write_text(out, encoding="utf-8")
    rows = duckdb.sql(
        f"SELECT s, b, f, l FROM read_csv('{written}', header = true, allow_quoted_nulls = false, "
        "columns = {'n': 'INTEGER', 's': 'VARCHAR', 'b': 'VARCHAR', 'f': 'DOUBLE', 'l': 'VARCHAR'}) ORDER BY n"
    ).fetchall()
    assert [row[0] for row in rows] == EXPECTED_S
    assert [None if row[1] is None else base64.b64decode(row[1]) for row in rows] == EXPECTED_B
    assert rows[1][2] == 0.1234567891 and rows[3][2] == -1e300 and rows[2][2] != rows[2][2]  # in full; NaN
    assert [None if row[3] is None else json.loads(row[3]) for row in rows] == [
        None,
        [],
        [base64.b64encode(b"\x01").decode(), None],
        [base64.b64encode(b"hi").decode()],
    ]


def test_json_and_csv_write_the_same_blob_and_json_keeps_null_apart(store_path: Path) -> None:
    rows = json.loads(_sql(store_path, "--format", "json", QUERY))
    assert [row["s"] for row in rows] == EXPECTED_S
    assert [row["b"] for row in rows] == [None if b is None else base64.b64encode(b).decode() for b in EXPECTED_B]
    csv_blobs = [line.split(",")[2] for line in _sql(store_path, "--format", "csv", QUERY).split("\n")[1:3]]
    assert csv_blobs == ["", '""']
    assert rows[2]["b"] in _sql(store_path, "--format", "csv", QUERY)


def test_the_table_shows_null_as_null_and_blobs_as_json_writes_them(store_path: Path) -> None:
    query = "SELECT * FROM (VALUES (1, NULL::VARCHAR, 'hi'::BLOB), (2, '', NULL::BLOB)) AS t(n, s, b) ORDER BY n"
    result = CliRunner().invoke(cli, ["sql", "--store", str(store_path), query], env={"COLUMNS": "120"})
    assert result.exit_code == 0, result.stderr
    lines = [line for line in result.stdout.splitlines() if line.startswith("│")]
    cells = [[cell.strip() for cell in line.strip("│").split("│")] for line in lines]
    assert cells == [["1", "NULL", base64.b64encode(b"hi").decode()], ["2", "", "NULL"]]
